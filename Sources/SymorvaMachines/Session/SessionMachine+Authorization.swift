import SymorvaRuntime

// User-interactive authentication for the signed-in account's sensitive requests (replacing the
// cross-signing identity, removing a device, deactivating): the request goes out without
// `auth`; when the server answers 401 with a flow whose only remaining stage is
// `m.login.password`, it goes out once more with the password the caller gave. One at a time.

/// A request that may need the account's password (user-interactive authentication).
package struct AuthorizedRequest: Sendable, Equatable {
    /// Chosen by the caller; the result comes back under it.
    package var id: String
    /// `POST`, `PUT` or `DELETE`.
    package var method: String
    /// The path under the homeserver's base URL (`/_matrix/client/v3/keys/device_signing/upload`).
    package var path: String
    /// The request's JSON object, without `auth` (the interpreter adds it).
    package var body: [UInt8]
    /// The account's password, used only if the server asks for the `m.login.password` stage.
    package var password: Secret<String>

    /// A request as given.
    package init(id: String, method: String, path: String, body: [UInt8], password: Secret<String>) {
        self.id = id
        self.method = method
        self.path = path
        self.body = body
        self.password = password
    }
}

/// One send of an ``AuthorizedRequest``: with the session's access token, and with the password
/// stage once the server asked for it.
package struct AuthorizedCall: Sendable, Equatable {
    /// The request.
    package var request: AuthorizedRequest
    /// Where to send it.
    package var homeserverURL: HomeserverURL
    /// The session's access token.
    package var accessToken: Secret<String>
    /// The account (the password stage's `identifier`).
    package var userID: UserID
    /// `nil` for the first send; the server's UIA session (possibly absent) for the password stage.
    package var passwordStage: PasswordStage?

    /// The `m.login.password` stage of a UIA session.
    package struct PasswordStage: Sendable, Equatable {
        /// The UIA session the server gave, if any.
        package var session: String?
        /// A stage for `session`.
        package init(session: String?) { self.session = session }
    }

    /// A call as given.
    package init(
        request: AuthorizedRequest, homeserverURL: HomeserverURL, accessToken: Secret<String>, userID: UserID,
        passwordStage: PasswordStage?
    ) {
        self.request = request
        self.homeserverURL = homeserverURL
        self.accessToken = accessToken
        self.userID = userID
        self.passwordStage = passwordStage
    }
}

/// How an authorized request's send ended when the exchange itself worked.
package enum AuthorizationOutcome: Sendable, Equatable {
    /// A 2xx answer, with its body.
    case completed(body: [UInt8])
    /// A 401 with the stages the server still wants.
    case authenticationRequired(AuthenticationChallenge)
}

/// An authorized request under way.
package struct AuthorizationAttempt: Sendable, Equatable {
    /// The request.
    package var request: AuthorizedRequest
    /// Whether the password stage has been sent (a second challenge then means a wrong password).
    package var passwordSent: Bool

    /// An attempt as given.
    package init(request: AuthorizedRequest, passwordSent: Bool = false) {
        self.request = request
        self.passwordSent = passwordSent
    }
}

extension SessionMachine.State {
    /// The session whose tokens requests may use: `signedIn`, or `authorizing` (signed in with
    /// a request that may need the password under way).
    package var signedInSession: Session? {
        switch self {
        case .signedIn(let session), .authorizing(let session, _): session
        default: nil
        }
    }
}

extension SessionMachine {
    /// The password stage's type.
    package static let passwordStage = "m.login.password"

    /// `authorizationRequested` outside `signedIn` and `authorizing`: answered at once.
    func refuseAuthorization(_ request: AuthorizedRequest) -> Transition<State, Effect> {
        .stay(effects: [.finishAuthorization(id: request.id, .failure(.notSignedIn))])
    }

    /// Starts an authorized request from ``State/signedIn(_:)``.
    func beginAuthorization(_ session: Session, request: AuthorizedRequest) -> Transition<State, Effect> {
        .move(
            to: .authorizing(session, AuthorizationAttempt(request: request)),
            effects: [.sendAuthorized(call(session, request: request, passwordStage: nil))])
    }

    func authorizing(_ session: Session, attempt: AuthorizationAttempt, on event: Event) -> Transition<State, Effect> {
        let id = attempt.request.id
        switch event {
        case .authorizationResponse(.success(.completed(let body))):
            return .move(to: .signedIn(session), effects: [.finishAuthorization(id: id, .success(body))])
        case .authorizationResponse(.success(.authenticationRequired(let challenge))):
            if attempt.passwordSent {
                // The server asks again after the password: it refused the password.
                return .move(
                    to: .signedIn(session), effects: [.finishAuthorization(id: id, .failure(.invalidCredentials))])
            }
            guard Self.offersPasswordStage(challenge) else {
                let shortest = challenge.flows.min { $0.stages.count < $1.stages.count }?.stages ?? []
                return .move(
                    to: .signedIn(session),
                    effects: [.finishAuthorization(id: id, .failure(.unsupportedAuthenticationFlow(stages: shortest)))])
            }
            var next = attempt
            next.passwordSent = true
            return .move(
                to: .authorizing(session, next),
                effects: [
                    .sendAuthorized(
                        call(
                            session, request: attempt.request,
                            passwordStage: AuthorizedCall.PasswordStage(session: challenge.session)))
                ])
        case .authorizationResponse(.failure(let error)):
            return .move(to: .signedIn(session), effects: [.finishAuthorization(id: id, .failure(error))])
        case .authorizationRequested(let request):
            // One at a time: the caller may try again once this one is done.
            return .stay(effects: [.finishAuthorization(id: request.id, .failure(.authorizationInProgress))])
        case .cancelRequested:
            return .move(
                to: .signedIn(session),
                effects: [.cancel(Keys.authorization), .finishAuthorization(id: id, .failure(.cancelled))])
        case .accessTokenRejected, .refreshNeeded, .refreshTimerFired, .signOutRequested:
            // The session's own business comes first: the request ends, then the event is
            // handled as in `signedIn`.
            let ending: [Effect] = [.cancel(Keys.authorization), .finishAuthorization(id: id, .failure(.cancelled))]
            switch signedIn(session, on: event) {
            case .move(let next, let effects): return .move(to: next, effects: ending + effects)
            case .stay(let effects): return .move(to: .signedIn(session), effects: ending + effects)
            case .ignored: return .move(to: .signedIn(session), effects: ending)
            }
        case .discoveryRequested, .wellKnownResponse, .versionsResponse, .passwordSubmitted, .loginTokenSubmitted,
            .loginResponse, .registrationRequested, .registrationResponse, .restoreRequested, .restored,
            .tokensPersisted, .storeFailed, .refreshResponse, .logoutResponse, .localDataWiped, .retryTimerFired:
            return .ignored
        }
    }

    /// Whether a flow of `challenge` has `m.login.password` as its only stage not yet completed.
    static func offersPasswordStage(_ challenge: AuthenticationChallenge) -> Bool {
        challenge.flows.contains { flow in
            flow.stages.filter { !challenge.completed.contains($0) } == [passwordStage]
        }
    }

    func call(_ session: Session, request: AuthorizedRequest, passwordStage: AuthorizedCall.PasswordStage?)
        -> AuthorizedCall
    {
        AuthorizedCall(
            request: request, homeserverURL: session.homeserver.baseURL, accessToken: session.tokens.accessToken,
            userID: session.userID, passwordStage: passwordStage)
    }
}
