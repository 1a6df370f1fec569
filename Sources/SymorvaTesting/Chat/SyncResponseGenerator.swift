/// Builds realistic `/sync` responses for tests and benchmarks, deterministically from a seed.
///
/// An initial-sync-shaped response: joined rooms with full state (create, power levels, join
/// rules, history visibility, name, topic, avatar, alias, encryption, members with display
/// names), timelines mixing messages with reactions, edits, replies, thread replies, redactions
/// and `m.room.encrypted` events with fake Megolm ciphertext, receipts and typing, tags, unread
/// counts, summaries with heroes; a few invited and left rooms; global account data with push
/// rules, to-device events, device-list changes and one-time-key counts.
///
/// Bodies mix ASCII with emoji (ZWJ sequences, flags, skin tones), CJK, right-to-left scripts,
/// combining marks, quotes, backslashes and newlines, and some display names use `\uXXXX`
/// escapes (including surrogate pairs), so decoders meet every string case. The same
/// configuration always produces the same bytes. 1,000 rooms × 50 events × 20 members is about
/// 47 MB.
public struct SyncResponseGenerator: Sendable {
    /// What to generate.
    public struct Configuration: Sendable, Hashable {
        /// Rooms in the response (about 2% of them invites and 2% left rooms).
        public var rooms: Int
        /// Timeline events per joined room.
        public var eventsPerRoom: Int
        /// Members per room.
        public var membersPerRoom: Int
        /// The PRNG seed.
        public var seed: UInt64
        /// The response's `next_batch`.
        public var nextBatch: String

        /// Creates a configuration.
        public init(
            rooms: Int = 1000, eventsPerRoom: Int = 50, membersPerRoom: Int = 20, seed: UInt64 = 0x5EED_CAFE,
            nextBatch: String = "s72595_4483_1934"
        ) {
            self.rooms = rooms
            self.eventsPerRoom = eventsPerRoom
            self.membersPerRoom = membersPerRoom
            self.seed = seed
            self.nextBatch = nextBatch
        }
    }

    /// What is generated.
    public var configuration: Configuration

    /// The user the response is for (a member of every room).
    public static let ownUserID = "@me:symorva.example"

    /// Creates a generator.
    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// The response's bytes.
    public func generate() -> [UInt8] {
        var writer = GeneratorWriter(configuration: configuration)
        writer.writeResponse()
        return writer.output
    }

    /// The ID of room number `index`, as the generated response names it.
    public static func roomID(_ index: Int) -> String {
        "!room\(String(index, radix: 36))AbCdEfGhIjKl:symorva.example"
    }
}

/// SplitMix64: a small, fast, reproducible random stream from a seed, for test data and seeded
/// scenarios (print the seed, replay it).
///
/// ```swift
/// var random = SeededGenerator(seed: seed)
/// let body = random.pick(["hello", "@room"]); if random.chance(10) { … }
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    var state: UInt64

    /// A stream that starts from `seed`.
    public init(seed: UInt64) { state = seed }

    /// The stream of `seed` with its first `skipping` values already drawn (the machine walks'
    /// per-seed coverage checks were tuned on the stream from its second value).
    public init(seed: UInt64, skipping: Int) {
        state = seed &+ UInt64(max(0, skipping)) &* 0x9E37_79B9_7F4A_7C15
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (`0` when `bound` is below 1).
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(max(1, bound))) }
    /// `true` `percent` times in a hundred.
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }
    /// One of `values` (not empty).
    public mutating func pick<T>(_ values: [T]) -> T { values[below(values.count)] }
}

/// Word pools for bodies and names.
enum GeneratorText {
    static let words = [
        "hello", "meeting", "tomorrow", "the", "deploy", "looks", "good", "can", "you", "review", "this", "please",
        "thanks", "lunch", "at", "noon", "café", "naïve", "résumé", "déjà", "vu", "Zürich", "Ærøskøbing",
        "👍", "🎉", "🔥", "😂", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "👋🏽", "🧑🏿‍💻", "❤️", "🏳️‍🌈",
        "你好", "世界", "会议", "明天", "日本語", "テスト", "한국어", "안녕하세요",
        "مرحبا", "بالعالم", "שלום", "עולם", "سلام",
        "e\u{301}", "a\u{308}\u{304}", "Z\u{351}\u{34B}a\u{36E}l\u{35B}g\u{32D}o", "ñ", "ǅ",
        "\"quoted\"", "back\\slash", "tab\there", "line\nbreak", "<b>html</b>", "50%", "#hashtag", "@mention",
        "https://example.org/a?b=c&d=e",
    ]
    static let firstNames = [
        "Alice", "Bob", "Chloé", "Dmitri", "Émile", "Fatima", "Güneş", "Hiroshi", "Ingrid", "José", "Kwame", "Léa",
        "Mateus", "Nadia", "Oğuz", "Priya", "Qing", "Rafael", "Søren", "Tanvi", "Uriel", "Valentina", "Wei",
        "Xiadani", "Yusuf", "Zoë", "李娜", "山田", "محمد", "דוד", "Ζωή", "Анна",
    ]
    static let emojiKeys = ["👍", "❤️", "😂", "🎉", "👀", "🙏", "🔥", "👍🏽", "🇫🇷", "✅"]
    static let base64 = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let base64URL = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
}
