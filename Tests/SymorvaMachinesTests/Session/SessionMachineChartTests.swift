import Foundation
import SymorvaMachines
import SymorvaRuntime
import Testing

/// The machine against `StateCharts/Session.scxml`, pair by pair, and its redaction.
///
/// A chart transition without `target` means "stay"; a `target` means a move to that state
/// (possibly the same case with new data); an event a state does not list is ignored there.
/// When several targets are possible for one pair (success or failure of a response), the
/// chart lists each. Run with `SYMORVA_WRITE_CHARTS=1` to rewrite the chart from the code,
/// then review the diff.
@Suite("Session machine: chart and case names")
struct SessionMachineChartTests {
    static let sampleStates = SessionSamples.sampleStates
    static let sampleEvents = SessionSamples.sampleEvents

    static let chartURL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("StateCharts/Session.scxml")

    @Test("Samples cover every state and event case, and the name lists are complete")
    func samplesCoverEveryCase() {
        #expect(Set(Self.sampleStates.map(\.caseName)) == Set(SessionMachine.stateCaseNames))
        #expect(Set(Self.sampleEvents.map(\.caseName)) == Set(SessionMachine.eventCaseNames))
        #expect(SessionMachine.stateCaseNames.count == Set(SessionMachine.stateCaseNames).count)
        #expect(SessionMachine.eventCaseNames.count == Set(SessionMachine.eventCaseNames).count)
    }

    @Test("Whether an event is ignored depends only on the state's and event's cases")
    func ignoringIsCaseLevel() {
        var handled: [String: Bool] = [:]
        for state in Self.sampleStates {
            for event in Self.sampleEvents {
                let key = "\(state.caseName) + \(event.caseName)"
                let isIgnored = Fixture.machine.transition(from: state, on: event).isIgnored
                if let previous = handled[key] {
                    #expect(previous == isIgnored, "\(key) is ignored for some data only")
                }
                handled[key] = isIgnored
            }
        }
    }

    @Test("Every (state, event) pair agrees with StateCharts/Session.scxml")
    func chartMatchesCode() throws {
        let implied = ChartOutcomes(machine: Fixture.machine, states: Self.sampleStates, events: Self.sampleEvents)
        let rendered = implied.render(name: SessionMachine.name, initial: "signedOut")
        if ProcessInfo.processInfo.environment["SYMORVA_WRITE_CHARTS"] == "1" {
            try rendered.write(to: Self.chartURL, atomically: true, encoding: .utf8)
        }
        let text = try String(contentsOf: Self.chartURL, encoding: .utf8)
        let chart = try #require(ParsedChart(text))
        #expect(chart.name == SessionMachine.name)
        #expect(chart.initial == "signedOut")
        #expect(chart.stateIDs == SessionMachine.stateCaseNames)
        #expect(Set(chart.transitions.map(\.event)).isSubset(of: Set(SessionMachine.eventCaseNames)))
        let missing = implied.transitions.subtracting(chart.transitions)
        let extra = chart.transitions.subtracting(implied.transitions)
        #expect(missing.isEmpty, "the code does, the chart does not say: \(missing.sorted())")
        #expect(extra.isEmpty, "the chart says, no sample does: \(extra.sorted())")
        if !missing.isEmpty || !extra.isEmpty { print("Chart implied by the code:\n\(rendered)") }
    }

    @Test("Descriptions, reflection and case names never show a password, a user name or a token")
    func redaction() {
        let canary = "CANARY-7f3a"
        let events: [Event] = [
            .passwordSubmitted(username: "user-\(canary)", password: Secret("pw-\(canary)")),
            .loginTokenSubmitted(Secret("lt-\(canary)")),
            .registrationRequested(username: "user-\(canary)", password: Secret("pw-\(canary)")),
            .refreshResponse(
                .success(SessionTokens(accessToken: Secret("at-\(canary)"), refreshToken: Secret("rt-\(canary)")))),
        ]
        var session = Fixture.session()
        session.tokens = SessionTokens(accessToken: Secret("at-\(canary)"), refreshToken: Secret("rt-\(canary)"))
        let states: [State] = [
            .signedIn(session), .refreshing(session, waiting: 1, attempt: .first),
            .authenticating(
                server: Fixture.server,
                attempt: LoginAttempt(credentials: .password(username: "user-\(canary)", password: Secret(canary)))),
        ]
        let effects: [Effect] = [
            .sendLogin(
                Fixture.loginRequest(credentials: .password(username: "user-\(canary)", password: Secret(canary)))),
            .sendRefresh(RefreshRequest(homeserverURL: Fixture.baseURL, refreshToken: Secret("rt-\(canary)"))),
            .persistSession(session), .activate(session),
        ]
        var texts: [String] = []
        for value in events as [Any] + states as [Any] + effects as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            texts += [String(describing: value), String(reflecting: value), "\(value)", dumped]
            texts.append(caseLabel(of: value))
        }
        texts += events.map(\.caseName) + states.map(\.caseName) + effects.map(\.caseName)
        texts.append("\(LogMessage("event \(events[0]) session \(session)"))")
        for text in texts { #expect(!text.contains(canary), "leaked: \(text)") }
        #expect(events[0].caseName == "passwordSubmitted")
        #expect("\(events[0])" == "Session.Event.passwordSubmitted")
        #expect(caseLabel(of: SessionMachine.Event.tokensPersisted) == "tokensPersisted")
    }

