import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Connecting, negotiating, the microphone, reconnection after a dropped media path, a revoked
/// token, disconnecting. Each test is one scenario: state, event, whole next state, whole effect list.
@Suite("Media session machine")
struct MediaSessionMachineTests {
    typealias F = MediaFixture
    typealias Keys = MediaSessionMachine.Keys
    let machine = MediaFixture.machine

    @Test("Connecting creates a media-server session and arms the attempt's deadline")
    func connect() throws {
        let store = MachineTestStore(machine, initial: .idle(F.call()))
        try store.send(
            .connectRequested, expecting: .connecting(F.call(), .creatingSession),
            effects: [
                .createSession(serverURL: "http://127.0.0.1:8088/janus"), .startAttemptTimeout(after: .seconds(20)),
            ])
    }

    @Test("The session, the attach and the join follow one another; the stream and keep-alive start with the session")
    func connectingSteps() throws {
        let store = MachineTestStore(machine, initial: .connecting(F.call(), .creatingSession))
        try store.send(
            .sessionCreated(.success(F.session)), expecting: .connecting(F.call(), .attaching(session: F.session)),
            effects: [
                .attachPlugin(session: F.session, plugin: "janus.plugin.audiobridge"), .readEvents(session: F.session),
                .scheduleKeepalive(after: .seconds(25)),
            ])
        try store.send(
            .pluginAttached(.success(F.handle)), expecting: .connecting(F.call(), .joining(F.link)),
            effects: [.joinRoom(F.link, MediaRoomJoin(F.descriptor(), muted: true))])
        try store.send(
            .roomJoined(.success(7)), expecting: .negotiating(F.call(), F.link, .startingPeer),
            effects: [.startPeer(sending: false)])
    }

