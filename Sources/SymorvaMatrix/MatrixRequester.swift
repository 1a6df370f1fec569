import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Why a Matrix request produced no usable answer.
public enum MatrixRequestError: Error, Sendable, Equatable, CustomStringConvertible, LogSafe {
    /// The exchange never completed (no connection, timeout, cancelled).
    case transport(TransportError)
    /// The homeserver answered with a Matrix error.
    case matrix(MatrixError)
    /// The account is not signed in (signed out, soft-logged-out and not re-authenticated).
    case notSignedIn
    /// The endpoint could not be turned into a URL.
    case invalidRequest

    public var description: String {
        switch self {
        case .transport(let error): "transport(\(error))"
        case .matrix(let error): "matrix(\(error.code), status: \(error.status))"
        case .notSignedIn: "notSignedIn"
        case .invalidRequest: "invalidRequest"
        }
    }

    public var logDescription: String { description }
}

/// Sends Matrix client-server requests as one signed-in account.
///
/// The session feature provides the real requester: it attaches the current access token,
/// and when the homeserver rejects an expired token it waits for the session's single-flight
/// refresh and retries once. Features (chat, sync, crypto) depend on this protocol only.
public protocol MatrixRequester: Sendable {
    /// The homeserver's client-server API base URL.
    var homeserverURL: HomeserverURL { get }
    /// The account the requests are made as.
    var userID: UserID { get }
    /// Sends `endpoint` and returns the 2xx response; any other status is a typed error.
    func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse
}

extension MatrixRequester {
    /// Sends `endpoint` with the transport's default timeout.
    public func send(_ endpoint: MatrixEndpoint) async throws(MatrixRequestError) -> HTTPResponse {
        try await send(endpoint, timeout: nil)
    }
}

/// Builds transport requests from endpoints and reads Matrix errors: shared by every requester.
public enum MatrixExchange {
    /// Performs `endpoint` on `transport` with `token`, mapping non-2xx answers to `.matrix`.
    public static func perform(
        _ endpoint: MatrixEndpoint, on base: HomeserverURL, token: Secret<String>?, timeout: Duration?,
        transport: any HTTPTransport
    ) async throws(MatrixRequestError) -> HTTPResponse {
        guard let url = URL(string: endpoint.urlString(relativeTo: base)) else { throw .invalidRequest }
        var request = HTTPRequest(
            method: HTTPMethod(rawValue: endpoint.method.rawValue), url: url, body: endpoint.body ?? [],
            bearerToken: endpoint.requiresAuth ? token : nil, timeout: timeout)
        if endpoint.body != nil { request.headers.add(name: "Content-Type", value: "application/json") }
        if let transfer = endpoint.transfer {
            if transfer.bodyFile != nil || transfer.responseFile != nil {
                // Another transport would send an empty body or keep a large one in memory.
                guard transport is any HTTPFileTransport else { throw .invalidRequest }
            }
            request.bodyFile = transfer.bodyFile
            request.responseFile = transfer.responseFile
            request.progress = transfer.progress
            request.maximumResponseBytes = transfer.maximumResponseBytes
            if let contentType = transfer.contentType, endpoint.body == nil {
                request.headers.add(name: "Content-Type", value: contentType)
            }
        }
        let response: HTTPResponse
        do { response = try await transport.send(request) } catch { throw .transport(error) }
        guard response.isSuccess else {
            throw .matrix(
                MatrixError.decode(from: response)
                    ?? MatrixError(status: response.status, code: .malformedBody))
        }
        return response
    }
}

/// A requester with a fixed access token: no refresh. For tools and tests that obtained a
/// token elsewhere; the SDK's signed-in accounts use the session's requester instead.
package struct FixedTokenMatrixRequester: MatrixRequester {
    package let homeserverURL: HomeserverURL
    package let userID: UserID
    let accessToken: Secret<String>
    let transport: any HTTPTransport

    /// A requester for `userID` using `accessToken` as is.
    package init(
        homeserverURL: HomeserverURL, userID: UserID, accessToken: Secret<String>, transport: any HTTPTransport
    ) {
        self.homeserverURL = homeserverURL
        self.userID = userID
        self.accessToken = accessToken
        self.transport = transport
    }

    package func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse {
        try await MatrixExchange.perform(
            endpoint, on: homeserverURL, token: accessToken, timeout: timeout, transport: transport)
    }
}