    @Test("Effects are keyed so that requests and timers can be replaced and cancelled")
    func effectDirectives() {
        #expect(Effect.sendRefresh(Fixture.refreshRequest()).directive == .keyed(Keys.refresh))
        #expect(Effect.scheduleRefresh(at: Fixture.issuedAt).directive == .keyed(Keys.refreshTimer))
        #expect(Effect.scheduleRetry(after: .seconds(1)).directive == .keyed(Keys.retryTimer))
        #expect(Effect.cancel(Keys.login).directive == .cancel(Keys.login))
        #expect(Effect.wipeLocalData(Fixture.account).directive == .perform)
        #expect(Effect.cancel(Keys.login).description == "Session.Effect.cancel(session.login)")
    }
}

/// One chart transition: in `state`, `event` moves to `target`, or stays when `target` is nil.
struct ChartTransition: Hashable, Comparable, CustomStringConvertible {
    var state: String
    var event: String
    var target: String?

    static func < (lhs: Self, rhs: Self) -> Bool { lhs.description < rhs.description }
    var description: String { "\(state) --\(event)--> \(target ?? "(stay)")" }
}

/// The transitions the code takes over the samples.
struct ChartOutcomes {
    var transitions: Set<ChartTransition> = []
    private var ordered: [ChartTransition] = []

    init(machine: SessionMachine, states: [State], events: [Event]) {
        for state in states {
            for event in events {
                let target: String?
                switch machine.transition(from: state, on: event) {
                case .ignored: continue
                case .stay: target = nil
                case .move(let next, _): target = next.caseName
                }
                let transition = ChartTransition(state: state.caseName, event: event.caseName, target: target)
                if transitions.insert(transition).inserted { ordered.append(transition) }
            }
        }
    }

