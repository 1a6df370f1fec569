import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

@testable import SymorvaMeetings

/// Hands out a fixed OpenID token.
struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

struct FrozenWallClock: WallClock {
    let now: Timestamp
}

/// The meetings service client, its interpreter and the HLS client over a scripted transport.
struct MeetingsHarness {
    let transport = ScriptedHTTPTransport.communityServices()
    let clock = ManualClock(now: .seconds(100))
    let me: UserID = "@me:localhost"
    let service: MeetingsService

    init() {
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: .never)
        service = MeetingsService(services: services, userID: me, requestTimeout: .seconds(5), feedWait: .seconds(2))
    }

    func perform(_ effect: MeetingMachine.Effect, media: MediaSlot = MediaSlot()) async -> MeetingMachine.Event? {
        await MeetingInterpreter(service: service, media: media).perform(
            effect, context: EffectContext(epoch: Epoch(1), clock: clock) { _ in })
    }

    static let snapshotJSON = """
        {"meeting": {"meeting_id": "mt_01", "room_id": "!r:localhost", "mode": "open", "stage_capacity": 2,
         "status": "active", "end_reason": null},
         "participants": [{"user_id": "@me:localhost", "role": "listener", "hand_raised": true, "joined_at_ms": 1}],
         "cursor": 4}
        """
}

@Suite("Meetings interpreter")
struct MeetingInterpreterTests {
    @Test("A join posts the room and answers the admission")
    func join() async throws {
        let harness = MeetingsHarness()
        harness.transport.on("POST", "/_symorva/v1/meetings/join") { _ in
            .json(
                200,
                """
                {"meeting": {"meeting_id": "mt_01", "room_id": "!r:localhost", "mode": "broadcast", "status": "active"},
                 "participants": [{"user_id": "@me:localhost", "role": "listener", "hand_raised": false}],
                 "cursor": 2, "role": "listener", "media": null,
                 "playback": {"playlist_path": "/_symorva/v1/meetings/mt_01/playback/live.m3u8", "segment_seconds": 1}}
                """)
        }
        let event = await harness.perform(.sendJoin(RoomID("!r:localhost"), broadcast: true))
        guard case .joinResponse(.success(let answer)) = event else {
            Issue.record("not a join answer: \(String(describing: event))")
            return
        }
        #expect(answer.snapshot.mode == .broadcast && answer.snapshot.cursor == 2)
        let request = try #require(harness.transport.requests.last)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["room_id"] as? String == "!r:localhost" && body["broadcast"] as? Bool == true)
    }

    @Test("A feed poll asks from its cursor with the server-side wait; a refusal is the typed error")
    func feed() async throws {
        let harness = MeetingsHarness()
        harness.transport.on("GET", "/_symorva/v1/meetings/mt_01/changes") { request in
            #expect(request.url.query?.contains("since=4") == true)
            #expect(request.url.query?.contains("timeout_ms=2000") == true)
            return .json(
                200,
                #"{"changes": [], "cursor": 6, "status": "active", "participants": [{"user_id": "@me:localhost", "role": "stage", "hand_raised": false}]}"#
            )
        }
        let event = await harness.perform(.pollFeed(MeetingID("mt_01"), since: 4))
        #expect(
            event
                == .feedResponse(
                    .success(
                        FeedBatch(
                            cursor: 6, ended: false,
                            participants: [MeetingParticipant(userID: harness.me, role: .stage)]))))
        harness.transport.on("GET", "/_symorva/v1/meetings/mt_01/changes") { _ in
            .json(403, #"{"errcode": "SY_NOT_ROOM_MEMBER", "error": "left"}"#)
        }
        #expect(
            await harness.perform(.pollFeed(MeetingID("mt_01"), since: 6)) == .feedResponse(.failure(.notRoomMember)))
    }

    @Test("Closing the media session disconnects the one in the slot")
    func closeMedia() async {
        let harness = MeetingsHarness()
        let slot = MediaSlot()
        let session = RecordingMediaSession()
        slot.set(session)
        #expect(await harness.perform(.closeMediaSession, media: slot) == .mediaSessionClosed)
        #expect(session.disconnects.withLock { $0 } == 1)
        #expect(slot.current == nil)
    }

    @Test("A leave the services refuse as not a participant is still left; a lost one is the transport problem")
    func leave() async {
        let harness = MeetingsHarness()
        harness.transport.on("POST", "/_symorva/v1/meetings/mt_01/leave") { _ in
            .json(409, #"{"errcode": "SY_NOT_PARTICIPANT", "error": "no"}"#)
        }
        #expect(await harness.perform(.sendLeave(MeetingID("mt_01"))) == .leaveResponse(.failed(.notParticipant)))
        harness.transport.on("POST", "/_symorva/v1/meetings/mt_01/leave") { _ in .failure(.timedOut) }
        #expect(await harness.perform(.sendLeave(MeetingID("mt_01"))) == .leaveResponse(.failed(.transport(.timeout))))
    }
}

