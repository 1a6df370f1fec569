// A small, single-pass JSON reader over raw bytes, for the `/sync` hot path.
//
// It never builds a tree: callers walk objects and arrays key by key, read the few scalars
// they need, and skip (or keep as a byte range) everything else. Skipping validates the JSON
// grammar — balanced brackets, commas and colons, terminated strings with valid escapes,
// well-formed numbers and literals — so a kept range is always a complete JSON value. It does
// not validate UTF-8 inside strings: strings read as `String` are repaired by Swift's decoder,
// and raw ranges are stored as the server sent them.

/// Where and why the JSON is not well formed.
struct JSONScanError: Error, Sendable, Hashable {
    /// Why the scanner stopped.
    enum Reason: Sendable, Hashable {
        case unexpectedEnd, unexpectedByte, invalidEscape, invalidNumber, controlCharacter, tooDeep
        /// Well-formed JSON, but a section that must be an object is not (used by the decoders).
        case unexpectedStructure
        /// Well-formed JSON without a required member (used by the decoders).
        case missingMember
    }
    /// The byte offset of the problem in the document.
    var offset: Int
    /// What was wrong there.
    var reason: Reason
}

/// An object being walked: tells the first member from the following ones (which need a comma).
struct JSONContainerCursor {
    var first = true
}

/// A key of an object: its bytes (without quotes) and whether it contains escapes.
struct JSONKey {
    var range: Range<Int>
    var hasEscapes: Bool
}

/// The scanner itself. It reads from a buffer that the caller keeps alive and unmodified.
struct JSONScanner {
    /// The document.
    let bytes: UnsafeRawBufferPointer
    /// The next byte to read.
    var index: Int

    /// The maximum nesting of arrays and objects; deeper documents are refused, not recursed.
    static let maximumDepth = 200

    init(_ bytes: UnsafeRawBufferPointer, at index: Int = 0) {
        self.bytes = bytes
        self.index = index
    }

    // MARK: Bytes

    @inline(__always) func byte(at offset: Int) -> UInt8 { bytes.load(fromByteOffset: offset, as: UInt8.self) }

    func error(_ reason: JSONScanError.Reason) -> JSONScanError { JSONScanError(offset: index, reason: reason) }

