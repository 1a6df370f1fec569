/// Makes text from the network safe to print on a terminal.
///
/// Message bodies, display names, room names, event types and asset codes come from other
/// people's devices and servers. Printed raw, an `ESC ] 0;… BEL` sequence retitles the
/// terminal, cursor movements redraw lines, and a body with a line break can draw a fake
/// `PIN:` prompt under the REPL's own output. Two rules keep the terminal the REPL's:
///
/// - ``escaped(_:)`` shows every control character of a remote text as a visible escape
///   (`\n`, `\u{1B}`, …), line breaks included, so remote text always stays on its own line;
///   commands apply it to each remote field they print.
/// - ``REPLOutput/print(_:)`` and ``REPLOutput/printError(_:)`` pass every line through
///   ``sanitizedLine(_:)``, which escapes every control character but the line breaks the REPL
///   writes itself: whatever a command forgets is still harmless.
package enum TerminalText {
    /// `text` with every control character (C0 including line breaks and tabs, DEL, C1) and
    /// every invisible direction or line-separator character (which could make a line read
    /// differently than it is) replaced by a visible escape.
    package static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks: false) }) else { return text }
        return escape(text, keepingLineBreaks: false)
    }

    /// `line` with every control character but `\n` escaped: what the outputs do to each line.
    package static func sanitizedLine(_ line: String) -> String {
        guard line.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks: true) }) else { return line }
        return escape(line, keepingLineBreaks: true)
    }

    private static func escape(_ text: String, keepingLineBreaks: Bool) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard needsEscape(scalar, keepingLineBreaks: keepingLineBreaks) else {
                result.append(scalar)
                continue
            }
            let visible: String =
                switch scalar {
                case "\n": "\\n"
                case "\r": "\\r"
                case "\t": "\\t"
                default: "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
                }
            result.append(contentsOf: visible.unicodeScalars)
        }
        return String(result)
    }

    private static func needsEscape(_ scalar: Unicode.Scalar, keepingLineBreaks: Bool) -> Bool {
        switch scalar.value {
        case 0x0A: !keepingLineBreaks
        case 0x00...0x1F, 0x7F...0x9F: true
        // Arabic letter mark, LRM/RLM, line and paragraph separators, embeddings and overrides,
        // isolates: invisible, and able to reorder or break what follows.
        case 0x061C, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