    @Test("Negotiation: peer, offer (muted while the microphone is off), answer, ICE connected → connected")
    func negotiation() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.call(failures: 2), F.link, .startingPeer))
        try store.send(
            .peerStarted(nil), expecting: .negotiating(F.call(failures: 2), F.link, .creatingOffer),
            effects: [.createOffer])
        try store.send(
            .offerCreated(.success(F.offer)), expecting: .negotiating(F.call(failures: 2), F.link, .awaitingAnswer),
            effects: [.sendOffer(F.link, F.offer, muted: true)])
        try store.send(
            .answerReceived(.success(F.answer)), expecting: .negotiating(F.call(failures: 2), F.link, .applyingAnswer),
            effects: [.applyAnswer(F.answer)])
        try store.send(.answerApplied(nil), expecting: .negotiating(F.call(failures: 2), F.link, .connectingMedia))
        try store.send(.iceStateChanged(.checking), stayingWith: [])
        try store.send(
            .iceStateChanged(.connected), expecting: .connected(F.call(), F.link), effects: [.cancel(Keys.attempt)])
    }

    @Test("Local candidates trickle to the server as they are found, and the end of gathering too")
    func trickle() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.call(), F.link, .awaitingAnswer))
        try store.send(.localCandidate(F.candidate), stayingWith: [.trickle(F.link, F.candidate)])
        try store.send(.localCandidatesGathered, stayingWith: [.trickleComplete(F.link)])
    }

    @Test(
        "Microphone off stops sending and tells the room muted; on resumes and unmutes (and, while the server hears nothing, expects it to)"
    )
    func microphone() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true), F.link))
        try store.send(
            .microphoneRequested(enabled: false), expecting: .connected(F.call(microphone: false), F.link),
            effects: [.setSending(false), .configureMuted(F.link, muted: true), .cancel(Keys.upstream)])
        try store.send(
            .microphoneRequested(enabled: true), expecting: .connected(F.call(microphone: true), F.link),
            effects: [
                .setSending(true), .configureMuted(F.link, muted: false), .startUpstreamTimeout(after: .seconds(3)),
            ])
        // Off and on again before the server noticed (it still says it hears the member): no wait.
        let heard = MachineTestStore(machine, initial: .connected(F.call(serverHears: true), F.link))
        try heard.send(
            .microphoneRequested(enabled: true),
            expecting: .connected(F.call(microphone: true, serverHears: true), F.link),
            effects: [.setSending(true), .configureMuted(F.link, muted: false)])
        try heard.send(
            .microphoneRequested(enabled: true),
            expecting: .connected(F.call(microphone: true, serverHears: true), F.link),
            effects: [.setSending(true), .configureMuted(F.link, muted: false)])
    }

    @Test(
        "The member's audio not reaching the server with the microphone on (the other direction of a cut path) waits the stall timeout, then reconnects"
    )
    func upstreamCutReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true), F.link))
        try store.send(
            .serverEvent(.audioReceiving(true)),
            expecting: .connected(F.call(microphone: true, serverHears: true), F.link),
            effects: [.cancel(Keys.upstream)])
        try store.send(
            .serverEvent(.audioReceiving(false)), expecting: .connected(F.call(microphone: true), F.link),
            effects: [.startUpstreamTimeout(after: .seconds(3))])
        try store.send(
            .timerFired(.upstream), expecting: .reconnecting(F.call(microphone: true, failures: 1), .mediaStalled),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        #expect(machine.event(firing: .startUpstreamTimeout(after: .seconds(3))) == .timerFired(.upstream))

        // Microphone off: the server hearing nothing is expected, not a cut.
        let muted = MachineTestStore(machine, initial: .connected(F.call(serverHears: true), F.link))
        try muted.send(.serverEvent(.audioReceiving(false)), expecting: .connected(F.call(), F.link), effects: [])

        // Connected with the microphone on: the server is to say it hears the member; a
        // reconnection forgets what the last connection's server said.
        let negotiating = MachineTestStore(
            machine, initial: .negotiating(F.call(microphone: true, failures: 1), F.link, .connectingMedia))
        try negotiating.send(
            .iceStateChanged(.connected), expecting: .connected(F.call(microphone: true), F.link),
            effects: [.cancel(Keys.attempt), .startUpstreamTimeout(after: .seconds(3))])
        let early = MachineTestStore(machine, initial: .negotiating(F.call(microphone: true), F.link, .connectingMedia))
        try early.send(
            .serverEvent(.audioReceiving(true)),
            expecting: .negotiating(F.call(microphone: true, serverHears: true), F.link, .connectingMedia))
        try early.send(
            .iceStateChanged(.connected), expecting: .connected(F.call(microphone: true, serverHears: true), F.link),
            effects: [.cancel(Keys.attempt)])
        let dropped = MachineTestStore(
            machine, initial: .connected(F.call(microphone: true, serverHears: true), F.link))
        try dropped.send(
            .iceStateChanged(.failed), expecting: .reconnecting(F.call(microphone: true, failures: 1), .iceFailed),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
    }

    @Test("A microphone turned on before the join joins unmuted and starts the peer sending")
    func microphoneBeforeJoin() throws {
        let store = MachineTestStore(machine, initial: .idle(F.call()))
        try store.send(.microphoneRequested(enabled: true), expecting: .idle(F.call(microphone: true)))
        store.reset(to: .connecting(F.call(microphone: true), .attaching(session: F.session)))
        try store.send(
            .pluginAttached(.success(F.handle)), expecting: .connecting(F.call(microphone: true), .joining(F.link)),
            effects: [.joinRoom(F.link, MediaRoomJoin(F.descriptor(), muted: false))])
        try store.send(
            .roomJoined(.success(7)), expecting: .negotiating(F.call(microphone: true), F.link, .startingPeer),
            effects: [.startPeer(sending: true)])
    }

    @Test("ICE failure while connected tears the connection down and reconnects after the backoff, same token")
    func iceFailureReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true), F.link))
        try store.send(
            .iceStateChanged(.failed), expecting: .reconnecting(F.call(microphone: true, failures: 1), .iceFailed),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        try store.send(
            .timerFired(.retry), expecting: .connecting(F.call(microphone: true, failures: 1), .creatingSession),
            effects: [
                .createSession(serverURL: "http://127.0.0.1:8088/janus"), .startAttemptTimeout(after: .seconds(20)),
            ])
    }

    @Test(
        "The room's audio away while connected (a cut path ICE does not notice) waits the stall timeout, then reconnects; back in time, nothing happens"
    )
    func stalledAudioReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true), F.link))
        try store.send(.incomingAudioChanged(flowing: false), stayingWith: [.startStallTimeout(after: .seconds(3))])
        try store.send(.incomingAudioChanged(flowing: true), stayingWith: [.cancel(Keys.stall)])
        try store.send(.incomingAudioChanged(flowing: false), stayingWith: [.startStallTimeout(after: .seconds(3))])
        try store.send(
            .timerFired(.stall), expecting: .reconnecting(F.call(microphone: true, failures: 1), .mediaStalled),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        // A late stall timer, or audio news from the peer being torn down, changes nothing.
        try store.send(.timerFired(.stall), stayingWith: [])
        try store.assertIgnored(.incomingAudioChanged(flowing: false))
        #expect(machine.event(firing: .startStallTimeout(after: .seconds(3))) == .timerFired(.stall))

        // While negotiating the audio is not watched yet.
        let negotiating = MachineTestStore(machine, initial: .negotiating(F.call(), F.link, .connectingMedia))
        try negotiating.assertIgnored(.incomingAudioChanged(flowing: false))
        try negotiating.send(.timerFired(.stall), stayingWith: [])
    }

    @Test("A lost session (the server restarted), a hang-up or a failed event stream reconnect with a doubling backoff")
    func serverLossReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(failures: 0), F.link))
        try store.send(
            .eventsFailed(.transport(.unreachable)),
            expecting: .reconnecting(F.call(failures: 1), .transport(.unreachable)),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        store.reset(to: .connecting(F.call(failures: 1), .creatingSession))
        try store.send(
            .sessionCreated(.failure(.transport(.unreachable))),
            expecting: .reconnecting(F.call(failures: 2), .transport(.unreachable)),
            effects: [.cancel(Keys.request), .cancel(Keys.attempt), .scheduleRetry(after: .seconds(2))])
        store.reset(to: .negotiating(F.call(failures: 0), F.link, .connectingMedia))
        try store.send(
            .serverEvent(.hangup), expecting: .reconnecting(F.call(failures: 1), .sessionLost),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        store.reset(to: .connected(F.call(), F.link))
        try store.send(
            .keepaliveAnswered(.sessionLost), expecting: .reconnecting(F.call(failures: 1), .sessionLost),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
    }

    @Test("One failed attempt too many fails the session")
    func tooManyAttempts() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.exhausted, F.link, .connectingMedia))
        try store.send(.timerFired(.attempt), expecting: .failed(.timedOut), effects: F.teardown)
    }

    @Test("A refused token (revoked by a demotion) closes the session as revoked, never retries")
    func revoked() throws {
        let store = MachineTestStore(machine, initial: .connecting(F.call(failures: 1), .joining(F.link)))
        try store.send(.roomJoined(.failure(.unauthorized)), expecting: .closed(.revoked), effects: F.teardown)
        store.reset(to: .connected(F.call(), F.link))
        try store.send(.serverEvent(.removed), expecting: .closed(.revoked), effects: F.teardown)
    }

    @Test("An engine that cannot start fails at once: never a pretended session")
    func engineFailure() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.call(), F.link, .startingPeer))
        try store.send(
            .peerStarted(.engine(.missingComponent(.captureDevice))),
            expecting: .failed(.engine(.missingComponent(.captureDevice))),
            effects: F.teardown)
    }

    @Test("Disconnecting hangs up and cancels everything of the connection; while reconnecting it cancels the retry")
    func disconnect() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(), F.link))
        try store.send(.disconnectRequested, expecting: .closed(.requested), effects: F.teardown)
        try store.assertIgnored([.disconnectRequested, .connectRequested, .timerFired(.retry)])
        store.reset(to: .reconnecting(F.call(failures: 1), .iceFailed))
        try store.send(.disconnectRequested, expecting: .closed(.requested), effects: [.cancel(Keys.retry)])
    }

    @Test("A renewed descriptor is kept for the next join; the connection in use goes on")
    func renewedToken() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(), F.link))
        try store.send(
            .descriptorUpdated(F.descriptor("media-token-2")),
            expecting: .connected(F.call(token: "media-token-2"), F.link))
        store.reset(to: .reconnecting(F.call(failures: 1, token: "media-token-2"), .iceFailed))
        try store.send(
            .timerFired(.retry), expecting: .connecting(F.call(failures: 1, token: "media-token-2"), .creatingSession),
            effects: [
                .createSession(serverURL: "http://127.0.0.1:8088/janus"), .startAttemptTimeout(after: .seconds(20)),
            ])
    }

    @Test("Keep-alives repeat while the session exists; a late answer of another step changes nothing")
    func keepaliveAndLateAnswers() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(), F.link))
        try store.send(
            .timerFired(.keepalive),
            stayingWith: [.sendKeepalive(session: F.session), .scheduleKeepalive(after: .seconds(25))])
        try store.assertIgnored([
            .sessionCreated(.success(9)), .roomJoined(.success(7)), .offerCreated(.success(F.offer)),
        ])
        store.reset(to: .connecting(F.call(), .joining(F.link)))
        try store.send(.sessionCreated(.success(9)), stayingWith: [])
    }

    @Test("The token never shows in a description of the events and effects that carry it")
    func redaction() {
        let join = MediaSessionMachine.Effect.joinRoom(
            F.link, MediaRoomJoin(F.descriptor("canary-media-token"), muted: true))
        let event = MediaSessionMachine.Event.descriptorUpdated(F.descriptor("canary-media-token"))
        #expect(!String(describing: join).contains("canary"))
        #expect(!String(describing: event).contains("canary"))
        #expect(!String(reflecting: MediaRoomJoin(F.descriptor("canary-media-token"), muted: true)).contains("canary"))
    }
}
