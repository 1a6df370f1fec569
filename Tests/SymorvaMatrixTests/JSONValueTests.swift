import SymorvaMatrix
import Testing

@Suite("JSON value parser")
struct JSONValueTests {
    @Test("Parses every kind of value")
    func parsesValues() throws {
        let value = try JSONValue(
            parsing: Array(#"{"a": [1, -2.5e1, true, false, null], "b": "x\u00e9\ud83d\ude00\n"}"#.utf8))
        #expect(
            value
                == .object([
                    "a": .array([.number(1), .number(-25), .bool(true), .bool(false), .null]),
                    "b": .string("xé😀\n"),
                ]))
    }

    @Test(
        "Rejects bad syntax with positions",
        arguments: [
            ("", 1, 1, "unexpected end of input"),
            ("{\"a\" 1}", 1, 6, "expected ':'"),
            ("[1,]", 1, 4, "unexpected character"),
            ("01", 1, 1, "invalid number"),
            ("\"abc", 1, 5, "unterminated string"),
            ("true x", 1, 6, "unexpected text after the JSON value"),
            ("\"\\q\"", 1, 3, "invalid escape"),
        ])
    func rejectsBadSyntax(text: String, line: Int, column: Int, reason: String) {
        #expect(throws: JSONSyntaxError(line: line, column: column, reason: reason)) {
            try JSONValue(parsing: Array(text.utf8))
        }
    }

    @Test(
        "Strings without escapes are taken whole; an escape or a control character after a run is still read or refused"
    )
    func stringRuns() throws {
        let long = String(repeating: "QUJD", count: 2_000)
        #expect(try JSONValue(parsing: Array("\"\(long)\"".utf8)) == .string(long))
        #expect(try JSONValue(parsing: Array(#""é😀 plain""#.utf8)) == .string("é😀 plain"))
        #expect(try JSONValue(parsing: Array(#""run\"quote\u00e9 end""#.utf8)) == .string("run\"quoteé end"))
        #expect(throws: JSONSyntaxError(line: 1, column: 5, reason: "control character in string")) {
            try JSONValue(parsing: Array("\"abc\u{01}\"".utf8))
        }
    }

    @Test("Deep nesting is refused instead of overflowing the stack")
    func nestingLimit() {
        let text = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(throws: JSONSyntaxError.self) { try JSONValue(parsing: Array(text.utf8)) }
    }

    @Test("Integer values are exact")
    func integers() throws {
        #expect(try JSONValue(parsing: Array("42".utf8)).integerValue == 42)
        #expect(try JSONValue(parsing: Array("4.2".utf8)).integerValue == nil)
    }
}
