import Foundation
import SymorvaHTTP
import SymorvaMatrix
import SymorvaRuntime
import Testing

@Suite("Matrix error decoding")
struct MatrixErrorTests {
    private func response(_ status: Int, _ body: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    @Test("A 2xx response carries no error")
    func successIsNotAnError() {
        #expect(MatrixError.decode(from: response(200, #"{"errcode":"M_FORBIDDEN"}"#)) == nil)
    }

    @Test("Known codes, message and status are decoded")
    func knownCodes() throws {
        let cases: [(String, MatrixError.Code)] = [
            ("M_FORBIDDEN", .forbidden), ("M_UNKNOWN_TOKEN", .unknownToken), ("M_MISSING_TOKEN", .missingToken),
            ("M_LIMIT_EXCEEDED", .limitExceeded), ("M_USER_IN_USE", .userInUse),
            ("M_INVALID_USERNAME", .invalidUsername), ("M_NOT_FOUND", .notFound), ("M_BAD_JSON", .badJSON),
            ("M_NOT_JSON", .notJSON), ("M_UNKNOWN", .unknown), ("M_USER_DEACTIVATED", .userDeactivated),
            ("M_UNKNOWN_POS", .unknownPosition),
        ]
        for (errcode, code) in cases {
            let error = try #require(
                MatrixError.decode(from: response(403, #"{"errcode":"\#(errcode)","error":"nope"}"#)))
            #expect(error.code == code)
            #expect(error.code.errcode == errcode)
            #expect(error.message == "nope")
            #expect(error.status == 403)
            #expect(!error.isSoftLogout)
        }
    }

    @Test("An unknown code is kept verbatim")
    func unknownCode() throws {
        let error = try #require(MatrixError.decode(from: response(400, #"{"errcode":"ORG_EXAMPLE_THING"}"#)))
        #expect(error.code == .other("ORG_EXAMPLE_THING"))
        #expect(error.message == nil)
    }

    @Test("soft_logout is read with M_UNKNOWN_TOKEN")
    func softLogout() throws {
        let error = try #require(
            MatrixError.decode(from: response(401, #"{"errcode":"M_UNKNOWN_TOKEN","error":"x","soft_logout":true}"#)))
        #expect(error.code == .unknownToken)
        #expect(error.isSoftLogout)
    }

    @Test("retry_after_ms in the body gives a delay")
    func retryAfterMilliseconds() throws {
        let error = try #require(
            MatrixError.decode(from: response(429, #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1500}"#)))
        #expect(error.retryAfter == .delay(.milliseconds(1500)))
    }

    @Test("The Retry-After header in seconds wins over retry_after_ms")
    func retryAfterHeaderSeconds() throws {
        let error = try #require(
            MatrixError.decode(
                from: response(
                    429, #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1500}"#, headers: ["retry-after": " 7 "])))
        #expect(error.retryAfter == .delay(.seconds(7)))
    }

    @Test("Retry-After as an HTTP-date, in all three forms")
    func retryAfterHTTPDate() throws {
        let expected = Date(timeIntervalSince1970: 784_111_777)  // 1994-11-06 08:49:37 UTC
        for value in ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"] {
            #expect(RetryAfter(headerValue: value) == .date(expected), "\(value)")
        }
        let error = try #require(
            MatrixError.decode(
                from: response(503, "", headers: ["Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"])))
        #expect(error.retryAfter == .date(Date(timeIntervalSince1970: 1_445_412_480)))
        let now = Date(timeIntervalSince1970: 1_445_412_470)
        #expect(error.retryAfter?.delay(from: now) == .seconds(10))
        #expect(error.retryAfter?.delay(from: now.addingTimeInterval(3600)) == .zero)
    }

    @Test("A Retry-After date is read against an injected wall-clock instant")
    func retryAfterFromWallClock() {
        let retryAfter = RetryAfter.date(Date(timeIntervalSince1970: 1_445_412_480))
        #expect(retryAfter.delay(from: Timestamp(millisecondsSince1970: 1_445_412_470_000)) == .seconds(10))
        #expect(retryAfter.delay(from: Timestamp(millisecondsSince1970: 1_445_412_479_500)) == .milliseconds(500))
        #expect(retryAfter.delay(from: Timestamp(millisecondsSince1970: 1_445_416_080_000)) == .zero)
    }

    @Test("Unparseable Retry-After values are ignored")
    func badRetryAfter() {
        for value in ["", "soon", "-5", "1.5", "Mon, 32 Jan 2024 00:00:00 GMT", "99999999999999999999999"] {
            #expect(RetryAfter(headerValue: value) == nil, "\(value)")
        }
    }

    @Test(
        "M_LIMIT_EXCEEDED's retry_after_ms is clamped: huge waits the ceiling, 0 the floor, negative or garbage is none",
        arguments: [
            ("999999999", RetryAfter?.some(.delay(.seconds(300)))), ("0", .delay(.seconds(1))), ("-5", nil),
            ("1e30", .delay(.seconds(300))), (#""soon""#, nil), ("2500", .delay(.milliseconds(2_500))),
        ])
    func retryAfterMillisecondsClamped(value: String, expected: RetryAfter?) throws {
        let body = #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":\#(value)}"#
        let error = try #require(MatrixError.decode(from: response(429, body)))
        #expect(error.code == .limitExceeded)
        #expect(error.retryAfter == expected)
    }

    @Test("A Retry-After header is waited clamped: huge seconds, a far date and a past date")
    func retryAfterHeaderClamped() throws {
        let now = Timestamp(millisecondsSince1970: 1_445_412_470_000)
        let huge = try #require(
            MatrixError.decode(
                from: response(429, #"{"errcode":"M_LIMIT_EXCEEDED"}"#, headers: ["Retry-After": "999999999"])))
        #expect(huge.retryAfter?.wait(from: now) == .seconds(300))
        #expect(RetryAfter.date(Date(timeIntervalSince1970: 1_545_412_470)).wait(from: now) == .seconds(300))
        #expect(RetryAfter.date(Date(timeIntervalSince1970: 1_445_412_400)).wait(from: now) == .seconds(1))
        #expect(RetryAfter.delay(.zero).wait(from: now) == .seconds(1))
        let negative = try #require(
            MatrixError.decode(from: response(429, #"{"errcode":"M_LIMIT_EXCEEDED"}"#, headers: ["Retry-After": "-5"])))
        #expect(negative.retryAfter == nil)
    }

    @Test("Malformed bodies yield malformedBody, never a crash")
    func malformedBodies() throws {
        let bodies = [
            "", "<html>502 Bad Gateway</html>", "{", "[]", "null", #"{"errcode":42}"#, #"{"error":"no code"}"#,
            #"{"errcode":"M_FORBIDDEN","soft_logout":"yes"}"#, String(repeating: "[", count: 10_000),
        ]
        for body in bodies {
            let error = try #require(MatrixError.decode(from: response(502, body, headers: ["Retry-After": "2"])))
            #expect(error.code == .malformedBody, "\(body.prefix(40))")
            #expect(error.status == 502)
            #expect(error.retryAfter == .delay(.seconds(2)))
        }
        let invalidUTF8 = HTTPResponse(status: 500, body: [0xFF, 0xFE, 0x00])
        #expect(MatrixError.decode(from: invalidUTF8)?.code == .malformedBody)
    }

    @Test("The description never contains the server's message")
    func descriptionRedactsMessage() throws {
        let error = try #require(
            MatrixError.decode(from: response(403, #"{"errcode":"M_FORBIDDEN","error":"CANARY secret room"}"#)))
        #expect(!error.description.contains("CANARY"))
        #expect(error.description.contains("M_FORBIDDEN"))
    }
}