final class RecordingMediaSession: MediaSession {
    let disconnects = Lock(0)
    let idle = ObservableValue<MediaSessionMachine.State>.Publisher(.idle(MediaCall()))
    let silence = ObservableValue<MediaAudioLevels>.Publisher(MediaAudioLevels())
    var state: ObservableValue<MediaSessionMachine.State> { idle.observable }
    var audioLevels: ObservableValue<MediaAudioLevels> { silence.observable }
    func connect() async throws(MeetingError) {}
    func setMicrophoneEnabled(_ enabled: Bool) async throws(MeetingError) {}
    func disconnect() async { disconnects.withLock { $0 += 1 } }
}

@Suite("HLS playback stream")
struct HLSPlaybackStreamTests {
    static let playlistPath = "/_symorva/v1/meetings/mt_01/playback/live.m3u8"

    static func playlist(_ sequences: ClosedRange<Int>) -> String {
        var text = "#EXTM3U\n#EXT-X-MEDIA-SEQUENCE:\(sequences.lowerBound)\n#EXT-X-TARGETDURATION:1\n"
        for sequence in sequences {
            text += "#EXT-X-PROGRAM-DATE-TIME:1970-01-01T00:00:\(String(format: "%02d", sequence)).000Z\n"
            text += "#EXTINF:1.0,\nseg\(String(format: "%05d", sequence)).ts\n"
        }
        return text
    }

    @Test("It starts at the live edge, follows the playlist, buffers segments and measures their age")
    func follows() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        let clock = ManualClock(now: .seconds(100))
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: .never)
        let service = MeetingsService(
            services: services, userID: "@me:localhost", requestTimeout: .seconds(5), feedWait: .seconds(1))
        let current = Lock(Self.playlist(1...3))
        transport.on("GET", Self.playlistPath) { _ in .json(200, current.withLock { $0 }) }
        transport.on("GET", pathPrefix: "/_symorva/v1/meetings/mt_01/playback/seg") { request in
            .success(HTTPResponse(status: 200, headers: [:], body: Array(request.url.path.utf8.suffix(8))))
        }
        // The newest segment (3) ends at 00:00:04; fetched at 00:00:04.250.
        let stream = HLSPlaybackStream(
            descriptor: PlaybackDescriptor(playlistPath: Self.playlistPath, segmentDuration: .seconds(1)),
            service: service, clock: clock, wallClock: FrozenWallClock(now: Timestamp(millisecondsSince1970: 4_250)))
        stream.play()
        try await stream.liveLatency.wait { $0 == .milliseconds(250) }
        try await stream.state.wait { $0 == .playing }
        #expect(stream.fetchedSegments == 1)
        current.withLock { $0 = Self.playlist(2...5) }
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(1))
        try await stream.bufferedDuration.wait { $0 == .seconds(3) }
        #expect(stream.fetchedSegments == 3)
        #expect(stream.nextSegment().map { String(decoding: $0.data, as: UTF8.self) } == "00003.ts")
        #expect(stream.nextSegment()?.sequence == 4)
        #expect(stream.bufferedDuration.value == .seconds(1))
        stream.pause()
        #expect(stream.state.value == .paused)
        stream.stop()
        #expect(stream.state.value == .stopped && stream.nextSegment() == nil)
    }

    @Test("A failed fetch stalls the stream with the typed error, and it tries again")
    func stalls() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        let clock = ManualClock(now: .seconds(100))
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: .never)
        let service = MeetingsService(
            services: services, userID: "@me:localhost", requestTimeout: .seconds(5), feedWait: .seconds(1))
        transport.on("GET", Self.playlistPath) { _ in .json(403, #"{"errcode": "SY_NOT_ROOM_MEMBER", "error": "x"}"#) }
        let stream = HLSPlaybackStream(
            descriptor: PlaybackDescriptor(playlistPath: Self.playlistPath, segmentDuration: .seconds(1)),
            service: service, clock: clock, wallClock: SystemWallClock())
        stream.play()
        try await stream.state.wait { $0 == .stalled(.notRoomMember) }
        transport.on("GET", Self.playlistPath) { _ in .json(200, Self.playlist(1...1)) }
        transport.on("GET", pathPrefix: "/_symorva/v1/meetings/mt_01/playback/seg") { _ in
            .success(HTTPResponse(status: 200, headers: [:], body: [0x47]))
        }
        try await clock.waitForSleepers(count: 1)
        await clock.advance(by: .seconds(1))
        try await stream.state.wait { $0 == .playing }
        stream.stop()
    }
}
