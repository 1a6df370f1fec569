import SymorvaRuntime

// Case names for traces and the chart, and descriptions that never show a payload: events
// carry passwords and tokens, states carry sessions, effects carry requests.

extension SessionMachine {
    /// Every ``State`` case name, in declaration order: the state ids of `StateCharts/Session.scxml`.
    public static var stateCaseNames: [String] {
        [
            "signedOut", "restoring", "discovering", "awaitingCredentials", "authenticating", "registering",
            "persisting", "signedIn", "refreshing", "softLoggedOut", "signingOut", "wipingLocalData", "failed",
        ]
    }

    /// Every ``Event`` case name, in declaration order: the event names of `StateCharts/Session.scxml`.
    public static var eventCaseNames: [String] {
        [
            "discoveryRequested", "wellKnownResponse", "versionsResponse", "passwordSubmitted",
            "loginTokenSubmitted", "loginResponse", "registrationRequested", "registrationResponse",
            "cancelRequested", "restoreRequested", "restored", "tokensPersisted", "storeFailed",
            "accessTokenRejected", "refreshNeeded", "refreshResponse", "signOutRequested", "logoutResponse",
            "localDataWiped", "refreshTimerFired", "retryTimerFired",
        ]
    }

    /// Every ``Effect`` case name, in declaration order.
    public static var effectCaseNames: [String] {
        [
            "loadStoredSession", "fetchWellKnown", "fetchVersions", "sendLogin", "sendRegister", "persistSession",
            "activate", "scheduleRefresh", "scheduleRetry", "sendRefresh", "sendLogout", "wipeLocalData",
            "keepLocalData", "cancel",
        ]
    }
}

extension SessionMachine.State: CaseNamed, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var caseName: String {
        switch self {
        case .signedOut: "signedOut"
        case .restoring: "restoring"
        case .discovering: "discovering"
        case .awaitingCredentials: "awaitingCredentials"
        case .authenticating: "authenticating"
        case .registering: "registering"
        case .persisting: "persisting"
        case .signedIn: "signedIn"
        case .refreshing: "refreshing"
        case .softLoggedOut: "softLoggedOut"
        case .signingOut: "signingOut"
        case .wipingLocalData: "wipingLocalData"
        case .failed: "failed"
        }
    }

    public var description: String { "Session.State.\(caseName)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { redactedMirror(self, caseName) }
}

extension SessionMachine.Event: CaseNamed, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var caseName: String {
        switch self {
        case .discoveryRequested: "discoveryRequested"
        case .wellKnownResponse: "wellKnownResponse"
        case .versionsResponse: "versionsResponse"
        case .passwordSubmitted: "passwordSubmitted"
        case .loginTokenSubmitted: "loginTokenSubmitted"
        case .loginResponse: "loginResponse"
        case .registrationRequested: "registrationRequested"
        case .registrationResponse: "registrationResponse"
        case .cancelRequested: "cancelRequested"
        case .restoreRequested: "restoreRequested"
        case .restored: "restored"
        case .tokensPersisted: "tokensPersisted"
        case .storeFailed: "storeFailed"
        case .accessTokenRejected: "accessTokenRejected"
        case .refreshNeeded: "refreshNeeded"
        case .refreshResponse: "refreshResponse"
        case .signOutRequested: "signOutRequested"
        case .logoutResponse: "logoutResponse"
        case .localDataWiped: "localDataWiped"
        case .refreshTimerFired: "refreshTimerFired"
        case .retryTimerFired: "retryTimerFired"
        }
    }

    public var description: String { "Session.Event.\(caseName)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { redactedMirror(self, caseName) }
}

extension SessionMachine.Effect: MachineEffect, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public var caseName: String {
        switch self {
        case .loadStoredSession: "loadStoredSession"
        case .fetchWellKnown: "fetchWellKnown"
        case .fetchVersions: "fetchVersions"
        case .sendLogin: "sendLogin"
        case .sendRegister: "sendRegister"
        case .persistSession: "persistSession"
        case .activate: "activate"
        case .scheduleRefresh: "scheduleRefresh"
        case .scheduleRetry: "scheduleRetry"
        case .sendRefresh: "sendRefresh"
        case .sendLogout: "sendLogout"
        case .wipeLocalData: "wipeLocalData"
        case .keepLocalData: "keepLocalData"
        case .cancel: "cancel"
        }
    }

    /// Requests and timers are keyed so that a newer one replaces an older one and a state
    /// change can cancel them; the rest are plain performs.
    public var directive: EffectDirective {
        typealias Keys = SessionMachine.Keys
        switch self {
        case .fetchWellKnown, .fetchVersions: return .keyed(Keys.discovery)
        case .sendLogin: return .keyed(Keys.login)
        case .sendRegister: return .keyed(Keys.register)
        case .persistSession: return .keyed(Keys.persist)
        case .scheduleRefresh: return .keyed(Keys.refreshTimer)
        case .scheduleRetry: return .keyed(Keys.retryTimer)
        case .sendRefresh: return .keyed(Keys.refresh)
        case .sendLogout: return .keyed(Keys.logout)
        case .cancel(let key): return .cancel(key)
        case .loadStoredSession, .activate, .wipeLocalData, .keepLocalData: return .perform
        }
    }

    /// The case name, plus the key of a `cancel` (keys are program-chosen, safe to show).
    public var description: String {
        if case .cancel(let key) = self { return "Session.Effect.cancel(\(key))" }
        return "Session.Effect.\(caseName)"
    }

    public var debugDescription: String { description }
    public var customMirror: Mirror { redactedMirror(self, caseName) }
}

/// A mirror that shows the case name and hides the payload, so that `dump` and reflection-based
/// tools print `passwordSubmitted` and never the password or the user name next to it.
private func redactedMirror(_ subject: some Any, _ caseName: String) -> Mirror {
    Mirror(subject, children: [(label: caseName, value: "<redacted>")], displayStyle: .enum)
}
