import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import Synchronization

/// The real ``MatrixRequester`` of a signed-in account: it sends requests with the session's
/// current access token and keeps them working across token refreshes.
///
/// - The token comes from the session host's published `signedIn` state, which only ever
///   carries saved tokens (persist before use). While the session is refreshing or saving new
///   tokens, requests wait; soft-logged-out or signed-out sessions fail them with
///   ``MatrixRequestError/notSignedIn``.
/// - A token the wall clock says has expired is not sent: the requester posts `refreshNeeded`
///   and waits for the next token.
/// - On `M_UNKNOWN_TOKEN`: if a newer token is already active, the request is simply retried
///   with it. Otherwise it posts `accessTokenRejected(softLogout:)` to the session host — whose
///   machine runs at most one refresh however many requests report — waits for the next
///   `signedIn` state and retries once.
/// - Ending the account's scope fails every waiting request.
package final class SessionRequester: MatrixRequester {
    package let homeserverURL: HomeserverURL
    package let userID: UserID
    private let transport: any HTTPTransport
    private let host: MachineHost<SessionMachine>
    private let wallClock: any WallClock
    private let logger: Logger

    /// A requester for the account whose session `host` runs (in the account's scope).
    init(
        userID: UserID, homeserverURL: HomeserverURL, transport: any HTTPTransport, host: MachineHost<SessionMachine>,
        wallClock: any WallClock, logger: Logger
    ) {
        self.userID = userID
        self.homeserverURL = homeserverURL
        self.transport = transport
        self.host = host
        self.wallClock = wallClock
        self.logger = logger
    }

    package func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse {
        guard endpoint.requiresAuth else {
            return try await MatrixExchange.perform(
                endpoint, on: homeserverURL, token: nil, timeout: timeout, transport: transport)
        }
        var token = try await usableToken(rejected: nil)
        var retried = false
        while true {
            do {
                return try await MatrixExchange.perform(
                    endpoint, on: homeserverURL, token: token, timeout: timeout, transport: transport)
            } catch .matrix(let error) where error.code == .unknownToken && !retried {
                retried = true
                if let current = Self.activeToken(in: host.states.value), current != token {
                    // Rejected for being old: a refresh finished while this request was on the wire.
                    token = current
                    continue
                }
                logger.info("access token rejected account=\(userID) softLogout=\(error.isSoftLogout)")
                host.post(.accessTokenRejected(softLogout: error.isSoftLogout))
                token = try await usableToken(rejected: token)
            }
        }
    }

    /// The token of a `signedIn` state.
    static func activeToken(in state: SessionMachine.State) -> Secret<String>? {
        state.signedInSession?.tokens.accessToken
    }

    /// A saved, unexpired access token other than `rejected`, waiting for a refresh when needed.
    private func usableToken(rejected: Secret<String>?) async throws(MatrixRequestError) -> Secret<String> {
        var rejected = rejected
        if let session = host.states.value.signedInSession, session.tokens.accessToken != rejected,
            let expiry = session.tokens.expiry, expiry.expiresAt <= wallClock.now
        {
            // Sending a token known to be dead would only earn a 401: refresh first.
            host.post(.refreshNeeded)
            rejected = session.tokens.accessToken
        }
        let excluded = rejected
        // The host's scope moving on (or the host stopping) ends the wait: not signed in.
        let outcome = await host.wait { state -> Result<Secret<String>, MatrixRequestError>? in
            switch state {
            case .signedIn(let session), .authorizing(let session, _):
                return session.tokens.accessToken == excluded ? nil : .success(session.tokens.accessToken)
            case .refreshing, .persisting, .restoring, .authenticating:
                return nil
            case .signedOut, .discovering, .awaitingCredentials, .registering, .softLoggedOut, .signingOut,
                .wipingLocalData, .failed:
                return .failure(.notSignedIn)
            }
        }
        guard let outcome else { throw Task.isCancelled ? .transport(.cancelled) : .notSignedIn }
        return try outcome.get()
    }
}

/// OpenID tokens for the community services, from the account's Matrix session.
struct SessionOpenIDSource: OpenIDTokenSource {
    let requester: any MatrixRequester
    /// The account's session, whose device the services token is bound to.
    let session: MachineHost<SessionMachine>?

    init(requester: any MatrixRequester, session: MachineHost<SessionMachine>? = nil) {
        self.requester = requester
        self.session = session
    }

    func deviceID() async -> String? {
        switch session?.states.value {
        case .signedIn(let session), .authorizing(let session, _), .softLoggedOut(let session, _):
            session.deviceID.rawValue
        default: nil
        }
    }

    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        let response: HTTPResponse
        do {
            response = try await requester.send(AuthAPI.requestOpenIDToken(for: requester.userID))
        } catch {
            switch error {
            case .transport(let failure): throw .transport(failure)
            case .matrix(let matrix): throw .openIDRefused(matrix.code, status: matrix.status)
            case .notSignedIn: throw .openIDRefused(.unknownToken, status: 401)
            case .invalidRequest: throw .malformedResponse(status: 0)
            }
        }
        do {
            return try AuthAPI.decode(OpenIDTokenResponse.self, from: response.body).openIDToken
        } catch {
            throw .malformedResponse(status: response.status)
        }
    }
}
