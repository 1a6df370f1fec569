/// One entry of the Matrix specification's SAS emoji table: the number a 6-bit group of the
/// short authentication string selects, the character and its English description.
package struct SASEmoji: Sendable, Hashable {
    /// The table index, `0...63`.
    package let number: Int
    /// The emoji, as the spec lists it (with its variation selector where it has one).
    package let character: String
    /// The spec's English name (`Dog`, `Thumbs Up`), what a screen shows under the emoji.
    package let description: String

    package init(number: Int, character: String, description: String) {
        self.number = number
        self.character = character
        self.description = description
    }
}

/// The short authentication string both devices show: seven emoji and three four-digit numbers,
/// derived from the same SAS bytes (the spec's "SAS method: emoji" and "SAS method: decimal").
///
/// Not a secret (the two people compare it out loud), but it only means something to them:
/// descriptions print the case name only.
package struct SASCode: Sendable, Hashable, CustomStringConvertible {
    /// The six bytes the SAS key agreement produced (`generate_bytes` with the spec's info).
    package let bytes: [UInt8]

    /// `nil` when fewer than six bytes were given (the spec asks for six).
    package init?(bytes: [UInt8]) {
        guard bytes.count >= 6 else { return nil }
        self.bytes = Array(bytes.prefix(6))
    }

    /// The seven emoji: the first 42 bits, six at a time, index the spec's table.
    package var emoji: [SASEmoji] {
        var bits: UInt64 = 0
        for byte in bytes { bits = bits << 8 | UInt64(byte) }
        return (0..<7).map { index in SASEmoji.table[Int((bits >> (42 - 6 * UInt64(index))) & 0x3F)] }
    }

    /// The three numbers, each 1000...9191: the first 39 bits, 13 at a time, plus 1000.
    package var decimals: [Int] {
        let b = bytes.map(Int.init)
        return [
            (b[0] << 5 | b[1] >> 3) + 1000,
            ((b[1] & 0x7) << 10 | b[2] << 2 | b[3] >> 6) + 1000,
            ((b[3] & 0x3F) << 7 | b[4] >> 1) + 1000,
        ]
    }

    package var description: String { "SASCode(<not logged>)" }
}