    /// The SCXML text of these transitions, states and events in declaration order.
    func render(name: String, initial: String) -> String {
        var lines = [
            #"<?xml version="1.0" encoding="UTF-8"?>"#,
            "<!-- The session machine (Sources/SymorvaMachines/Session). State ids are State case names,",
            "     event names are Event case names. No target: the machine stays. An event a state does not",
            "     list is ignored there. Several transitions for one event: the outcomes the data decides. -->",
            #"<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="\#(name)" initial="\#(initial)">"#,
        ]
        for state in SessionMachine.stateCaseNames {
            let mine = ordered.filter { $0.state == state }
            guard !mine.isEmpty else {
                lines.append(#"  <state id="\#(state)"/>"#)
                continue
            }
            lines.append(#"  <state id="\#(state)">"#)
            for event in SessionMachine.eventCaseNames {
                for transition in mine where transition.event == event {
                    if let target = transition.target {
                        lines.append(#"    <transition event="\#(event)" target="\#(target)"/>"#)
                    } else {
                        lines.append(#"    <transition event="\#(event)"/>"#)
                    }
                }
            }
            lines.append("  </state>")
        }
        lines.append("</scxml>")
        return lines.joined(separator: "\n") + "\n"
    }
}

/// The subset of SCXML the charts use, read with regular expressions.
struct ParsedChart {
    var name: String
    var initial: String
    var stateIDs: [String] = []
    var transitions: Set<ChartTransition> = []

    init?(_ source: String) {
        let text = source.replacing(try! Regex(#"<!--[\s\S]*?-->"#), with: "")
        let root = try! Regex(#"<scxml\b[^>]*\bname="([^"]+)"[^>]*\binitial="([^"]+)""#)
        guard let match = text.firstMatch(of: root),
            let name = match.output[1].substring, let initial = match.output[2].substring
        else { return nil }
        self.name = String(name)
        self.initial = String(initial)
        let stateBlock = try! Regex(#"<state\s+id="([^"]+)"\s*(?:/>|>([\s\S]*?)</state>)"#)
        let transition = try! Regex(#"<transition\s+event="([^"]+)"(?:\s+target="([^"]+)")?\s*/>"#)
        for block in text.matches(of: stateBlock) {
            guard let id = block.output[1].substring.map(String.init) else { continue }
            stateIDs.append(id)
            guard let body = block.output[2].substring else { continue }
            for found in body.matches(of: transition) {
                guard let event = found.output[1].substring.map(String.init) else { continue }
                let target = found.output[2].substring.map(String.init)
                transitions.insert(ChartTransition(state: id, event: event, target: target))
            }
        }
    }
}

/// Sample states and events for the chart check: every case, with the data variants that
/// lead to different targets (waiting or not, resuming or not, homeserver known or not).
enum SessionSamples {
    static let session = Fixture.session()
    static let plainSession = Fixture.session(refresh: false, lifetime: nil)
    static let password = Credentials.password(username: "alice", password: Fixture.password)
    static let waiting = Attempt(number: 1, isWaitingToRetry: true)

    static let sampleStates: [SessionMachine.State] = [
        .signedOut,
        .restoring(Fixture.account),
        .discovering(target: .serverName("localhost"), step: .wellKnown),
        .discovering(target: .serverName("localhost"), step: .versions(Fixture.baseURL)),
        .discovering(target: .homeserverURL(Fixture.baseURL, serverName: nil), step: .versions(Fixture.baseURL)),
        .awaitingCredentials(Fixture.server),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password)),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password, attempt: waiting)),
        .authenticating(server: Fixture.server, attempt: LoginAttempt(credentials: password, resuming: session)),
        .authenticating(
            server: Fixture.server, attempt: LoginAttempt(credentials: password, resuming: session, attempt: waiting)),
        .registering(
            server: Fixture.server, attempt: RegistrationAttempt(username: "alice", password: Fixture.password)),
        .registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 1, attempt: waiting)),
        .registering(
            server: Fixture.server,
            attempt: RegistrationAttempt(
                username: "alice", password: Fixture.password, auth: .dummy(session: "uia-session-1"),
                stagesSubmitted: 3)),
        .persisting(session, origin: .login, waiting: 0),
        .persisting(session, origin: .registration, waiting: 0),
        .persisting(session, origin: .reauthentication, waiting: 1),
        .persisting(session, origin: .refresh, waiting: 2),
        .signedIn(session),
        .signedIn(plainSession),
        .refreshing(session, waiting: 0, attempt: .first),
        .refreshing(session, waiting: 2, attempt: waiting),
        .softLoggedOut(session, lastError: nil),
        .softLoggedOut(session, lastError: .invalidCredentials),
        .signingOut(session),
        .wipingLocalData(Fixture.account),
        .failed(from: .discovery, error: .unreachable(.cannotConnect), server: nil),
        .failed(from: .login, error: .invalidCredentials, server: Fixture.server),
    ]

    static let sampleEvents: [SessionMachine.Event] = [
        .discoveryRequested(.serverName("localhost")),
        .discoveryRequested(.homeserverURL(Fixture.baseURL, serverName: "localhost")),
        .wellKnownResponse(.success(Fixture.baseURL)),
        .wellKnownResponse(.success(nil)),
        .wellKnownResponse(.failure(.discoveryFailed(reason: "invalid JSON"))),
        .versionsResponse(.success(Fixture.versions)),
        .versionsResponse(.success(Fixture.oldVersions)),
        .versionsResponse(.failure(.unreachable(.cannotConnect))),
        .passwordSubmitted(username: "alice", password: Fixture.password),
        .loginTokenSubmitted(Fixture.loginToken),
        .loginResponse(.success(Fixture.grant(2))),
        .loginResponse(.success(Fixture.grant(2, user: Fixture.bob))),
        .loginResponse(.failure(.invalidCredentials)),
        .loginResponse(.failure(.rateLimited(retryAfter: .seconds(2)))),
        .registrationRequested(username: "alice", password: Fixture.password),
        .registrationResponse(.success(.registered(Fixture.grant(2)))),
        .registrationResponse(.success(.authenticationRequired(Fixture.dummyChallenge))),
        .registrationResponse(.success(.authenticationRequired(Fixture.captchaOnlyChallenge))),
        .registrationResponse(.failure(.userInUse)),
        .registrationResponse(.failure(.rateLimited(retryAfter: nil))),
        .cancelRequested,
        .restoreRequested(Fixture.account),
        .restored(nil),
        .restored(StoredSession(session: session)),
        .restored(StoredSession(session: session, isSoftLoggedOut: true)),
        .tokensPersisted,
        .storeFailed(.store(reason: "disk full")),
        .accessTokenRejected(softLogout: true),
        .accessTokenRejected(softLogout: false),
        .refreshNeeded,
        .refreshResponse(.success(Fixture.tokens(2))),
        .refreshResponse(.failure(.unknownToken(softLogout: true))),
        .refreshResponse(.failure(.unknownToken(softLogout: false))),
        .refreshResponse(.failure(.unreachable(.timedOut))),
        .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(5)))),
        .refreshResponse(.failure(.invalidResponse(reason: "no access_token"))),
        .signOutRequested,
        .logoutResponse(nil),
        .logoutResponse(.unknownToken(softLogout: false)),
        .logoutResponse(.unreachable(.timedOut)),
        .localDataWiped,
        .refreshTimerFired,
        .retryTimerFired,
    ]
}
