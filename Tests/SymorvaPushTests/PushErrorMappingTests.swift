import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices
import Testing

@testable import SymorvaPush

/// `PushError` carries the SDK's transport classification (`TransportProblem`), not a string,
/// and push maps failures through the shared `FailureClass` (issue 23).
@Suite("Push errors")
struct PushErrorMappingTests {
    @Test("A failed exchange is a typed transport problem, from the homeserver and from the services")
    func transportIsTyped() {
        #expect(PushWire.error(MatrixRequestError.transport(.timedOut)) == .transport(.timeout))
        #expect(PushWire.error(MatrixRequestError.transport(.connectFailed)) == .transport(.unreachable))
        #expect(PushWire.error(ServicesError.transport(.partialResponse)) == .transport(.responseDropped))
        #expect(PushWire.error(ServicesError.transport(.connectionLost)) == .transport(.connectionReset))
        #expect("\(PushError.transport(.timeout))" == "transport(timeout)")
    }

    @Test("Refusals keep their meaning: not found, forbidden, invalid input, rate limits, other codes")
    func refusals() {
        let matrix: [(MatrixError, PushError)] = [
            (MatrixError(status: 404, code: .notFound), .notFound),
            (MatrixError(status: 403, code: .forbidden), .forbidden),
            (MatrixError(status: 400, code: .invalidParameter), .invalidInput("M_INVALID_PARAM")),
            (MatrixError(status: 400, code: .badJSON), .invalidInput("M_BAD_JSON")),
            (
                MatrixError(status: 429, code: .limitExceeded, retryAfter: .delay(.seconds(2))),
                .rateLimited(retryAfter: .seconds(2))
            ),
            (MatrixError(status: 400, code: .unrecognized), .server(code: "M_UNRECOGNIZED", status: 400)),
        ]
        for (error, expected) in matrix { #expect(PushWire.error(MatrixRequestError.matrix(error)) == expected) }
        let services: [(ServicesError, PushError)] = [
            (.server(code: "SY_NOT_FOUND", status: 404, message: "", retryAfter: nil), .notFound),
            (.server(code: "SY_FORBIDDEN", status: 403, message: "", retryAfter: nil), .forbidden),
            (.server(code: "SY_CONFLICT", status: 409, message: "", retryAfter: nil), .forbidden),
            (.rateLimited(retryAfter: nil), .rateLimited(retryAfter: nil)),
            (.unauthorized(code: "SY_UNKNOWN_TOKEN"), .server(code: "SY_UNKNOWN_TOKEN", status: 401)),
            (.moduleDisabled("push"), .forbidden),
            (.malformedResponse(status: 200), .malformedResponse),
        ]
        for (error, expected) in services { #expect(PushWire.error(error) == expected) }
        #expect(PushWire.error(MatrixRequestError.invalidRequest) == .invalidInput("request"))
    }

    @Test("Changed on purpose: a 5xx is the server failing (transport), not a refusal")
    func serverFailureIsTransport() {
        #expect(
            PushWire.error(MatrixRequestError.matrix(MatrixError(status: 502, code: .unknown)))
                == .transport(.serverError(status: 502)))
        #expect(
            PushWire.error(ServicesError.server(code: "SY_UNKNOWN", status: 500, message: "", retryAfter: nil))
                == .transport(.serverError(status: 500)))
        #expect(PushWire.error(ServicesError.malformedResponse(status: 503)) == .transport(.serverError(status: 503)))
    }

    @Test("Changed on purpose: credentials the servers no longer take mean nobody is signed in")
    func credentialsMeanSignedOut() {
        #expect(PushWire.error(MatrixRequestError.notSignedIn) == .notSignedIn)
        #expect(
            PushWire.error(MatrixRequestError.matrix(MatrixError(status: 401, code: .unknownToken))) == .notSignedIn)
        #expect(PushWire.error(ServicesError.openIDRefused(.unknownToken, status: 401)) == .notSignedIn)
    }
}
