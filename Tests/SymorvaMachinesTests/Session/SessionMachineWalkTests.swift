import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Seeded random walks: a simulated world (user, server, store, timers) answers the effects the
/// machine asks for, in random order and with random outcomes, while invariants are checked
/// after every step.
@Suite("Session machine: randomized walks")
struct SessionMachineWalkTests {
    @Test("Realistic walks keep one refresh in flight and never use unsaved tokens", arguments: 0..<24)
    func realisticWalk(seed: UInt64) {
        var world = SessionSimulatedWorld(seed: seed)
        for _ in 0..<2_000 { world.step() }
        #expect(world.violations.isEmpty, "seed \(seed): \(world.violations.prefix(3))")
        // The walk is only worth something if it reaches the interesting places.
        let interesting: Set = ["signedIn", "refreshing", "persisting", "softLoggedOut", "wipingLocalData"]
        #expect(interesting.isSubset(of: world.visited), "seed \(seed) visited only \(world.visited.sorted())")
        #expect(world.maxWaiting >= 2, "seed \(seed): no refresh was ever joined")
    }

    @Test("Chaotic walks over every sample event never crash and keep counts sane", arguments: 0..<8)
    func chaoticWalk(seed: UInt64) {
        var random = SeededGenerator(seed: seed, skipping: 1)
        let machine = SessionFixture.machine
        var state = SessionState.signedOut
        var visited: Set<String> = []
        for _ in 0..<5_000 {
            let event = SessionSamples.sampleEvents[Int(random.next() % UInt64(SessionSamples.sampleEvents.count))]
            state = machine.transition(from: state, on: event).nextState(after: state)
            visited.insert(state.caseName)
            switch state {
            case .refreshing(let session, let waiting, let attempt):
                #expect(waiting >= 0 && attempt.number >= 1 && session.tokens.refreshToken != nil)
            case .persisting(_, _, let waiting):
                #expect(waiting >= 0)
            default:
                break
            }
        }
        #expect(visited.count > 5)
    }
}

/// The machine plus everything around it, simulated.
struct SessionSimulatedWorld {
    let machine = SessionFixture.machine
    var random: SeededGenerator
    var state = SessionState.signedOut
    /// Effects the world still owes an answer to, by key (keyed effects replace each other).
    var pendingKeyed: [EffectKey: SessionEffect] = [:]
    /// Store operations the world still owes an answer to, in order.
    var pendingStore: [SessionEffect] = []
    /// What the store holds.
    var stored: StoredSession?
    /// Access and refresh tokens that reached the store; only these may ever be used.
    var savedTokens: Set<String> = []
    var nextToken = 100
    var violations: [String] = []
    var visited: Set<String> = []
    var maxWaiting = 0

    init(seed: UInt64) { random = SeededGenerator(seed: seed, skipping: 1) }

    mutating func step() {
        if random.chance(35) || (pendingKeyed.isEmpty && pendingStore.isEmpty) {
            apply(userOrRequestEvent())
        } else if !pendingStore.isEmpty && random.chance(50) {
            let effect = pendingStore.removeFirst()
            if let event = answer(effect) { apply(event) }
        } else if let key = pendingKeyed.keys.sorted(by: { $0.name < $1.name }).randomElement(using: &random) {
            let effect = pendingKeyed.removeValue(forKey: key)!
            if let event = answer(effect) { apply(event) }
        }
    }

    /// Something the user or another part of the SDK does.
    mutating func userOrRequestEvent() -> SessionEvent {
        switch random.below(10) {
        case 0:
            return .discoveryRequested(
                random.chance(50)
                    ? .serverName("localhost") : .homeserverURL(SessionFixture.baseURL, serverName: "localhost"))
        case 1: return .passwordSubmitted(username: "alice", password: SessionFixture.password)
        case 2:
            return random.chance(50)
                ? .registrationRequested(username: "alice", password: SessionFixture.password)
                : .loginTokenSubmitted(SessionFixture.loginToken)
        case 3: return .cancelRequested
        case 4: return .restoreRequested(SessionFixture.account)
        case 5, 6: return .accessTokenRejected(softLogout: random.chance(90))
        case 7: return .refreshNeeded
        default: return random.chance(30) ? .signOutRequested : .refreshNeeded
        }
    }

    mutating func freshTokens(refresh: Bool = true) -> SessionTokens {
        nextToken += 1
        return SessionTokens(
            accessToken: Secret("at-\(nextToken)"), refreshToken: refresh ? Secret("rt-\(nextToken)") : nil,
            expiry: TokenExpiry(issuedAt: SessionFixture.issuedAt, lifetime: .seconds(300)))
    }

