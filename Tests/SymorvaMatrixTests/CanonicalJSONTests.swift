import SymorvaMatrix
import Testing

@Suite("Canonical JSON")
struct CanonicalJSONTests {
    /// The examples of the Matrix specification's appendix "Canonical JSON", and edge cases.
    @Test(
        "Encodes like the specification's examples",
        arguments: [
            (#"{}"#, #"{}"#),
            (#"{"one": 1, "two": "Two"}"#, #"{"one":1,"two":"Two"}"#),
            (#"{"b": "2", "a": "1"}"#, #"{"a":"1","b":"2"}"#),
            (
                #"{"auth":{"success":true,"mxid":"@john.doe:example.com","profile":{"display_name":"John Doe","three_pids":[{"medium":"email","address":"john.doe@example.org"},{"medium":"msisdn","address":"123456789"}]}}}"#,
                #"{"auth":{"mxid":"@john.doe:example.com","profile":{"display_name":"John Doe","three_pids":[{"address":"john.doe@example.org","medium":"email"},{"address":"123456789","medium":"msisdn"}]},"success":true}}"#
            ),
            (#"{"a": "日本語"}"#, #"{"a":"日本語"}"#),
            (#"{"本": 2, "日": 1}"#, #"{"日":1,"本":2}"#),
            (#"{"a": "\u65E5"}"#, #"{"a":"日"}"#),
            (#"{"a": null}"#, #"{"a":null}"#),
            (#"{"a": -0, "b": 1e3, "c": [true, false]}"#, #"{"a":0,"b":1000,"c":[true,false]}"#),
            (
                #"{"a": "quote \" backslash \\ tab \t nul \u0000 del \u007f"}"#,
                #"{"a":"quote \" backslash \\ tab \t nul \u0000 del "# + "\u{7f}" + #""}"#
            ),
            (#"{"Z": 1, "a": 2, "é": 3, "B": 4}"#, #"{"B":4,"Z":1,"a":2,"é":3}"#),
        ])
    func examples(input: String, expected: String) throws {
        let value = try JSONValue(parsing: Array(input.utf8))
        #expect(String(decoding: try value.canonicalEncoding(), as: UTF8.self) == expected)
    }

    @Test("Numbers that are not safe integers have no canonical form")
    func nonIntegers() throws {
        for text in ["1.5", "9007199254740992", "-1e300"] {
            let value = try JSONValue(parsing: Array(#"{"n": \#(text)}"#.utf8))
            #expect(throws: JSONValue.CanonicalJSONError.nonIntegerNumber) { _ = try value.canonicalEncoding() }
        }
    }
}
