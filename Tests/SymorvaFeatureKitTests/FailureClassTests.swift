import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices
import Testing

@Suite("Failure classes: one classification of failed requests")
struct FailureClassTests {
    @Test(
        "Every transport error has one problem, the same in every module",
        arguments: [
            (TransportError.timedOut, TransportProblem.timeout),
            (.dnsFailure, .unreachable), (.connectFailed, .unreachable), (.tls, .unreachable),
            (.invalidURL, .unreachable), (.invalidHeader, .unreachable),
            (.tooLarge(limit: 10), .responseDropped), (.emptyResponse, .responseDropped),
            (.partialResponse, .responseDropped),
            (.cancelled, .connectionReset), (.connectionLost, .connectionReset),
            (.other(code: 56, message: "Failure when receiving data"), .connectionReset),
        ])
    func transportProblems(error: TransportError, problem: TransportProblem) {
        #expect(TransportProblem(error) == problem)
        #expect(FailureClass(ServicesError.transport(error)) == .transport(problem))
        #expect(FailureClass(MatrixRequestError.transport(error)) == .transport(problem))
    }

    @Test("Services failures: 5xx is the server failing, a 4xx code a refusal, credentials a sign-in")
    func servicesFailures() {
        let cases: [(ServicesError, FailureClass)] = [
            (
                .server(code: "SY_UNKNOWN", status: 500, message: "", retryAfter: nil),
                .transport(.serverError(status: 500))
            ),
            (
                .server(code: "SY_NOT_FOUND", status: 404, message: "", retryAfter: nil),
                .refused(code: "SY_NOT_FOUND", status: 404)
            ),
            (.malformedResponse(status: 502), .transport(.serverError(status: 502))),
            (.malformedResponse(status: 200), .malformedResponse),
            (.malformedResponse(status: 0), .invalidRequest),
            (.rateLimited(retryAfter: .seconds(2)), .rateLimited(retryAfter: .seconds(2))),
            (.unauthorized(code: "SY_UNKNOWN_TOKEN"), .refused(code: "SY_UNKNOWN_TOKEN", status: 401)),
            (.openIDRefused(.unknownToken, status: 401), .signInRequired),
            (.moduleDisabled("wallet"), .moduleDisabled),
        ]
        for (error, expected) in cases { #expect(FailureClass(error) == expected, "\(error)") }
    }

    @Test("Matrix failures: the same classes, a token the requester could not renew is a sign-in")
    func matrixFailures() {
        let cases: [(MatrixRequestError, FailureClass)] = [
            (.matrix(MatrixError(status: 502, code: .unknown)), .transport(.serverError(status: 502))),
            (.matrix(MatrixError(status: 404, code: .notFound)), .refused(code: "M_NOT_FOUND", status: 404)),
            (
                .matrix(MatrixError(status: 429, code: .limitExceeded, retryAfter: .delay(.seconds(3)))),
                .rateLimited(retryAfter: .seconds(3))
            ),
            (.matrix(MatrixError(status: 429, code: .limitExceeded)), .rateLimited(retryAfter: nil)),
            (.matrix(MatrixError(status: 401, code: .unknownToken)), .signInRequired),
            (.matrix(MatrixError(status: 403, code: .guestAccessForbidden)), .signInRequired),
            (.notSignedIn, .signInRequired),
            (.invalidRequest, .invalidRequest),
        ]
        for (error, expected) in cases { #expect(FailureClass(error) == expected, "\(error)") }
    }
}