    @inline(__always) mutating func skipWhitespace() {
        while index < bytes.count {
            switch byte(at: index) {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    /// The next non-whitespace byte, without consuming it; `nil` at the end.
    @inline(__always) mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < bytes.count ? byte(at: index) : nil
    }

    @inline(__always) mutating func expect(_ expected: UInt8) throws(JSONScanError) {
        guard let next = peek() else { throw error(.unexpectedEnd) }
        guard next == expected else { throw error(.unexpectedByte) }
        index += 1
    }

    /// Whether only whitespace is left.
    mutating func isAtEnd() -> Bool { peek() == nil }

    // MARK: Containers

    /// Consumes `{`.
    mutating func beginObject() throws(JSONScanError) -> JSONContainerCursor {
        try expect(UInt8(ascii: "{"))
        return JSONContainerCursor()
    }

    /// The next key of the object (its `:` consumed), or `nil` after consuming the closing `}`.
    mutating func nextKey(_ cursor: inout JSONContainerCursor) throws(JSONScanError) -> JSONKey? {
        guard try advance(&cursor, closing: UInt8(ascii: "}")) else { return nil }
        guard index < bytes.count, byte(at: index) == UInt8(ascii: "\"") else { throw error(.unexpectedByte) }
        let (range, escaped) = try scanString()
        try expect(UInt8(ascii: ":"))
        return JSONKey(range: range, hasEscapes: escaped)
    }

    /// Consumes `[`.
    mutating func beginArray() throws(JSONScanError) -> JSONContainerCursor {
        try expect(UInt8(ascii: "["))
        return JSONContainerCursor()
    }

    /// Whether another element follows (its comma consumed), or `false` after consuming `]`.
    mutating func nextElement(_ cursor: inout JSONContainerCursor) throws(JSONScanError) -> Bool {
        try advance(&cursor, closing: UInt8(ascii: "]"))
    }

    /// Moves to the container's next member: consumes the comma before any but the first, and
    /// returns `false` after consuming `closing`.
    @inline(__always)
    private mutating func advance(_ cursor: inout JSONContainerCursor, closing: UInt8) throws(JSONScanError) -> Bool {
        guard let next = peek() else { throw error(.unexpectedEnd) }
        if next == closing {
            index += 1
            return false
        }
        if cursor.first {
            cursor.first = false
        } else {
            guard next == UInt8(ascii: ",") else { throw error(.unexpectedByte) }
            index += 1
            skipWhitespace()
        }
        return true
    }

    /// Whether `key` is exactly `name` (ASCII), comparing bytes without building a string.
    func key(_ key: JSONKey, is name: StaticString) -> Bool {
        if key.hasEscapes { return decodeString(key.range) == name.description }
        guard key.range.count == name.utf8CodeUnitCount else { return false }
        let pointer = name.utf8Start
        var offset = 0
        for position in key.range {
            if byte(at: position) != pointer[offset] { return false }
            offset += 1
        }
        return true
    }

    /// The key as a string.
    func string(of key: JSONKey) -> String {
        key.hasEscapes ? decodeString(key.range) : plainString(key.range)
    }

    // MARK: Scalars

    /// Reads a string value.
    mutating func readString() throws(JSONScanError) -> String {
        guard peek() == UInt8(ascii: "\"") else { throw error(index < bytes.count ? .unexpectedByte : .unexpectedEnd) }
        let (range, escaped) = try scanString()
        return escaped ? decodeString(range) : plainString(range)
    }

    /// Reads a string if the next value is one; otherwise skips the value and returns `nil`.
    mutating func readStringOrSkip() throws(JSONScanError) -> String? {
        if peek() == UInt8(ascii: "\"") { return try readString() }
        try skipValue()
        return nil
    }

    /// Reads an integer (a number with a fraction or exponent is truncated); `nil` (the value
    /// skipped) when the value is not a number.
    mutating func readIntegerOrSkip() throws(JSONScanError) -> Int64? {
        guard let next = peek(), next == UInt8(ascii: "-") || (next >= 0x30 && next <= 0x39) else {
            try skipValue()
            return nil
        }
        let start = index
        let isInteger = try scanNumber()
        if isInteger, index - start <= 18 {
            var value: Int64 = 0
            var position = start
            let negative = byte(at: position) == UInt8(ascii: "-")
            if negative { position += 1 }
            while position < index {
                value = value &* 10 &+ Int64(byte(at: position) &- 0x30)
                position += 1
            }
            return negative ? -value : value
        }
        guard let double = Double(plainString(start..<index)), double.isFinite, abs(double) < 9.2e18 else { return nil }
        return Int64(double)
    }

    /// Reads `true` or `false`; `nil` (the value skipped) for anything else.
    mutating func readBoolOrSkip() throws(JSONScanError) -> Bool? {
        switch peek() {
        case UInt8(ascii: "t"):
            try skipValue()
            return true
        case UInt8(ascii: "f"):
            try skipValue()
            return false
        default:
            try skipValue()
            return nil
        }
    }

    /// Skips one value and returns its byte range (whitespace around it excluded).
    mutating func readRawValue() throws(JSONScanError) -> Range<Int> {
        skipWhitespace()
        let start = index
        try skipValue()
        return start..<index
    }

    /// Skips one complete value, checking its grammar.
    mutating func skipValue(depth: Int = 0) throws(JSONScanError) {
        guard let next = peek() else { throw error(.unexpectedEnd) }
        switch next {
        case UInt8(ascii: "\""):
            _ = try scanString()
        case UInt8(ascii: "{"):
            guard depth < Self.maximumDepth else { throw error(.tooDeep) }
            var cursor = try beginObject()
            while try nextKey(&cursor) != nil { try skipValue(depth: depth + 1) }
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error(.tooDeep) }
            var cursor = try beginArray()
            while try nextElement(&cursor) { try skipValue(depth: depth + 1) }
        case UInt8(ascii: "t"): try scanLiteral("true")
        case UInt8(ascii: "f"): try scanLiteral("false")
        case UInt8(ascii: "n"): try scanLiteral("null")
        case UInt8(ascii: "-"), 0x30...0x39: _ = try scanNumber()
        default: throw error(.unexpectedByte)
        }
    }

    private mutating func scanLiteral(_ literal: StaticString) throws(JSONScanError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error(.unexpectedEnd) }
        for offset in 0..<count where byte(at: index + offset) != literal.utf8Start[offset] {
            throw error(.unexpectedByte)
        }
        index += count
    }

