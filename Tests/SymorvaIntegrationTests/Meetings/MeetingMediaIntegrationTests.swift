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
        try await Task.sleep(for: .milliseconds(600))
        #expect(!detector.hears())

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
        #expect(!alice.audioLevels.value.outgoing.isSpeaking)

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