extension SASEmoji {
    /// The specification's table (`data-definitions/sas-emoji.json` of matrix-org/matrix-spec),
    /// in its order: entry `n` is the emoji for the 6-bit value `n`.
    package static let table: [SASEmoji] = [
        SASEmoji(number: 0, character: "\u{1F436}", description: "Dog"),
        SASEmoji(number: 1, character: "\u{1F431}", description: "Cat"),
        SASEmoji(number: 2, character: "\u{1F981}", description: "Lion"),
        SASEmoji(number: 3, character: "\u{1F40E}", description: "Horse"),
        SASEmoji(number: 4, character: "\u{1F984}", description: "Unicorn"),
        SASEmoji(number: 5, character: "\u{1F437}", description: "Pig"),
        SASEmoji(number: 6, character: "\u{1F418}", description: "Elephant"),
        SASEmoji(number: 7, character: "\u{1F430}", description: "Rabbit"),
        SASEmoji(number: 8, character: "\u{1F43C}", description: "Panda"),
        SASEmoji(number: 9, character: "\u{1F413}", description: "Rooster"),
        SASEmoji(number: 10, character: "\u{1F427}", description: "Penguin"),
        SASEmoji(number: 11, character: "\u{1F422}", description: "Turtle"),
        SASEmoji(number: 12, character: "\u{1F41F}", description: "Fish"),
        SASEmoji(number: 13, character: "\u{1F419}", description: "Octopus"),
        SASEmoji(number: 14, character: "\u{1F98B}", description: "Butterfly"),
        SASEmoji(number: 15, character: "\u{1F337}", description: "Flower"),
        SASEmoji(number: 16, character: "\u{1F333}", description: "Tree"),
        SASEmoji(number: 17, character: "\u{1F335}", description: "Cactus"),
        SASEmoji(number: 18, character: "\u{1F344}", description: "Mushroom"),
        SASEmoji(number: 19, character: "\u{1F30F}", description: "Globe"),
        SASEmoji(number: 20, character: "\u{1F319}", description: "Moon"),
        SASEmoji(number: 21, character: "\u{2601}\u{FE0F}", description: "Cloud"),
        SASEmoji(number: 22, character: "\u{1F525}", description: "Fire"),
        SASEmoji(number: 23, character: "\u{1F34C}", description: "Banana"),
        SASEmoji(number: 24, character: "\u{1F34E}", description: "Apple"),
        SASEmoji(number: 25, character: "\u{1F353}", description: "Strawberry"),
        SASEmoji(number: 26, character: "\u{1F33D}", description: "Corn"),
        SASEmoji(number: 27, character: "\u{1F355}", description: "Pizza"),
        SASEmoji(number: 28, character: "\u{1F382}", description: "Cake"),
        SASEmoji(number: 29, character: "\u{2764}\u{FE0F}", description: "Heart"),
        SASEmoji(number: 30, character: "\u{1F600}", description: "Smiley"),
        SASEmoji(number: 31, character: "\u{1F916}", description: "Robot"),
        SASEmoji(number: 32, character: "\u{1F3A9}", description: "Hat"),
        SASEmoji(number: 33, character: "\u{1F453}", description: "Glasses"),
        SASEmoji(number: 34, character: "\u{1F527}", description: "Spanner"),
        SASEmoji(number: 35, character: "\u{1F385}", description: "Santa"),
        SASEmoji(number: 36, character: "\u{1F44D}", description: "Thumbs Up"),
        SASEmoji(number: 37, character: "\u{2602}\u{FE0F}", description: "Umbrella"),
        SASEmoji(number: 38, character: "\u{231B}", description: "Hourglass"),
        SASEmoji(number: 39, character: "\u{23F0}", description: "Clock"),
        SASEmoji(number: 40, character: "\u{1F381}", description: "Gift"),
        SASEmoji(number: 41, character: "\u{1F4A1}", description: "Light Bulb"),
        SASEmoji(number: 42, character: "\u{1F4D5}", description: "Book"),
        SASEmoji(number: 43, character: "\u{270F}\u{FE0F}", description: "Pencil"),
        SASEmoji(number: 44, character: "\u{1F4CE}", description: "Paperclip"),
        SASEmoji(number: 45, character: "\u{2702}\u{FE0F}", description: "Scissors"),
        SASEmoji(number: 46, character: "\u{1F512}", description: "Lock"),
        SASEmoji(number: 47, character: "\u{1F511}", description: "Key"),
        SASEmoji(number: 48, character: "\u{1F528}", description: "Hammer"),
        SASEmoji(number: 49, character: "\u{260E}\u{FE0F}", description: "Telephone"),
        SASEmoji(number: 50, character: "\u{1F3C1}", description: "Flag"),
        SASEmoji(number: 51, character: "\u{1F682}", description: "Train"),
        SASEmoji(number: 52, character: "\u{1F6B2}", description: "Bicycle"),
        SASEmoji(number: 53, character: "\u{2708}\u{FE0F}", description: "Aeroplane"),
        SASEmoji(number: 54, character: "\u{1F680}", description: "Rocket"),
        SASEmoji(number: 55, character: "\u{1F3C6}", description: "Trophy"),
        SASEmoji(number: 56, character: "\u{26BD}", description: "Ball"),
        SASEmoji(number: 57, character: "\u{1F3B8}", description: "Guitar"),
        SASEmoji(number: 58, character: "\u{1F3BA}", description: "Trumpet"),
        SASEmoji(number: 59, character: "\u{1F514}", description: "Bell"),
        SASEmoji(number: 60, character: "\u{2693}", description: "Anchor"),
        SASEmoji(number: 61, character: "\u{1F3A7}", description: "Headphones"),
        SASEmoji(number: 62, character: "\u{1F4C1}", description: "Folder"),
        SASEmoji(number: 63, character: "\u{1F4CC}", description: "Pin"),
    ]
}
