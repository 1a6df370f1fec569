import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMeetings
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

/// Stage media against the real Synapse, the reference services and Janus, over GStreamer's
/// webrtcbin: two stage members, a 440 Hz tone from one detected in the other's decoded mix,
/// the microphone turned off and on, reconnection after the media server dropped the session,
/// a demoted member's session closing, and no token in a log or a trace.
@Suite(
    "Meeting media over webrtcbin and Janus", .serialized,
    .requires(DevJanus.isAvailable, "needs Scripts/dev-server start --test (with Janus)"))
struct MeetingMediaIntegrationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    func engine(tone: Int, tracer: Tracer) -> GStreamerMediaEngine {
        GStreamerMediaEngine(
            transport: transport, source: .testTone(frequency: tone), output: .meterOnly, tracer: tracer)
    }

    /// Two members of a new room, both on stage (the dev stage holds 2), with tone engines.
    func stagePair(_ prefix: String, tracer: Tracer = Tracer()) async throws -> (
        alice: MeetingMember, bob: MeetingMember, aliceRoom: MeetingRoom, bobRoom: MeetingRoom
    ) {
        let alice = try await MeetingMember.register(
            "\(prefix)-a", in: environment, transport: transport, tracer: tracer,
            engine: engine(tone: 440, tracer: tracer))
        let bob = try await MeetingMember.register(
            "\(prefix)-b", in: environment, transport: transport, tracer: tracer,
            engine: engine(tone: 660, tracer: tracer))
        let roomID = try await alice.createRoom()
        try await bob.joinRoom(roomID)
        let aliceRoom = try await alice.meetings.join(roomID: roomID)
        let bobRoom = try await bob.meetings.join(roomID: roomID)
        #expect(aliceRoom.role.value.kind == .stage && bobRoom.role.value.kind == .stage)
        return (alice, bob, aliceRoom, bobRoom)
    }

    @Test(
        "A's 440 Hz tone is in B's decoded mix and B's level rises; A's microphone off → silence within a second; on → back"
    )
    func toneCrossesTheRoom() async throws {
        let (_, _, aliceRoom, bobRoom) = try await stagePair("md-tone")
        let alice = try #require(aliceRoom.stageSession as? JanusMediaSession)
        let bob = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await alice.connect()
        try await bob.connect()
        #expect(alice.state.value.caseName == "connected" && bob.state.value.caseName == "connected")

        let detector = ToneDetector(frequency: 440)
        let stop = bob.audioMeter.listenToIncomingSamples { samples, rate in detector.take(samples, rate: rate) }
        defer { stop() }
        // Bob hears the room but not a tone while nobody sends one (both microphones start off).
        // The barrier is Bob's own decoded mix: six 100 ms blocks of it analysed, not six
        // hundred milliseconds slept, so the check runs on audio that did arrive.
        try await waitUntil(timeout: .seconds(10), "Bob decodes 600 ms of the room's mix") {
            detector.shares.count >= 6
        }
        #expect(detector.shares.allSatisfy { $0 <= 0.5 }, "a tone before anyone sent one: \(detector.shares)")

        try await alice.setMicrophoneEnabled(true)
        try await waitUntil(timeout: .seconds(10), "Bob hears Alice's 440 Hz") { detector.hears() }
        try await bob.audioLevels.wait(timeout: .seconds(5), until: { $0.incoming.isSpeaking })
        #expect(alice.audioLevels.value.outgoing.isSpeaking)

        // Off: Bob's received level falls to silence within a second.
        let muted = ContinuousClock.now
        try await alice.setMicrophoneEnabled(false)
        try await bob.audioLevels.wait(timeout: .seconds(1), until: { !$0.incoming.isSpeaking })
        let silentAfter = ContinuousClock.now - muted
        #expect(silentAfter < .seconds(1))
        // Her own meter says so too, within the same second (its 100 ms windows can trail the
        // valve that already stopped her packets).
        try await alice.audioLevels.wait(
            timeout: .seconds(1) - (ContinuousClock.now - muted), until: { !$0.outgoing.isSpeaking })

        // On again: the tone is back.
        let before = detector.shares.count
        try await alice.setMicrophoneEnabled(true)
        try await waitUntil(timeout: .seconds(5), "the tone is back") {
            detector.shares.count > before + 3 && detector.hears()
        }
        try await bob.audioLevels.wait(timeout: .seconds(5), until: { $0.incoming.isSpeaking })

        await alice.disconnect()
        await bob.disconnect()
        #expect(alice.state.value == .closed(.requested))
        try await aliceRoom.leave()
        try await bobRoom.leave()
    }
}