    /// Scans a number per RFC 8259; returns whether it has neither fraction nor exponent.
    private mutating func scanNumber() throws(JSONScanError) -> Bool {
        var isInteger = true
        if byte(at: index) == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw error(.unexpectedEnd) }
        if byte(at: index) == 0x30 {
            index += 1
        } else {
            guard scanDigits() > 0 else { throw error(.invalidNumber) }
        }
        if index < bytes.count, byte(at: index) == UInt8(ascii: ".") {
            index += 1
            isInteger = false
            guard scanDigits() > 0 else { throw error(.invalidNumber) }
        }
        if index < bytes.count, byte(at: index) | 0x20 == UInt8(ascii: "e") {
            index += 1
            isInteger = false
            if index < bytes.count, byte(at: index) == UInt8(ascii: "+") || byte(at: index) == UInt8(ascii: "-") {
                index += 1
            }
            guard scanDigits() > 0 else { throw error(.invalidNumber) }
        }
        return isInteger
    }

    private mutating func scanDigits() -> Int {
        let start = index
        while index < bytes.count, byte(at: index) &- 0x30 < 10 { index += 1 }
        return index - start
    }

    /// Scans a string starting at its opening quote; returns the range between the quotes and
    /// whether it contains escapes. Eight bytes at a time until a quote, backslash or control
    /// byte may be near.
    mutating func scanString() throws(JSONScanError) -> (Range<Int>, Bool) {
        index += 1
        let start = index
        var escaped = false
        let count = bytes.count
        while true {
            while index + 8 <= count {
                let word = bytes.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if !Self.mayContainSpecialByte(word) {
                    index += 8
                } else {
                    break
                }
            }
            guard index < count else { throw error(.unexpectedEnd) }
            let current = byte(at: index)
            if current == UInt8(ascii: "\"") {
                index += 1
                return (start..<(index - 1), escaped)
            } else if current == UInt8(ascii: "\\") {
                escaped = true
                try skipEscape()
            } else if current < 0x20 {
                throw error(.controlCharacter)
            } else {
                index += 1
            }
        }
    }

    /// Whether any byte of `word` is `"`, `\` or below 0x20 (exact for "any", by the classic
    /// has-zero-byte and has-less-than bit tricks).
    @inline(__always) private static func mayContainSpecialByte(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quotes = word ^ (ones &* 0x22)
        let backslashes = word ^ (ones &* 0x5C)
        let hasQuote = (quotes &- ones) & ~quotes & highs
        let hasBackslash = (backslashes &- ones) & ~backslashes & highs
        let hasControl = (word &- ones &* 0x20) & ~word & highs
        return (hasQuote | hasBackslash | hasControl) != 0
    }

    private mutating func skipEscape() throws(JSONScanError) {
        guard index + 1 < bytes.count else { throw error(.unexpectedEnd) }
        switch byte(at: index + 1) {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
            UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            index += 2
        case UInt8(ascii: "u"):
            guard index + 6 <= bytes.count else { throw error(.unexpectedEnd) }
            for offset in 2..<6 where Self.hexValue(byte(at: index + offset)) == nil { throw error(.invalidEscape) }
            index += 6
        default:
            throw error(.invalidEscape)
        }
    }

    static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case 0x30...0x39: UInt32(byte - 0x30)
        case 0x41...0x46: UInt32(byte - 0x41 + 10)
        case 0x61...0x66: UInt32(byte - 0x61 + 10)
        default: nil
        }
    }

    // MARK: Strings

    /// The bytes of `range` as a string (no escapes inside).
    func plainString(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// Decodes a string's contents (between its quotes, already validated by ``scanString()``),
    /// resolving escapes; `\uXXXX` surrogate pairs join into one scalar and a lone surrogate
    /// becomes U+FFFD.
    func decodeString(_ range: Range<Int>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(range.count)
        var position = range.lowerBound
        while position < range.upperBound {
            let current = byte(at: position)
            guard current == UInt8(ascii: "\\"), position + 1 < range.upperBound else {
                output.append(current)
                position += 1
                continue
            }
            let kind = byte(at: position + 1)
            position += 2
            switch kind {
            case UInt8(ascii: "b"): output.append(0x08)
            case UInt8(ascii: "f"): output.append(0x0C)
            case UInt8(ascii: "n"): output.append(0x0A)
            case UInt8(ascii: "r"): output.append(0x0D)
            case UInt8(ascii: "t"): output.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = hex4(at: position, limit: range.upperBound) ?? 0xFFFD
                position += 4
                if (0xD800..<0xDC00).contains(scalar) {
                    if position + 6 <= range.upperBound, byte(at: position) == UInt8(ascii: "\\"),
                        byte(at: position + 1) == UInt8(ascii: "u"),
                        let low = hex4(at: position + 2, limit: range.upperBound), (0xDC00..<0xE000).contains(low)
                    {
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                        position += 6
                    } else {
                        scalar = 0xFFFD
                    }
                } else if (0xDC00..<0xE000).contains(scalar) {
                    scalar = 0xFFFD
                }
                Self.appendUTF8(Unicode.Scalar(scalar) ?? "\u{FFFD}", to: &output)
            default: output.append(kind)  // `"`, `\` and `/` stand for themselves
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private func hex4(at position: Int, limit: Int) -> UInt32? {
        guard position + 4 <= limit else { return nil }
        var value: UInt32 = 0
        for offset in 0..<4 {
            guard let digit = Self.hexValue(byte(at: position + offset)) else { return nil }
            value = value << 4 | digit
        }
        return value
    }

    private static func appendUTF8(_ scalar: Unicode.Scalar, to output: inout [UInt8]) {
        for unit in UTF8.encode(scalar)! { output.append(unit) }
    }
}
