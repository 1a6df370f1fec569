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

    @Test("Connecting asks the services to join the member and arms the attempt's deadline")
    func connect() throws {
        let store = MachineTestStore(machine, initial: .idle(F.call(connection: 0)))
        try store.send(
            .connectRequested, expecting: .connecting(F.call()),
            effects: [.requestJoin, .startAttemptTimeout(after: .seconds(20))])
    }

    @Test("The services' join hands over the link: the stream and keep-alive start on it with the peer")
    func connectingSteps() throws {
        let store = MachineTestStore(machine, initial: .connecting(F.call()))
        try store.send(
            .roomJoined(.success(F.link)), expecting: .negotiating(F.call(), F.link, .startingPeer),
            effects: [.readEvents(F.link), .scheduleKeepalive(after: .seconds(25)), .startPeer(sending: false)])
    }

    @Test(
        "Negotiation: peer, offer (muted while the microphone is off) under the connection's transaction, its answer from the stream, ICE connected → connected"
    )
    func negotiation() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.call(failures: 2), F.link, .startingPeer))
        try store.send(
            .peerStarted(nil), expecting: .negotiating(F.call(failures: 2), F.link, .creatingOffer),
            effects: [.createOffer])
        try store.send(
            .offerCreated(.success(F.offer)), expecting: .negotiating(F.call(failures: 2), F.link, .awaitingAnswer),
            effects: [.sendOffer(F.link, F.offer, muted: true, transaction: "offer-1")])
        // A reply to another request (a mute change, an earlier connection's offer) is not the answer.
        try store.send(.serverReplied(transaction: "offer-0", .description(F.answer)), stayingWith: [])
        try store.send(
            .serverReplied(transaction: "offer-1", .description(F.answer)),
            expecting: .negotiating(F.call(failures: 2), F.link, .applyingAnswer), effects: [.applyAnswer(F.answer)])
        try store.send(.answerApplied(nil), expecting: .negotiating(F.call(failures: 2), F.link, .connectingMedia))
        try store.send(.iceStateChanged(.checking), stayingWith: [])
        try store.send(
            .iceStateChanged(.connected), expecting: .connected(F.call(), F.link),
            effects: [.cancel(Keys.attempt), .scheduleAudioCheck(after: .seconds(1))])
    }

    @Test("The room refusing the offer, or the offer not reaching it, drops the connection like any failed step")
    func offerRefused() throws {
        let store = MachineTestStore(machine, initial: .negotiating(F.call(), F.link, .awaitingAnswer))
        try store.send(
            .serverReplied(transaction: "offer-1", .failed(.transport(.timeout))),
            expecting: .reconnecting(F.call(failures: 1), .transport(.timeout)),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        store.reset(to: .negotiating(F.call(), F.link, .awaitingAnswer))
        try store.send(
            .serverReplied(transaction: "offer-1", .accepted), expecting: .failed(.invalidResponse), effects: F.teardown
        )
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
            effects: [
                .cancel(Keys.attempt), .scheduleAudioCheck(after: .seconds(1)),
                .startUpstreamTimeout(after: .seconds(3)),
            ])
        let early = MachineTestStore(machine, initial: .negotiating(F.call(microphone: true), F.link, .connectingMedia))
        try early.send(
            .serverEvent(.audioReceiving(true)),
            expecting: .negotiating(F.call(microphone: true, serverHears: true), F.link, .connectingMedia))
        try early.send(
            .iceStateChanged(.connected), expecting: .connected(F.call(microphone: true, serverHears: true), F.link),
            effects: [.cancel(Keys.attempt), .scheduleAudioCheck(after: .seconds(1))])
        let dropped = MachineTestStore(
            machine, initial: .connected(F.call(microphone: true, serverHears: true), F.link))
        try dropped.send(
            .iceStateChanged(.failed), expecting: .reconnecting(F.call(microphone: true, failures: 1), .iceFailed),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
    }

    @Test("A microphone turned on before the join starts the peer sending and offers unmuted")
    func microphoneBeforeJoin() throws {
        let store = MachineTestStore(machine, initial: .idle(F.call()))
        try store.send(.microphoneRequested(enabled: true), expecting: .idle(F.call(microphone: true)))
        store.reset(to: .connecting(F.call()))
        try store.send(.microphoneRequested(enabled: true), expecting: .connecting(F.call(microphone: true)))
        try store.send(
            .roomJoined(.success(F.link)), expecting: .negotiating(F.call(microphone: true), F.link, .startingPeer),
            effects: [.readEvents(F.link), .scheduleKeepalive(after: .seconds(25)), .startPeer(sending: true)])
        store.reset(to: .negotiating(F.call(microphone: true), F.link, .creatingOffer))
        try store.send(
            .offerCreated(.success(F.offer)),
            expecting: .negotiating(F.call(microphone: true), F.link, .awaitingAnswer),
            effects: [.sendOffer(F.link, F.offer, muted: false, transaction: "offer-1")])
    }

    @Test(
        "ICE failure while connected tears the connection down and reconnects after the backoff: the services join the member again, a new connection"
    )
    func iceFailureReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true, audio: true), F.link))
        try store.send(
            .iceStateChanged(.failed), expecting: .reconnecting(F.call(microphone: true, failures: 1), .iceFailed),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        try store.send(
            .timerFired(.retry), expecting: .connecting(F.call(microphone: true, failures: 1, connection: 2)),
            effects: [.requestJoin, .startAttemptTimeout(after: .seconds(20))])
    }

    @Test(
        "The room's audio away while connected (a cut path ICE does not notice) waits the stall timeout, then reconnects; back in time, nothing happens"
    )
    func stalledAudioReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(microphone: true), F.link))
        // Looked at while it arrives; waited for (never looked for) while it does not.
        try store.send(.timerFired(.audioCheck), stayingWith: [.checkIncomingAudio])
        try store.send(
            .incomingAudioChecked(arrived: true), expecting: .connected(F.call(microphone: true, audio: true), F.link),
            effects: [.cancel(Keys.stall), .scheduleAudioCheck(after: .seconds(1))])
        try store.send(.incomingAudioChecked(arrived: true), stayingWith: [.scheduleAudioCheck(after: .seconds(1))])
        try store.send(
            .incomingAudioChecked(arrived: false), expecting: .connected(F.call(microphone: true), F.link),
            effects: [.startStallTimeout(after: .seconds(3)), .awaitIncomingAudio])
        try store.send(
            .incomingAudioChecked(arrived: true), expecting: .connected(F.call(microphone: true, audio: true), F.link),
            effects: [.cancel(Keys.stall), .scheduleAudioCheck(after: .seconds(1))])
        try store.send(
            .incomingAudioChecked(arrived: false), expecting: .connected(F.call(microphone: true), F.link),
            effects: [.startStallTimeout(after: .seconds(3)), .awaitIncomingAudio])
        try store.send(
            .timerFired(.stall), expecting: .reconnecting(F.call(microphone: true, failures: 1), .mediaStalled),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        // A late stall or audio timer, or audio news from the peer being torn down, changes nothing.
        try store.send(.timerFired(.stall), stayingWith: [])
        try store.send(.timerFired(.audioCheck), stayingWith: [])
        try store.assertIgnored(.incomingAudioChecked(arrived: false))
        #expect(machine.event(firing: .startStallTimeout(after: .seconds(3))) == .timerFired(.stall))
        #expect(machine.event(firing: .scheduleAudioCheck(after: .seconds(1))) == .timerFired(.audioCheck))

        // Audio that never came starts no stall timer: it is waited for.
        let silent = MachineTestStore(machine, initial: .connected(F.call(), F.link))
        try silent.send(.incomingAudioChecked(arrived: false), stayingWith: [.awaitIncomingAudio])

        // While negotiating the audio is not watched yet.
        let negotiating = MachineTestStore(machine, initial: .negotiating(F.call(), F.link, .connectingMedia))
        try negotiating.assertIgnored(.incomingAudioChecked(arrived: false))
        try negotiating.send(.timerFired(.stall), stayingWith: [])
    }

    @Test("A lost session (the server restarted), a hang-up or a failed event stream reconnect with a doubling backoff")
    func serverLossReconnects() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(failures: 0), F.link))
        try store.send(
            .eventsFailed(.transport(.unreachable)),
            expecting: .reconnecting(F.call(failures: 1), .transport(.unreachable)),
            effects: F.teardown + [.scheduleRetry(after: .seconds(1))])
        store.reset(to: .connecting(F.call(failures: 1)))
        try store.send(
            .roomJoined(.failure(.transport(.unreachable))),
            expecting: .reconnecting(F.call(failures: 2), .transport(.unreachable)),
            effects: F.joinTeardown + [.scheduleRetry(after: .seconds(2))])
        // The media room not there for now (Janus restarted; the services put it back): again later.
        store.reset(to: .connecting(F.call(failures: 1)))
        try store.send(
            .roomJoined(.failure(.roomUnavailable)), expecting: .reconnecting(F.call(failures: 2), .roomUnavailable),
            effects: F.joinTeardown + [.scheduleRetry(after: .seconds(2))])
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

    @Test("The services refusing the join (off stage) or the room kicking the member closes as revoked, never retries")
    func revoked() throws {
        let store = MachineTestStore(machine, initial: .connecting(F.call(failures: 1)))
        try store.send(.roomJoined(.failure(.unauthorized)), expecting: .closed(.revoked), effects: F.joinTeardown)
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

    @Test("The account's scope moving on disconnects the session (a child of the meeting in that scope)")
    func scopeEnd() throws {
        #expect(machine.event(scopeMovedOn: .signedOut) == .disconnectRequested)
        #expect(machine.event(scopeMovedOn: .cacheCleared) == .disconnectRequested)
        let store = MachineTestStore(machine, initial: .connecting(F.call()))
        try store.send(.disconnectRequested, expecting: .closed(.requested), effects: F.joinTeardown)
    }

    @Test("Keep-alives repeat while the session exists; a late answer of another step changes nothing")
    func keepaliveAndLateAnswers() throws {
        let store = MachineTestStore(machine, initial: .connected(F.call(), F.link))
        try store.send(
            .timerFired(.keepalive), stayingWith: [.sendKeepalive(F.link), .scheduleKeepalive(after: .seconds(25))])
        try store.assertIgnored([.roomJoined(.success(F.link)), .offerCreated(.success(F.offer))])
        try store.send(.serverReplied(transaction: "mute", .accepted), stayingWith: [])
        store.reset(to: .connecting(F.call()))
        try store.send(.timerFired(.keepalive), stayingWith: [])
        try store.assertIgnored([.serverEvent(.hangup), .keepaliveAnswered(.sessionLost)])
    }
}