extension MeetingMediaIntegrationTests {
    @Test(
        "The media server drops Alice's session (as a restart does): the services join her again as the same participant and she is heard again"
    )
    func reconnectsAfterTheSessionIsLost() async throws {
        let (_, _, aliceRoom, bobRoom) = try await stagePair("md-drop")
        let alice = try #require(aliceRoom.stageSession as? JanusMediaSession)
        let bob = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await alice.connect()
        try await bob.connect()
        try await alice.setMicrophoneEnabled(true)
        let detector = ToneDetector(frequency: 440)
        let stop = bob.audioMeter.listenToIncomingSamples { samples, rate in detector.take(samples, rate: rate) }
        defer { stop() }
        try await waitUntil(timeout: .seconds(10), "Bob hears Alice") { detector.hears() }

        // Cut Alice's media path at the server: her Janus session is destroyed under her.
        guard case .connected(_, let link) = alice.state.value else { throw IntegrationFailure("Alice not connected") }
        try await JanusProbe(transport: transport).destroy(session: link.session, at: link.serverURL)
        // The next keep-alive (every 10 s) or poll finds the session gone.
        try await alice.state.wait(timeout: .seconds(25), until: { $0.caseName == "reconnecting" })
        let back = try await alice.state.wait(timeout: .seconds(30), until: { $0.caseName == "connected" })
        guard case .connected(let call, let fresh) = back else { throw IntegrationFailure("not connected") }
        #expect(fresh.session != link.session)
        #expect(call.microphoneEnabled)
        #expect(fresh.participantID == link.participantID)  // no new admission

        let before = detector.shares.count
        try await waitUntil(timeout: .seconds(10), "Bob hears Alice again") {
            detector.shares.count > before + 3 && detector.hears()
        }
        await alice.disconnect()
        await bob.disconnect()
        try await aliceRoom.leave()
        try await bobRoom.leave()
    }

    @Test(
        "A demoted member's session closes and they listen to a playing stream; the promoted listener is heard on stage"
    )
    func demotionAndPromotion() async throws {
        let tracer = Tracer()
        let (alice, _, aliceRoom, bobRoom) = try await stagePair("md-role", tracer: tracer)
        let carol = try await MeetingMember.register(
            "md-role-c", in: environment, transport: transport, tracer: tracer,
            engine: engine(tone: 550, tracer: tracer))
        try await carol.joinRoom(aliceRoom.roomID)
        let carolRoom = try await carol.meetings.join(roomID: aliceRoom.roomID)
        #expect(carolRoom.role.value.kind == .listener)
        let aliceSession = try #require(aliceRoom.stageSession as? JanusMediaSession)
        let bobSession = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await aliceSession.connect()
        try await bobSession.connect()

        // The host demotes Bob: his media session closes, he listens, and the stream plays.
        try await aliceRoom.demote(try #require(bobRoom.member as UserID?))
        try await bobSession.state.wait(timeout: .seconds(15), until: { $0.isFinal })
        #expect(bobSession.state.value == .closed(.requested) || bobSession.state.value == .closed(.revoked))
        try await bobRoom.role.wait(timeout: .seconds(15), until: { $0.kind == .listener })
        let playback = try #require(bobRoom.playbackStream)
        playback.play()
        try await playback.liveLatency.wait(timeout: .seconds(20), until: { $0 != nil })
        try await playback.state.wait(timeout: .seconds(10), for: .playing)

        // Promoted, Carol connects, turns her microphone on, and Alice hears her 550 Hz.
        try await aliceRoom.promote(carol.userID)
        try await carolRoom.role.wait(timeout: .seconds(15), until: { $0.kind == .stage })
        let carolSession = try #require(carolRoom.stageSession as? JanusMediaSession)
        try await carolSession.connect()
        try await carolSession.setMicrophoneEnabled(true)
        let detector = ToneDetector(frequency: 550)
        let stop = aliceSession.audioMeter.listenToIncomingSamples { samples, rate in
            detector.take(samples, rate: rate)
        }
        defer { stop() }
        try await waitUntil(timeout: .seconds(10), "Alice hears Carol") { detector.hears() }
        _ = alice
        await carolSession.disconnect()
        await aliceSession.disconnect()
        try await aliceRoom.end()
    }

    @Test("No media token reaches a log or a trace while sessions connect, reconnect and close")
    func noTokenInLogsOrTraces() async throws {
        let shared = SharedLogCapture()
        defer { shared.finish() }
        let recorder = ObservableTraceRecorder()
        let tracer = Tracer()
        _ = tracer.addSink(recorder)
        let (_, _, aliceRoom, bobRoom) = try await stagePair("md-canary", tracer: tracer)
        let alice = try #require(aliceRoom.stageSession as? JanusMediaSession)
        let bob = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await alice.connect()
        try await bob.connect()
        let tokens = try ServicesDatabase.mediaTokens(aliceRoom.meetingID)
        #expect(tokens.count == 2)
        try await alice.setMicrophoneEnabled(true)
        try await alice.setMicrophoneEnabled(false)
        await alice.disconnect()
        await bob.disconnect()
        try await aliceRoom.leave()
        try await bobRoom.leave()

        let logs = shared.text
        let traces = recorder.records.map(\.description).joined(separator: "\n")
        #expect(traces.contains("MediaSession["), "no media-session records in the trace")
        #expect(traces.contains("requestJoin"))
        for token in tokens {
            #expect(!logs.contains(token), "a media token in the log")
            #expect(!traces.contains(token), "a media token in the trace")
        }
    }
}

extension MeetingMediaIntegrationTests {
    @Test("A listener's GStreamer player decodes the HLS mix: the stage member's 440 Hz is in it and its level rises")
    func listenerPlayerHearsTheStage() async throws {
        let tracer = Tracer()
        let (_, _, aliceRoom, bobRoom) = try await stagePair("md-play", tracer: tracer)
        let carol = try await MeetingMember.register("md-play-c", in: environment, transport: transport, tracer: tracer)
        try await carol.joinRoom(aliceRoom.roomID)
        let carolRoom = try await carol.meetings.join(roomID: aliceRoom.roomID)
        let playback = try #require(carolRoom.playbackStream)
        let alice = try #require(aliceRoom.stageSession as? JanusMediaSession)
        try await alice.connect()
        try await alice.setMicrophoneEnabled(true)

        playback.play()
        let player = GStreamerPlaybackPlayer(stream: playback, output: .meterOnly)
        let detector = ToneDetector(frequency: 440)
        let stop = player.audioMeter.listenToIncomingSamples { samples, rate in detector.take(samples, rate: rate) }
        defer { stop() }
        try await player.start()
        try await waitUntil(timeout: .seconds(20), "Carol's player decodes Alice's 440 Hz") { detector.hears() }
        try await player.levels.wait(timeout: .seconds(5), until: { $0.incoming.isSpeaking })
        await player.stop()
        await alice.disconnect()
        _ = bobRoom
        try await aliceRoom.end()
    }
}

extension MeetingMediaIntegrationTests {
    @Test("Signing out (the account's scope ends) closes a connected stage session")
    func signOutClosesTheSession() async throws {
        let (alice, _, aliceRoom, bobRoom) = try await stagePair("md-out")
        let session = try #require(aliceRoom.stageSession as? JanusMediaSession)
        try await session.connect()
        alice.scope.end(reason: .signedOut)
        try await session.state.wait(timeout: .seconds(10), until: { $0 == .closed(.requested) })
        try await bobRoom.leave()
    }
}

/// Two stage members connected, Alice sending her 440 Hz and Bob hearing it: where the
/// reconnection tests start.
struct HeardStage {
    let aliceRoom: MeetingRoom
    let bobRoom: MeetingRoom
    let alice: JanusMediaSession
    let bob: JanusMediaSession
    let heard: ToneDetector
    let aliceLink: MediaServerLink
    let bobLink: MediaServerLink
    let stopListening: @Sendable () -> Void

