import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

/// Meetings against the real Synapse, the reference services and Janus: admission with a stage
/// capacity of 2 (the dev manifest's), stage members the services join to the media room, the listener's live playback
/// stream, hands, promotion rights, demotion revoking the token at Janus, leaving, ending, and
/// the feed resuming from its cursor after a relay drop.
@Suite(
    "Meetings against the reference server and Janus", .serialized,
    .requires(DevJanus.isAvailable, "needs Scripts/dev-server start --test (with Janus)"))
struct MeetingIntegrationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    @Test("Stage, listener, hands, promotion, demotion, leaving and ending, with Janus and the live stream")
    func wholeMeeting() async throws {
        let proxy = try FaultProxy(inFrontOf: environment.servicesURL)
        let host = try await MeetingMember.register("mt-host", in: environment, transport: transport)
        let bob = try await MeetingMember.register(
            "mt-bob", in: environment, transport: transport, servicesURL: URL(string: proxy.url)!)
        let carol = try await MeetingMember.register("mt-carol", in: environment, transport: transport)
        let roomID = try await host.createRoom()
        try await bob.joinRoom(roomID)
        try await carol.joinRoom(roomID)
        // Capacity 2: the host and Bob are on stage, each joined to the media room by the services.
        let hostRoom = try await host.meetings.join(roomID: roomID)
        let bobRoom = try await bob.meetings.join(roomID: roomID)
        let carolRoom = try await carol.meetings.join(roomID: roomID)
        #expect(hostRoom.role.value.kind == .stage && bobRoom.role.value.kind == .stage)
        #expect(carolRoom.role.value.kind == .listener)
        let hostSession = try #require(hostRoom.stageSession)
        #expect(await host.connectMedia(hostRoom.meetingID) == "joined")
        #expect(await bob.connectMedia(bobRoom.meetingID) == "joined")
        // Built without a media engine (UnavailableMediaEngine), connecting is a typed refusal.
        await #expect(throws: MeetingError.mediaUnavailable) { try await hostSession.connect() }

        // The listener's playback stream fetches live segments.
        let playback = try #require(carolRoom.playbackStream)
        playback.play()
        let latency = try await playback.liveLatency.wait(timeout: .seconds(20)) { $0 != nil }
        #expect(latency! < .seconds(10))
        #expect(playback.nextSegment()?.data.first == 0x47)  // MPEG-TS sync byte

        // Carol raises her hand; the host sees it.
        try await carolRoom.raiseHand()
        #expect(carolRoom.state.value.caseName == "handRaised")
        try await hostRoom.participants.wait(timeout: .seconds(15)) { people in
            people.contains { $0.userID == carol.userID && $0.handRaised }
        }

        // A non-host's promote is refused; the stage is full until the host demotes Bob.
        await #expect(throws: MeetingError.notHost) { try await bobRoom.promote(carol.userID) }
        await #expect(throws: MeetingError.stageFull) { try await hostRoom.promote(carol.userID) }
        try await hostRoom.demote(bob.userID)
        try await bobRoom.role.wait(timeout: .seconds(15)) { $0.kind == .listener }
        #expect(await bob.connectMedia(bobRoom.meetingID) == "refused")  // off stage: no join any more

        // Promoted, Carol's role becomes stage, and the services join her to the media room.
        try await hostRoom.promote(carol.userID)
        try await carolRoom.role.wait(timeout: .seconds(15)) { $0.kind == .stage }
        #expect(await carol.connectMedia(carolRoom.meetingID) == "joined")
        try await playback.state.wait(timeout: .seconds(5)) { $0 == .paused || $0 == .stopped }

        // Bob's relay drops: his feed reconnects and, from its cursor, misses nothing.
        proxy.close()
        try await bobRoom.state.wait(timeout: .seconds(30)) { $0.joined?.feed != .live }
        try await carolRoom.leave()
        #expect(carolRoom.state.value == .left(.requested))
        try proxy.open()
        try await bobRoom.participants.wait(timeout: .seconds(30)) { people in
            !people.contains { $0.userID == carol.userID }
        }
        try await hostRoom.participants.wait(timeout: .seconds(15)) { people in
            people.map(\.userID) == [host.userID, bob.userID]
        }

        // The host ends the meeting for everyone.
        try await hostRoom.end()
        try await bobRoom.state.wait(timeout: .seconds(15)) { $0.caseName == "ended" }
        #expect(hostRoom.state.value.caseName == "ended")
        #expect(host.meetings.joined.isEmpty && bob.meetings.joined.isEmpty)
        proxy.close()
    }

    @Test(
        "A member who is not in the room is refused; a switched-away account's meeting answers accountEnded and is left"
    )
    func membershipAndAccountEnd() async throws {
        let owner = try await MeetingMember.register("mt-owner", in: environment, transport: transport)
        let watcher = try await MeetingMember.register("mt-watcher", in: environment, transport: transport)
        let roomID = try await owner.createRoom()
        await #expect(throws: MeetingError.notRoomMember) { _ = try await watcher.meetings.join(roomID: roomID) }
        try await watcher.joinRoom(roomID)
        let room = try await owner.meetings.join(roomID: roomID)
        owner.scope.end(reason: .switched)
        await #expect(throws: MeetingError.accountEnded) { try await room.raiseHand() }
        await #expect(throws: MeetingError.accountEnded) { _ = try await owner.meetings.join(roomID: roomID) }
        // The end of the scope left the meeting at the services: the last one out ended it.
        let path = "/_symorva/v1/meetings/\(room.meetingID.rawValue)"
        var ended = false
        for _ in 0..<50 where !ended {
            let answer = try await watcher.services.send(.get, path)
            ended = String(decoding: answer, as: UTF8.self).contains("\"status\":\"ended\"")
            if !ended { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(ended)
    }
}
