import SymorvaMachines
import SymorvaRuntime
import Testing

@testable import SymorvaMeetings

@Suite("HLS playlist")
struct HLSPlaylistTests {
    let live = """
        #EXTM3U
        #EXT-X-VERSION:3
        #EXT-X-MEDIA-SEQUENCE:41
        #EXT-X-TARGETDURATION:1

        #EXT-X-PROGRAM-DATE-TIME:2026-12-01T23:14:53.305Z
        #EXTINF:0.98133331537246704,
        seg00041.ts
        #EXTINF:0.981,
        seg00042.ts
        """

    @Test("A live playlist gives each segment its sequence, duration, URI and program date")
    func parsesLive() throws {
        let playlist = try #require(HLSPlaylist.parse(live))
        #expect(playlist.targetDuration == .seconds(1))
        #expect(!playlist.ended)
        #expect(playlist.segments.map(\.sequence) == [41, 42])
        #expect(playlist.segments.map(\.uri) == ["seg00041.ts", "seg00042.ts"])
        #expect(playlist.segments[0].duration == .milliseconds(981))
        #expect(playlist.segments[0].programDate == Timestamp(millisecondsSince1970: 1_796_166_893_305))
        #expect(playlist.segments[1].programDate == nil)
    }

    @Test("An ended playlist says so; anything that is not a media playlist is refused")
    func endedAndInvalid() {
        #expect(
            HLSPlaylist.parse("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\na.ts\n#EXT-X-ENDLIST")?.ended == true)
        #expect(HLSPlaylist.parse("<html>") == nil)
        #expect(HLSPlaylist.parse("#EXTM3U\n#EXTINF:1.0,\na.ts") == nil)  // no target duration
        #expect(HLSPlaylist.parse("#EXTM3U\n#EXT-X-TARGETDURATION:1\nb.ts") == nil)  // a URI without #EXTINF
        #expect(HLSPlaylist.parse("#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:-1,\nb.ts") == nil)
    }

    @Test("Program dates: UTC with or without a fraction; anything else is nil")
    func timestamps() {
        #expect(HLSPlaylist.timestamp("1970-01-01T00:00:00Z") == Timestamp(millisecondsSince1970: 0))
        #expect(HLSPlaylist.timestamp("2000-03-01T00:00:01.5Z") == Timestamp(millisecondsSince1970: 951_868_801_500))
        #expect(
            HLSPlaylist.timestamp("2000-03-01T00:00:01.123456Z") == Timestamp(millisecondsSince1970: 951_868_801_123))
        #expect(HLSPlaylist.timestamp("2000-03-01T00:00:01+01:00") == nil)
        #expect(HLSPlaylist.timestamp("2000-13-01T00:00:01Z") == nil)
        #expect(HLSPlaylist.timestamp("2000-03-01T00:00:01.Z") == nil)
    }

    @Test("Segment URIs resolve against the playlist's folder")
    func resolves() {
        let path = "/_symorva/v1/meetings/mt_1/playback/live.m3u8"
        #expect(
            HLSPlaylist.resolve("seg00001.ts", relativeTo: path) == "/_symorva/v1/meetings/mt_1/playback/seg00001.ts")
        #expect(HLSPlaylist.resolve("/other/x.ts", relativeTo: path) == "/other/x.ts")
    }
}

@Suite("Meeting media adapters")
struct MediaAdapterTests {
    struct NoConnector: MediaRoomConnector {
        func joinMediaRoom() async throws(MediaSessionError) -> MediaServerLink { throw .unauthorized }
    }

    @Test("Without a media engine, connecting the stage session fails with mediaUnavailable, never silently")
    func unavailable() async {
        let session = UnavailableMediaEngine().makeSession(
            MediaSessionContext(meetingID: MeetingID("mt_1"), connector: NoConnector(), scope: nil))
        await #expect(throws: MeetingError.mediaUnavailable) { try await session.connect() }
        await #expect(throws: MeetingError.mediaUnavailable) { try await session.setMicrophoneEnabled(true) }
    }

    @Test("The services' refusals in the media session's terms: off stage closes, a media room away is retried")
    func connectorErrors() {
        #expect(ServicesMediaConnector.mediaError(.wrongRole) == .unauthorized)
        #expect(ServicesMediaConnector.mediaError(.notParticipant) == .unauthorized)
        #expect(ServicesMediaConnector.mediaError(.mediaUnavailable) == .roomUnavailable)
        #expect(ServicesMediaConnector.mediaError(.transport(.timeout)) == .transport(.timeout))
    }
}