    /// Waits until `session` is connected on a media-server session other than `link`'s, and
    /// checks it is the same participant (no new admission).
    @discardableResult
    func reconnected(_ session: JanusMediaSession, from link: MediaServerLink, within timeout: Duration = .seconds(45))
        async throws -> MediaCall
    {
        let back = try await session.state.wait(
            timeout: timeout,
            until: {
                if case .connected(_, let fresh) = $0 { return fresh.session != link.session }
                return false
            })
        guard case .connected(let call, let fresh) = back else { throw IntegrationFailure("not connected") }
        #expect(fresh.participantID == link.participantID, "admitted again")
        return call
    }

    func bobHearsAliceAgain() async throws {
        let before = heard.shares.count
        try await waitUntil(timeout: .seconds(10), "Bob hears Alice again") {
            heard.shares.count > before + 3 && heard.hears()
        }
    }

    func close() async throws {
        stopListening()
        await alice.disconnect()
        await bob.disconnect()
        try await aliceRoom.end()
    }
}

extension MeetingMediaIntegrationTests {
    func heardStage(_ prefix: String) async throws -> HeardStage {
        let (_, _, aliceRoom, bobRoom) = try await stagePair(prefix)
        let alice = try #require(aliceRoom.stageSession as? JanusMediaSession)
        let bob = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await alice.connect()
        try await bob.connect()
        try await alice.setMicrophoneEnabled(true)
        let heard = ToneDetector(frequency: 440)
        let stop = bob.audioMeter.listenToIncomingSamples { samples, rate in heard.take(samples, rate: rate) }
        try await waitUntil(timeout: .seconds(10), "Bob hears Alice") { heard.hears() }
        guard case .connected(_, let aliceLink) = alice.state.value,
            case .connected(_, let bobLink) = bob.state.value
        else { throw IntegrationFailure("not connected") }
        return HeardStage(
            aliceRoom: aliceRoom, bobRoom: bobRoom, alice: alice, bob: bob, heard: heard, aliceLink: aliceLink,
            bobLink: bobLink, stopListening: stop)
    }