    /// The world's answer to an effect.
    mutating func answer(_ effect: SessionEffect) -> SessionEvent? {
        switch effect {
        case .loadStoredSession:
            return random.chance(10) ? .storeFailed(.store(.busy)) : .restored(stored)
        case .fetchWellKnown:
            return .wellKnownResponse(
                random.chance(80)
                    ? .success(random.chance(50) ? SessionFixture.baseURL : nil)
                    : .failure(.discoveryFailed(reason: "bad JSON")))
        case .fetchVersions:
            return .versionsResponse(
                random.chance(85)
                    ? .success(random.chance(90) ? SessionFixture.versions : SessionFixture.oldVersions)
                    : .failure(.unreachable(.timedOut)))
        case .sendLogin:
            switch random.below(10) {
            case 0: return .loginResponse(.failure(.invalidCredentials))
            case 1: return .loginResponse(.failure(.rateLimited(retryAfter: .seconds(1))))
            case 2:
                return .loginResponse(
                    .success(
                        SessionGrant(userID: SessionFixture.bob, deviceID: SessionFixture.device, tokens: freshTokens())
                    ))
            default:
                return .loginResponse(
                    .success(
                        SessionGrant(
                            userID: SessionFixture.alice, deviceID: SessionFixture.device,
                            tokens: freshTokens(refresh: random.chance(80)))))
            }
        case .sendRegister(let request):
            switch random.below(10) {
            case 0: return .registrationResponse(.failure(.userInUse))
            case 1: return .registrationResponse(.failure(.rateLimited(retryAfter: nil)))
            case 2, 3,
                4 where request.auth == nil:
                return .registrationResponse(.success(.authenticationRequired(SessionFixture.dummyChallenge)))
            default:
                return .registrationResponse(
                    .success(
                        .registered(
                            SessionGrant(
                                userID: SessionFixture.alice, deviceID: SessionFixture.device, tokens: freshTokens()))))
            }
        case .persistSession(let session):
            guard random.chance(90) else { return .storeFailed(.store(.full)) }
            stored = StoredSession(session: session)
            savedTokens.insert(session.tokens.accessToken.exposedValue)
            if let refresh = session.tokens.refreshToken { savedTokens.insert(refresh.exposedValue) }
            return .tokensPersisted
        case .sendRefresh:
            switch random.below(10) {
            case 0: return .refreshResponse(.failure(.unknownToken(softLogout: true)))
            case 1: return .refreshResponse(.failure(.unknownToken(softLogout: false)))
            case 2: return .refreshResponse(.failure(.unreachable(.cannotConnect)))
            case 3: return .refreshResponse(.failure(.rateLimited(retryAfter: .seconds(2))))
            default: return .refreshResponse(.success(freshTokens(refresh: random.chance(70))))
            }
        case .sendLogout:
            return .logoutResponse(random.chance(70) ? nil : .unreachable(.timedOut))
        case .wipeLocalData:
            guard random.chance(95) else { return .storeFailed(.store(.fileSystem)) }
            stored = nil
            return .localDataWiped
        case .keepLocalData:
            if var kept = stored {
                kept.isSoftLoggedOut = true
                stored = kept
            }
            return nil
        case .scheduleRefresh: return .refreshTimerFired
        case .scheduleRetry: return .retryTimerFired
        case .sendAuthorized(let call):
            switch random.below(4) {
            case 0 where call.passwordStage == nil:
                return .authorizationResponse(.success(.authenticationRequired(SessionFixture.passwordChallenge)))
            case 1: return .authorizationResponse(.failure(.unreachable(.timedOut)))
            default: return .authorizationResponse(.success(.completed(body: [])))
            }
        case .activate, .cancel, .finishAuthorization: return nil
        }
    }

    mutating func apply(_ event: SessionEvent) {
        let transition = machine.transition(from: state, on: event)
        if transition.isIgnored { return }
        for effect in transition.effects { record(effect, after: event) }
        state = transition.nextState(after: state)
        check(after: event)
    }

    mutating func record(_ effect: SessionEffect, after event: SessionEvent) {
        switch effect {
        case .sendRefresh(let request):
            if pendingKeyed[SessionKeys.refresh] != nil {
                violations.append("second refresh in flight after \(event.caseName)")
            }
            requireSaved(request.refreshToken, "sendRefresh", event)
        case .sendLogout(let request):
            requireSaved(request.accessToken, "sendLogout", event)
        case .activate(let session):
            requireSaved(session.tokens.accessToken, "activate", event)
        default:
            break
        }
        switch effect.directive {
        case .cancel(let key): pendingKeyed[key] = nil
        case .keyed(let key): pendingKeyed[key] = effect
        case .stateTimeout: pendingKeyed[.stateTimeout] = effect
        case .timer(let key, _): pendingKeyed[key] = effect
        case .perform:
            if case .activate = effect { return }
            pendingStore.append(effect)
        }
    }

    mutating func requireSaved(_ token: Secret<String>, _ use: String, _ event: SessionEvent) {
        if !savedTokens.contains(token.exposedValue) {
            violations.append("\(use) used an unsaved token after \(event.caseName) in \(state.caseName)")
        }
    }

    mutating func check(after event: SessionEvent) {
        visited.insert(state.caseName)
        switch state {
        case .signedIn(let session):
            if !savedTokens.contains(session.tokens.accessToken.exposedValue) {
                violations.append("signed in with unsaved tokens after \(event.caseName)")
            }
        case .refreshing(_, let waiting, let attempt):
            if waiting < 0 { violations.append("negative waiting count") }
            maxWaiting = max(maxWaiting, waiting)
            if !attempt.isWaitingToRetry && pendingKeyed[SessionKeys.refresh] == nil {
                violations.append("refreshing with no refresh in flight after \(event.caseName)")
            }
        default:
            break
        }
    }
}
