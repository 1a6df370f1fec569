/// Why a REPL line could not be run.
///
/// Every failure the REPL reports is one of these cases, and its ``description`` is the text
/// printed after `error: `. Feature commands wrap their own typed errors with
/// ``commandFailed(_:)`` (usually through ``failure(_:)``), so the REPL never has to format
/// `any Error`.
package enum REPLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The first word names no registered command. `suggestion` is the closest name, if any is close.
    case unknownCommand(String, suggestion: String?)
    /// A command group was given a subcommand it does not have.
    case unknownSubcommand(command: String, name: String, suggestion: String?)
    /// The arguments did not fit the command; the payload is the command's usage line.
    case usage(String)
    /// An argument had the right place but a wrong value (`sleep -3`).
    case invalidArgument(String)
    /// A quote was opened and never closed; the payload is the quote character.
    case unterminatedQuote(Character)
    /// The line ended with a backslash that escapes nothing.
    case danglingEscape
    /// The input ended while a command was waiting for more (a secret, a confirmation).
    case inputEnded
    /// A feature command failed; the payload is the message to show, already redacted.
    case commandFailed(String)
    /// A script or environment file could not be read.
    case unreadableFile(path: String, reason: String)

    /// The message printed after `error: `.
    package var description: String {
        switch self {
        case .unknownCommand(let name, let suggestion):
            if let suggestion { return "unknown command '\(name)' — did you mean '\(suggestion)'?" }
            return "unknown command '\(name)' — try 'help'"
        case .unknownSubcommand(let command, let name, let suggestion):
            if let suggestion {
                return "unknown subcommand '\(command) \(name)' — did you mean '\(command) \(suggestion)'?"
            }
            return "unknown subcommand '\(command) \(name)' — try 'help \(command)'"
        case .usage(let usage):
            return "usage: \(usage)"
        case .invalidArgument(let message):
            return message
        case .unterminatedQuote(let quote):
            return quote == "'" ? "unterminated single quote" : "unterminated double quote"
        case .danglingEscape:
            return "line ends with a backslash that escapes nothing"
        case .inputEnded:
            return "input ended while the command was waiting for more"
        case .commandFailed(let message):
            return message
        case .unreadableFile(let path, let reason):
            return "cannot read '\(path)': \(reason)"
        }
    }

    /// Wraps a feature's typed error. Its description must already be redacted, which the
    /// SDK's error types guarantee by describing secrets as `<redacted>`.
    package static func failure(_ error: some Error) -> REPLError {
        .commandFailed(String(describing: error))
    }
}

/// Splits a REPL line into words, the way a small shell would.
///
/// - Words are separated by spaces and tabs.
/// - `"…"` groups a word; inside it a backslash takes the next character literally.
/// - `'…'` groups a word with no escapes at all.
/// - Outside quotes a backslash takes the next character literally (`a\ b` is one word).
/// - `#` at the start of a word begins a comment that runs to the end of the line.
/// - `""` and `''` make an empty word.
package enum REPLLineParser {
    /// The words of `line`; an empty array for blank and comment-only lines.
    package static func words(of line: String) throws(REPLError) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var iterator = line.makeIterator()
        while let character = iterator.next() {
            switch character {
            case " ", "\t", "\r", "\n":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case "#" where !inWord:
                return words
            case "\\":
                guard let escaped = iterator.next() else { throw .danglingEscape }
                current.append(escaped)
                inWord = true
            case "\"":
                inWord = true
                try readDoubleQuoted(into: &current, from: &iterator)
            case "'":
                inWord = true
                try readSingleQuoted(into: &current, from: &iterator)
            default:
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }

    private static func readDoubleQuoted(
        into word: inout String, from iterator: inout String.Iterator
    ) throws(REPLError) {
        while let character = iterator.next() {
            switch character {
            case "\"":
                return
            case "\\":
                guard let escaped = iterator.next() else { throw .unterminatedQuote("\"") }
                word.append(escaped)
            default:
                word.append(character)
            }
        }
        throw .unterminatedQuote("\"")
    }

    private static func readSingleQuoted(
        into word: inout String, from iterator: inout String.Iterator
    ) throws(REPLError) {
        while let character = iterator.next() {
            if character == "'" { return }
            word.append(character)
        }
        throw .unterminatedQuote("'")
    }
}

/// Finds the name a mistyped word most probably meant.
package enum REPLSuggestion {
    /// The candidate closest to `word` by edit distance, when it is close enough to be a typo:
    /// at most two edits and at most half the word's length (one for short words). Ties go to the
    /// alphabetically first name so that suggestions are stable.
    package static func closest(to word: String, among candidates: some Sequence<String>) -> String? {
        let limit = min(2, max(1, word.count / 2))
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(word.lowercased(), candidate.lowercased())
            guard distance <= limit else { continue }
            if let current = best,
                current.distance < distance || (current.distance == distance && current.name < candidate)
            {
                continue
            }
            best = (candidate, distance)
        }
        return best?.name
    }

    /// The Levenshtein distance between two strings, by characters, with transpositions
    /// counting as one edit (`hlep` → `help`).
    package static func editDistance(_ lhs: String, _ rhs: String) -> Int {
        let a = Array(lhs)
        let b = Array(rhs)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previousRow = [Int](repeating: 0, count: b.count + 1)
        var row = Array(0...b.count)
        for i in 1...a.count {
            let beforePrevious = previousRow
            previousRow = row
            row = [Int](repeating: 0, count: b.count + 1)
            row[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                row[j] = min(previousRow[j] + 1, row[j - 1] + 1, previousRow[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    row[j] = min(row[j], beforePrevious[j - 2] + 1)
                }
            }
        }
        return row[b.count]
    }
}