    @Test(
        "Janus restarts under a meeting: both stage sessions reconnect with their tokens, Bob hears Alice again, the listener's player goes on"
    )
    func reconnectsAfterJanusRestarts() async throws {
        let stage = try await heardStage("md-restart")
        let carol = try await MeetingMember.register("md-restart-c", in: environment, transport: transport)
        try await carol.joinRoom(stage.aliceRoom.roomID)
        let carolRoom = try await carol.meetings.join(roomID: stage.aliceRoom.roomID)
        let playback = try #require(carolRoom.playbackStream)
        playback.play()
        let player = GStreamerPlaybackPlayer(stream: playback, output: .meterOnly)
        let played = ToneDetector(frequency: 440)
        let stopPlayer = player.audioMeter.listenToIncomingSamples { samples, rate in played.take(samples, rate: rate) }
        defer { stopPlayer() }
        try await player.start()
        try await waitUntil(timeout: .seconds(20), "Carol's player decodes Alice") { played.hears() }
        let meetingRole = stage.aliceRoom.role.value.kind

        // Janus goes away with every session and room, and comes back empty on the same port.
        try await DevJanus.restart()

        try await stage.reconnected(stage.alice, from: stage.aliceLink, within: .seconds(40))
        try await stage.reconnected(stage.bob, from: stage.bobLink, within: .seconds(40))
        #expect(stage.aliceRoom.role.value.kind == meetingRole)  // still on stage: no new admission
        try await stage.bobHearsAliceAgain()
        // The services put the room and its forwarder back: the same playlist carries the new mix.
        let playedBefore = played.shares.count
        try await waitUntil(timeout: .seconds(20), "Carol's player decodes Alice again") {
            played.shares.count > playedBefore + 3 && played.hears()
        }
        await player.stop()
        try await stage.close()
    }

    @Test(
        "The media path is cut (UDP to and from Janus blocked on loopback): both sessions notice the room's audio is gone, reconnect once it is back, Bob hears Alice again"
    )
    func reconnectsAfterTheNetworkCutsTheMediaPath() async throws {
        #expect(try LoopbackUDPBlock.janusUsesTheBlockedPorts(), "the dev Janus's RTP ports are not the blocked range")
        let stage = try await heardStage("md-cut")
        // ICE never says so (it stays "connected" with no packet getting through); the room's
        // audio that stops arriving is what tells.
        let noticedAfter = try await LoopbackUDPBlock.during(bothWays: true) {
            let cut = ContinuousClock.now
            for session in [stage.alice, stage.bob] {
                let dropped = try await session.state.wait(
                    timeout: .seconds(15), until: { $0.caseName == "reconnecting" })
                #expect(dropped == .reconnecting(dropped.call!, .mediaStalled))
            }
            return ContinuousClock.now - cut
        }
        #expect(noticedAfter < .seconds(8), "the cut was noticed after \(noticedAfter)")
        #expect(try await stage.reconnected(stage.alice, from: stage.aliceLink).microphoneEnabled)
        #expect(try await !stage.reconnected(stage.bob, from: stage.bobLink).microphoneEnabled)
        try await stage.bobHearsAliceAgain()
        try await stage.close()
    }

    @Test(
        "Only the packets to Janus are lost: Alice, sending, reconnects once Janus says her audio stopped reaching it; Bob, listening, stays connected"
    )
    func reconnectsWhenTheServerStopsHearingTheMicrophone() async throws {
        #expect(try LoopbackUDPBlock.janusUsesTheBlockedPorts(), "the dev Janus's RTP ports are not the blocked range")
        let stage = try await heardStage("md-up")
        // The room's mix still reaches both; Janus notices Alice's audio is gone (its media event).
        let (dropped, noticedAfter) = try await LoopbackUDPBlock.during(bothWays: false) {
            let cut = ContinuousClock.now
            let dropped = try await stage.alice.state.wait(
                timeout: .seconds(15), until: { $0.caseName == "reconnecting" })
            return (dropped, ContinuousClock.now - cut)
        }
        #expect(dropped == .reconnecting(dropped.call!, .mediaStalled))
        #expect(noticedAfter < .seconds(10), "the cut was noticed after \(noticedAfter)")
        let bobState = stage.bob.state.value
        #expect(bobState == .connected(bobState.call!, stage.bobLink), "Bob's session did not stay")
        try await stage.reconnected(stage.alice, from: stage.aliceLink)
        try await stage.bobHearsAliceAgain()
        try await stage.close()
    }
}
