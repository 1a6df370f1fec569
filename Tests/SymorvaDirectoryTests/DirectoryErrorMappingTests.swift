import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices
import Testing

@testable import SymorvaDirectory

/// `DirectoryError` carries the SDK's transport classification (`TransportProblem`), not a
/// string, and the directory maps failures through the shared `FailureClass` (issue 23).
@Suite("Directory errors")
struct DirectoryErrorMappingTests {
    @Test("A failed exchange is a typed transport problem, from the homeserver and from the services")
    func transportIsTyped() {
        #expect(DirectoryWire.error(MatrixRequestError.transport(.timedOut)) == .transport(.timeout))
        #expect(DirectoryWire.error(MatrixRequestError.transport(.dnsFailure)) == .transport(.unreachable))
        #expect(DirectoryWire.error(ServicesError.transport(.emptyResponse)) == .transport(.responseDropped))
        #expect(DirectoryWire.error(ServicesError.transport(.cancelled)) == .transport(.connectionReset))
        #expect("\(DirectoryError.transport(.serverError(status: 502)))" == "transport(serverError(status: 502))")
    }

    @Test("Refusals and sign-in keep their meaning")
    func refusals() {
        let matrix: [(MatrixRequestError, DirectoryError)] = [
            (.matrix(MatrixError(status: 404, code: .notFound)), .notFound),
            (.matrix(MatrixError(status: 403, code: .forbidden)), .forbidden(needed: nil, has: nil)),
            (.matrix(MatrixError(status: 401, code: .missingToken)), .signInRequired),
            (.matrix(MatrixError(status: 403, code: .guestAccessForbidden)), .signInRequired),
            (.matrix(MatrixError(status: 429, code: .limitExceeded)), .rateLimited(retryAfter: nil)),
            (.matrix(MatrixError(status: 400, code: .invalidParameter)), .server(code: "M_INVALID_PARAM", status: 400)),
            (.notSignedIn, .notSignedIn),
            (.invalidRequest, .invalidInput("request")),
        ]
        for (error, expected) in matrix { #expect(DirectoryWire.error(error) == expected) }
        let services: [(ServicesError, DirectoryError)] = [
            (.server(code: "SY_NOT_FOUND", status: 404, message: "", retryAfter: nil), .notFound),
            (
                .server(code: "SY_NOT_ADMIN", status: 403, message: "", retryAfter: nil),
                .forbidden(needed: nil, has: nil)
            ),
            (.server(code: "SY_INVALID_PARAM", status: 400, message: "", retryAfter: nil), .invalidInput("parameter")),
            (.unauthorized(code: "SY_UNKNOWN_TOKEN"), .server(code: "SY_UNKNOWN_TOKEN", status: 401)),
            (.openIDRefused(.unknownToken, status: 401), .signInRequired),
            (.moduleDisabled("directory"), .moduleDisabled),
            (.malformedResponse(status: 200), .malformedResponse),
            (.rateLimited(retryAfter: .seconds(1)), .rateLimited(retryAfter: .seconds(1))),
        ]
        for (error, expected) in services { #expect(DirectoryWire.error(error) == expected) }
    }

    @Test("Changed on purpose: a 5xx is the server failing (transport), not a refusal")
    func serverFailureIsTransport() {
        #expect(
            DirectoryWire.error(MatrixRequestError.matrix(MatrixError(status: 500, code: .unknown)))
                == .transport(.serverError(status: 500)))
        #expect(
            DirectoryWire.error(ServicesError.server(code: "SY_UNKNOWN", status: 503, message: "", retryAfter: nil))
                == .transport(.serverError(status: 503)))
    }
}
