/// Writes one generated response as JSON bytes.
struct GeneratorWriter {
    let configuration: SyncResponseGenerator.Configuration
    var random: SeededGenerator
    var output: [UInt8] = []
    var timestamp: Int64 = 1_700_000_000_000

    init(configuration: SyncResponseGenerator.Configuration) {
        self.configuration = configuration
        self.random = SeededGenerator(seed: configuration.seed)
        output.reserveCapacity(configuration.rooms * (configuration.eventsPerRoom * 800 + 8_000) + 4_096)
    }

    // MARK: JSON output

    mutating func raw(_ text: StaticString) {
        output.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func raw(_ text: String) { output.append(contentsOf: text.utf8) }

    mutating func number(_ value: Int64) { output.append(contentsOf: String(value).utf8) }

    /// A JSON string. With `escapingNonASCII`, every non-ASCII scalar is written as `\uXXXX`
    /// (surrogate pairs above the BMP), as some servers do.
    mutating func string(_ text: String, escapingNonASCII: Bool = false) {
        output.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": raw("\\\"")
            case "\\": raw("\\\\")
            case "\n": raw("\\n")
            case "\t": raw("\\t")
            case "\r": raw("\\r")
            case _ where scalar.value < 0x20 || (escapingNonASCII && scalar.value > 0x7E):
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16)
                    raw("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
                }
            default: output.append(contentsOf: String(scalar).utf8)
            }
        }
        output.append(UInt8(ascii: "\""))
    }

    mutating func key(_ name: StaticString) {
        output.append(UInt8(ascii: "\""))
        raw(name)
        raw("\":")
    }

    mutating func token(_ alphabet: [UInt8], count: Int) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count)
        for _ in 0..<count { bytes.append(alphabet[random.below(alphabet.count)]) }
        return String(decoding: bytes, as: UTF8.self)
    }

    mutating func eventID() -> String { "$" + token(GeneratorText.base64URL, count: 43) }

    mutating func nextTimestamp() -> Int64 {
        timestamp += Int64(1_000 + random.below(90_000))
        return timestamp
    }

    mutating func sentence(words count: Int) -> String {
        var words: [String] = []
        for _ in 0..<count { words.append(random.pick(GeneratorText.words)) }
        return words.joined(separator: " ")
    }

    // MARK: Response

    mutating func writeResponse() {
        raw("{")
        key("account_data")
        writeGlobalAccountData()
        raw(",")
        key("to_device")
        writeToDevice()
        raw(",\"device_lists\":{\"changed\":[\"@user1:symorva.example\",\"@user2:symorva.example\"],\"left\":[]}")
        raw(",\"device_one_time_keys_count\":{\"signed_curve25519\":50}")
        raw(",\"presence\":{\"events\":[]}")
        raw(",\"rooms\":{")
        let invited = max(configuration.rooms / 50, configuration.rooms >= 10 ? 1 : 0)
        let left = invited
        let joined = configuration.rooms - invited - left
        key("join")
        raw("{")
        for index in 0..<joined {
            if index > 0 { raw(",") }
            string(SyncResponseGenerator.roomID(index))
            raw(":")
            writeJoinedRoom(index)
        }
        raw("},")
        key("invite")
        raw("{")
        for index in joined..<(joined + invited) {
            if index > joined { raw(",") }
            string(SyncResponseGenerator.roomID(index))
            raw(":")
            writeInvitedRoom(index)
        }
        raw("},")
        key("leave")
        raw("{")
        for index in (joined + invited)..<configuration.rooms {
            if index > joined + invited { raw(",") }
            string(SyncResponseGenerator.roomID(index))
            raw(":")
            writeLeftRoom(index)
        }
        raw("}},")
        key("next_batch")
        string(configuration.nextBatch)
        raw("}")
    }

    mutating func writeGlobalAccountData() {
        raw("{\"events\":[{\"type\":\"m.push_rules\",\"content\":{\"global\":{\"room\":[")
        var first = true
        for index in stride(from: 3, to: configuration.rooms, by: 17) {
            if !first { raw(",") }
            first = false
            raw("{\"rule_id\":")
            string(SyncResponseGenerator.roomID(index))
            raw(",\"actions\":[\"dont_notify\"],\"default\":false,\"enabled\":true}")
        }
        raw("],\"override\":[],\"content\":[],\"sender\":[],\"underride\":[]}}},")
        raw("{\"type\":\"m.direct\",\"content\":{\"@user7:symorva.example\":[")
        string(SyncResponseGenerator.roomID(1))
        raw("]}}]}")
    }

    mutating func writeToDevice() {
        raw("{\"events\":[")
        for index in 0..<3 {
            if index > 0 { raw(",") }
            raw("{\"type\":\"m.room.encrypted\",\"sender\":\"@user\(index):symorva.example\",\"content\":{")
            raw("\"algorithm\":\"m.olm.v1.curve25519-aes-sha2\",\"sender_key\":")
            string(token(GeneratorText.base64, count: 43))
            raw(",\"ciphertext\":{")
            string(token(GeneratorText.base64, count: 43))
            raw(":{\"type\":0,\"body\":")
            string(token(GeneratorText.base64, count: 600))
            raw("}}}}")
        }
        raw("]}")
    }
}
