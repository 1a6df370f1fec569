import SymorvaMachines
import SymorvaMatrix
import Testing

@Suite("Wire JSON: the one coder")
struct WireJSONTests {
    struct Body: Codable, Equatable {
        var zeta: String
        var alpha: Int
        var url: String
        var nested: Nested?
        struct Nested: Codable, Equatable {
            var expiresInMilliseconds: Int
            enum CodingKeys: String, CodingKey { case expiresInMilliseconds = "expires_in_ms" }
        }
    }

    @Test("Encoding sorts keys and leaves slashes alone: the same value gives the same bytes")
    func encodesDeterministically() throws {
        let body = Body(zeta: "z", alpha: 1, url: "https://example.org/a/b", nested: .init(expiresInMilliseconds: 5))
        let text = String(decoding: try WireJSON.encode(body), as: UTF8.self)
        #expect(text == #"{"alpha":1,"nested":{"expires_in_ms":5},"url":"https://example.org/a/b","zeta":"z"}"#)
        #expect(try WireJSON.encode(body) == (try WireJSON.encode(body)))
    }

    @Test("Decoding reads the types' own keys and ignores unknown fields")
    func decodesWithOwnKeys() throws {
        let json = #"{"zeta":"z","alpha":2,"url":"u","nested":{"expires_in_ms":7},"extra":[1,2]}"#
        let body = try WireJSON.decode(Body.self, from: Array(json.utf8))
        #expect(body == Body(zeta: "z", alpha: 2, url: "u", nested: .init(expiresInMilliseconds: 7)))
    }

    @Test(
        "A failure names the field path, never a value",
        arguments: [
            (#"{"alpha":1,"url":"u"}"#, "missing zeta"),
            (#"{"zeta":"secret-token","alpha":"x","url":"u"}"#, "wrong type at alpha"),
            (#"{"zeta":"z","alpha":1,"url":"u","nested":{"expires_in_ms":null}}"#, "null at nested.expires_in_ms"),
            ("not json secret-token", "not JSON"),
            ("", "not JSON"),
        ])
    func failuresNameThePath(json: String, reason: String) {
        #expect(throws: WireJSONError(reason: reason)) { try WireJSON.decode(Body.self, from: Array(json.utf8)) }
        #expect(WireJSON.decodeIfValid(Body.self, from: Array(json.utf8)) == nil)
        #expect(!"\(WireJSONError(reason: reason))".contains("secret-token"))
    }

    @Test("A value that cannot be JSON is refused, not sent")
    func refusesNonFiniteNumbers() {
        #expect(throws: WireJSONError.self) { try WireJSON.encode(["ratio": Double.nan]) }
    }

    @Test("The session's decoder reports WireJSON's reason (the field path only)")
    func sessionDecoderUsesTheCoder() {
        #expect(throws: SessionError.invalidResponse(reason: "missing zeta")) {
            try AuthAPI.decode(Body.self, from: Array(#"{"alpha":1,"url":"u"}"#.utf8))
        }
    }
}
