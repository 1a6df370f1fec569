/// A push rule's glob (`*` any run, `?` one character, `[abc]`, `[a-z]`, `[!abc]` a class),
/// matched case-insensitively, either against a whole value or, for `content.body`, against the
/// words of a text: the match must start and end at a word boundary (a word character is a
/// letter, a digit or `_`), as the specification's "matches within the body as a word" and the
/// homeserver's evaluator have it.
///
/// Compiled once, when the rule set is parsed; matching works on lowercased Unicode scalars and
/// allocates nothing but the lowercased subject.
package struct GlobPattern: Sendable, Hashable {
    /// The compiled pattern.
    let tokens: [Token]
    /// Whether a match is of words within the subject rather than of the whole subject.
    let wordBoundaries: Bool
    /// The pattern without wildcards, when it has none: matched by comparison.
    let literal: [Unicode.Scalar]?

    enum Token: Sendable, Hashable {
        case scalar(Unicode.Scalar)
        case anyOne
        case anyRun
        case oneOf([ClassItem], negated: Bool)
    }

    enum ClassItem: Sendable, Hashable {
        case scalar(Unicode.Scalar)
        case range(Unicode.Scalar, Unicode.Scalar)
    }

    /// Compiles `pattern`; with `wordBoundaries`, it matches whole words of a text.
    package init(_ pattern: String, wordBoundaries: Bool = false) {
        let scalars = Array(pattern.lowercased().unicodeScalars)
        var tokens: [Token] = []
        var index = 0
        while index < scalars.count {
            let scalar = scalars[index]
            switch scalar {
            case "*":
                if tokens.last != .anyRun { tokens.append(.anyRun) }
            case "?":
                tokens.append(.anyOne)
            case "[":
                if let (token, next) = Self.characterClass(scalars, from: index + 1) {
                    tokens.append(token)
                    index = next
                    continue
                }
                tokens.append(.scalar(scalar))
            default:
                tokens.append(.scalar(scalar))
            }
            index += 1
        }
        self.tokens = tokens
        self.wordBoundaries = wordBoundaries
        let literal = tokens.compactMap { token -> Unicode.Scalar? in
            if case .scalar(let scalar) = token { return scalar }
            return nil
        }
        self.literal = literal.count == tokens.count ? literal : nil
    }

    /// A pattern that matches exactly `text` (case-insensitively, no wildcards): a room or
    /// sender rule's ID, or with `wordBoundaries` a display name within a body.
    package init(literal text: String, wordBoundaries: Bool = false) {
        let scalars = Array(text.lowercased().unicodeScalars)
        tokens = scalars.map(Token.scalar)
        self.wordBoundaries = wordBoundaries
        literal = scalars
    }

    /// `[…]` from just after the bracket: the token and the index after `]`, or `nil` when the
    /// class is not closed (the bracket is then a plain character).
    private static func characterClass(_ scalars: [Unicode.Scalar], from start: Int) -> (Token, Int)? {
        var index = start
        var negated = false
        if index < scalars.count, scalars[index] == "!" {
            negated = true
            index += 1
        }
        var items: [ClassItem] = []
        var first = true
        while index < scalars.count {
            let scalar = scalars[index]
            if scalar == "]" && !first { return (.oneOf(items, negated: negated), index + 1) }
            first = false
            if index + 2 < scalars.count, scalars[index + 1] == "-", scalars[index + 2] != "]" {
                items.append(.range(scalar, scalars[index + 2]))
                index += 3
            } else {
                items.append(.scalar(scalar))
                index += 1
            }
        }
        return nil
    }

    /// Whether `subject` matches (already lowercased, as ``lowercasedScalars(_:)`` gives it).
    package func matches(lowercased subject: [Unicode.Scalar]) -> Bool {
        if !wordBoundaries {
            if let literal { return literal == subject }
            return Self.match(tokens[...], subject[...], end: nil)
        }
        // Words: a start at the beginning or after a non-word character, an end at the end or
        // before one.
        let isBoundary = { (position: Int) in position == subject.count || !Self.isWordCharacter(subject[position]) }
        if let literal {
            guard let first = literal.first else { return true }
            guard literal.count <= subject.count else { return false }
            var start = 0
            while start <= subject.count - literal.count {
                if subject[start] == first, start == 0 || !Self.isWordCharacter(subject[start - 1]),
                    isBoundary(start + literal.count), subject[start..<(start + literal.count)].elementsEqual(literal)
                {
                    return true
                }
                start += 1
            }
            return false
        }
        var start = 0
        while start <= subject.count {
            if start == 0 || !Self.isWordCharacter(subject[start - 1]) {
                if Self.match(tokens[...], subject[start...], end: isBoundary) { return true }
            }
            start += 1
        }
        return false
    }

    /// Whether `subject` matches `text` (lowercased here).
    package func matches(_ text: String) -> Bool {
        if !wordBoundaries, let literal {
            // The common case (an event type, a membership, a room or user ID): compared as it
            // is lowercased, without a copy while it is ASCII.
            var index = 0
            for scalar in text.unicodeScalars {
                guard scalar.isASCII else { return literal == Self.lowercasedScalars(text) }
                guard index < literal.count else { return false }
                let value = scalar.value
                let lowered = value >= 0x41 && value <= 0x5A ? Unicode.Scalar(UInt8(value + 0x20)) : scalar
                guard literal[index] == lowered else { return false }
                index += 1
            }
            return index == literal.count
        }
        return matches(lowercased: Self.lowercasedScalars(text))
    }

    /// `text` lowercased as the patterns are, in scalars.
    package static func lowercasedScalars(_ text: String) -> [Unicode.Scalar] {
        Array(text.lowercased().unicodeScalars)
    }

    /// Whether `tokens` match a prefix of `subject` that ends where `end` allows (`nil`: the
    /// whole of `subject`).
    private static func match(
        _ tokens: ArraySlice<Token>, _ subject: ArraySlice<Unicode.Scalar>, end: ((Int) -> Bool)?
    ) -> Bool {
        var tokens = tokens
        var subject = subject
        while let token = tokens.first {
            switch token {
            case .anyRun:
                let rest = tokens.dropFirst()
                var position = subject.startIndex
                while true {
                    if match(rest, subject[position...], end: end) { return true }
                    if position == subject.endIndex { return false }
                    position += 1
                }
            case .anyOne:
                guard subject.first != nil else { return false }
            case .scalar(let expected):
                guard subject.first == expected else { return false }
            case .oneOf(let items, let negated):
                guard let scalar = subject.first else { return false }
                let inClass = items.contains { item in
                    switch item {
                    case .scalar(let member): scalar == member
                    case .range(let low, let high): low <= scalar && scalar <= high
                    }
                }
                guard inClass != negated else { return false }
            }
            tokens = tokens.dropFirst()
            subject = subject.dropFirst()
        }
        if let end { return end(subject.startIndex) }
        return subject.isEmpty
    }

    /// A letter, a digit or `_` (the `\w` of the homeserver's word boundaries).
    static func isWordCharacter(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.isASCII {
            let value = scalar.value
            return (value >= 0x30 && value <= 0x39) || (value >= 0x61 && value <= 0x7A)
                || (value >= 0x41 && value <= 0x5A)
                || value == 0x5F
        }
        return scalar.properties.isAlphabetic || scalar.properties.numericType != nil
    }
}
