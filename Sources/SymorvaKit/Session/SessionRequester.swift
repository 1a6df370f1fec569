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
final class SessionRequester: MatrixRequester {
    let homeserverURL: HomeserverURL
    let userID: UserID
    private let transport: any HTTPTransport
    private let host: MachineHost<SessionMachine>
    private let scope: AccountScope
    private let wallClock: any WallClock
    private let logger: Logger

    /// A requester for the account whose session `host` runs in `scope`.
    init(
        userID: UserID, homeserverURL: HomeserverURL, transport: any HTTPTransport, host: MachineHost<SessionMachine>,
        scope: AccountScope, wallClock: any WallClock, logger: Logger
    ) {
        self.userID = userID
        self.homeserverURL = homeserverURL
        self.transport = transport
        self.host = host
        self.scope = scope
        self.wallClock = wallClock
        self.logger = logger
    }

    func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse {
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
        if case .signedIn(let session) = state { return session.tokens.accessToken }
        return nil
    }

    /// A saved, unexpired access token other than `rejected`, waiting for a refresh when needed.
    private func usableToken(rejected: Secret<String>?) async throws(MatrixRequestError) -> Secret<String> {
        var rejected = rejected
        if case .signedIn(let session) = host.states.value, session.tokens.accessToken != rejected,
            let expiry = session.tokens.expiry, expiry.expiresAt <= wallClock.now
        {
            // Sending a token known to be dead would only earn a 401: refresh first.
            host.post(.refreshNeeded)
            rejected = session.tokens.accessToken
        }
        let excluded = rejected
        let outcome = await host.states.first(
            scope: scope, ended: Result<Secret<String>, MatrixRequestError>.failure(.notSignedIn),
            cancelled: .failure(.transport(.cancelled))
        ) { state -> Result<Secret<String>, MatrixRequestError>? in
            switch state {
            case .signedIn(let session):
                return session.tokens.accessToken == excluded ? nil : .success(session.tokens.accessToken)
            case .refreshing, .persisting, .restoring, .authenticating:
                return nil
            case .signedOut, .discovering, .awaitingCredentials, .registering, .softLoggedOut, .signingOut,
                .wipingLocalData, .failed:
                return .failure(.notSignedIn)
            }
        }
        return try outcome.get()
    }
}

/// OpenID tokens for the community services, from the account's Matrix session.
struct SessionOpenIDSource: OpenIDTokenSource {
    let requester: any MatrixRequester

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

// MARK: - Waiting for a value

extension ObservableValue {
    /// Waits for the first value, current or later, that `decide` maps to an outcome.
    ///
    /// - Parameters:
    ///   - scope: when given, its end (or advance) resolves the wait with `ended`.
    ///   - cancelled: the outcome when the waiting task is cancelled.
    func first<Outcome: Sendable>(
        scope: AccountScope? = nil, ended: Outcome? = nil, cancelled: Outcome,
        _ decide: @escaping @Sendable (Value) -> Outcome?
    ) async -> Outcome {
        let shot = OneShot<Outcome>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                shot.install(continuation)
                shot.addCleanup(subscribe { value in if let outcome = decide(value) { shot.resolve(outcome) } })
                if let scope, let ended {
                    shot.addCleanup(scope.onAdvance { _ in shot.resolve(ended) })
                }
            }
        } onCancel: {
            shot.resolve(cancelled)
        }
    }
}

/// Resumes one continuation with the first outcome offered, from whichever thread offers it,
/// and then runs its clean-ups (unsubscribing, unregistering) once.
final class OneShot<Outcome: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Outcome, Never>?
        var outcome: Outcome?
        var cleanups: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    /// Hands over the continuation; resumes it at once if an outcome came first.
    func install(_ continuation: CheckedContinuation<Outcome, Never>) {
        let ready = state.withLock { state -> Outcome? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    /// Offers an outcome; only the first one counts.
    func resolve(_ outcome: Outcome) {
        let (continuation, cleanups, isFirst) = state.withLock {
            state -> (CheckedContinuation<Outcome, Never>?, [@Sendable () -> Void], Bool) in
            guard state.outcome == nil else { return (nil, [], false) }
            state.outcome = outcome
            defer {
                state.continuation = nil
                state.cleanups = []
            }
            return (state.continuation, state.cleanups, true)
        }
        guard isFirst else { return }
        for cleanup in cleanups { cleanup() }
        continuation?.resume(returning: outcome)
    }

    /// Adds a clean-up; runs it at once when the outcome is already known.
    func addCleanup(_ cleanup: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            guard state.outcome == nil else { return true }
            state.cleanups.append(cleanup)
            return false
        }
        if runNow { cleanup() }
    }
}
