import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import Testing

@testable import SymorvaMeetings

@Suite("Meetings wire")
struct MeetingsWireTests {
    let me: UserID = "@me:localhost"

    @Test("A stage join answer becomes the admission with its descriptor")
    func stageJoin() throws {
        let json = """
            {"meeting": {"meeting_id": "mt_ab", "room_id": "!r", "mode": "open", "stage_capacity": 2,
             "status": "active", "end_reason": null},
             "participants": [{"user_id": "@me:localhost", "role": "stage", "hand_raised": false, "joined_at_ms": 1}],
             "cursor": 2, "role": "stage", "playback": null,
             "media": {"server_url": "http://127.0.0.1:9/janus", "plugin": "janus.plugin.audiobridge", "room": 7,
                       "participant_id": 9, "display": "@me:localhost", "expires_at_ms": 1000}}
            """
        let answer = try #require(
            WireJSON.decodeIfValid(MeetingsWire.Join.self, from: Array(json.utf8))?.answer(for: me))
        #expect(answer.snapshot.meetingID == MeetingID("mt_ab") && answer.snapshot.cursor == 2)
        #expect(answer.snapshot.participants == [MeetingParticipant(userID: me, role: .stage)])
        guard case .stage(let descriptor) = answer.admission else {
            Issue.record("not stage")
            return
        }
        #expect(descriptor.room == 7 && descriptor.participantID == 9)
        #expect(answer.playback.playlistPath == "/_symorva/v1/meetings/mt_ab/playback/live.m3u8")
    }

    @Test("A stage answer without a descriptor, or an unknown role, is malformed")
    func malformed() {
        let json = """
            {"meeting": {"meeting_id": "mt_ab", "room_id": "!r", "mode": "open", "status": "active"},
             "participants": [], "cursor": 2, "role": "stage", "media": null, "playback": null}
            """
        #expect(WireJSON.decodeIfValid(MeetingsWire.Join.self, from: Array(json.utf8))?.answer(for: me) == nil)
        let odd = """
            {"cursor": 1, "status": "active", "participants": [{"user_id": "@x:l", "role": "chair", "hand_raised": false}]}
            """
        #expect(WireJSON.decodeIfValid(MeetingsWire.Changes.self, from: Array(odd.utf8))?.batch == nil)
    }

    @Test("Service errors map to the member's terms by errcode")
    func errors() {
        let cases: [(ServicesError, MeetingError)] = [
            (.server(code: "SY_NOT_HOST", status: 403, message: "", retryAfter: nil), .notHost),
            (.server(code: "SY_STAGE_FULL", status: 409, message: "", retryAfter: nil), .stageFull),
            (.server(code: "SY_NOT_ROOM_MEMBER", status: 403, message: "", retryAfter: nil), .notRoomMember),
            (.server(code: "SY_MEDIA_UNAVAILABLE", status: 503, message: "", retryAfter: nil), .mediaUnavailable),
            (
                .server(code: "SY_UNKNOWN", status: 500, message: "", retryAfter: nil),
                .transport(.serverError(status: 500))
            ),
            (.server(code: "SY_ODD", status: 400, message: "", retryAfter: nil), .refused(code: "SY_ODD", status: 400)),
            (.rateLimited(retryAfter: .seconds(1)), .rateLimited(retryAfter: .seconds(1))),
            (.transport(.timedOut), .transport(.timeout)),
            (.transport(.connectFailed), .transport(.unreachable)),
        ]
        for (error, expected) in cases { #expect(MeetingsService.meetingError(error) == expected) }
    }
}
