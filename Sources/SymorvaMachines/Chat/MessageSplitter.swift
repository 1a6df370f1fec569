// The one rule for splitting long text messages, the same on every platform.
//
// The rule, its reasons and its edge cases are written down in `docs/message-splitting.md`;
// `docs/message-split-vectors.json` holds language-neutral test vectors that every SDK's tests
// read. Change the three together.

/// Splits text longer than ``limit`` UTF-16 code units into several messages.
///
/// The rule (see `docs/message-splitting.md`):
///
/// 1. Segment the text into extended grapheme clusters (Unicode UAX #29).
/// 2. While the rest is longer than the limit, take the *window*: the longest run of whole
///    clusters from the start of the rest that fits in the limit.
/// 3. Cut after the last *line break* cluster in the window (`LF`, `CR` or `CR LF`) that comes
///    after some non-whitespace cluster of the window; else after the last such *whitespace*
///    cluster (one scalar with the Unicode `White_Space` property, except the no-break spaces
///    U+00A0, U+2007 and U+202F); else at the end of the window.
/// 4. The cut character stays at the end of the earlier part, so the parts joined together are
///    exactly the original text: splitting loses nothing and never reorders.
/// 5. A single cluster longer than the limit (only pathological text, such as thousands of
///    combining marks) is cut between Unicode scalars, never inside a surrogate pair; the rest
///    is segmented anew.
///
/// Every part is at most ``limit`` UTF-16 code units and not empty; an empty text has no parts.
package enum MessageSplitter {
    /// The largest message body, in UTF-16 code units.
    package static let limit = 4_096

    /// The no-break spaces, which are `White_Space` but must not be cut at.
    static let noBreakSpaces: Set<UInt32> = [0x00A0, 0x2007, 0x202F]

    /// The parts of `text`, in order. `parts.joined() == text` always holds.
    ///
    /// - Parameter limit: the maximum length of a part in UTF-16 code units (at least 2, so that
    ///   any scalar fits); other values than ``limit`` are for tests.
    package static func split(_ text: String, limit: Int = MessageSplitter.limit) -> [String] {
        let limit = max(2, limit)
        var parts: [String] = []
        var rest = text
        while !rest.isEmpty {
            if rest.utf16.count <= limit {
                parts.append(rest)
                break
            }
            let cut = cutIndex(in: rest, limit: limit)
            parts.append(String(rest[..<cut]))
            rest = String(rest[cut...])
        }
        return parts
    }

    /// Where the first part of `text` ends; `text` is longer than `limit`.
    static func cutIndex(in text: String, limit: Int) -> String.Index {
        var used = 0
        var windowEnd = text.startIndex
        var seenContent = false
        var lastLineBreak: String.Index?
        var lastWhitespace: String.Index?
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            let size = character.utf16.count
            if used + size > limit { break }
            used += size
            index = text.index(after: index)
            windowEnd = index
            if isLineBreak(character) {
                if seenContent { lastLineBreak = index }
            } else if isWhitespace(character) {
                if seenContent { lastWhitespace = index }
            } else {
                seenContent = true
            }
        }
        guard windowEnd > text.startIndex else { return scalarCut(in: text, limit: limit) }
        return lastLineBreak ?? lastWhitespace ?? windowEnd
    }

    /// The end of the longest run of whole scalars that fits: for a first cluster that alone
    /// is longer than the limit.
    static func scalarCut(in text: String, limit: Int) -> String.Index {
        var used = 0
        var end = text.unicodeScalars.startIndex
        for index in text.unicodeScalars.indices {
            let size = UTF16.width(text.unicodeScalars[index])
            if used + size > limit { break }
            used += size
            end = text.unicodeScalars.index(after: index)
        }
        return end
    }

    /// `LF`, `CR` or `CR LF` (one cluster).
    static func isLineBreak(_ character: Character) -> Bool {
        character == "\n" || character == "\r" || character == "\r\n"
    }

    /// One scalar with `White_Space`, other than a no-break space.
    static func isWhitespace(_ character: Character) -> Bool {
        let scalars = character.unicodeScalars
        guard scalars.count == 1, let scalar = scalars.first else { return false }
        return scalar.properties.isWhitespace && !noBreakSpaces.contains(scalar.value)
    }
}
