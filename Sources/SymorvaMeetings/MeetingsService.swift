import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The meetings endpoints of the community services, answered in the machine's terms.
///
/// Every call goes through the account's ``/SymorvaServices/CommunityServicesClient`` (the
/// OpenID exchange, token renewal, rate-limit retries). A refusal becomes its
/// ``/SymorvaMachines/MeetingError`` case by `errcode`; a lost answer is
/// ``/SymorvaMachines/MeetingError/transport(_:)``.
struct MeetingsService: Sendable {
    let services: CommunityServicesClient
    let userID: UserID
    let requestTimeout: Duration
    /// How long one poll of the change feed waits on the server for a change.
    let feedWait: Duration

    func join(_ roomID: RoomID, broadcast: Bool) async throws(MeetingError) -> JoinAnswer {
        let answer = try await call(
            .post, MeetingsWire.Path.join,
            body: MeetingsWire.JoinRequest(roomID: roomID.rawValue, broadcast: broadcast))
        guard let join = WireJSON.decodeIfValid(MeetingsWire.Join.self, from: answer)?.answer(for: userID) else {
            throw .invalidResponse
        }
        return join
    }

    func snapshot(_ id: MeetingID) async throws(MeetingError) -> MeetingSnapshot {
        try Self.snapshot(from: try await call(.get, MeetingsWire.Path.meeting(id)))
    }

    func changes(_ id: MeetingID, since cursor: Int) async throws(MeetingError) -> FeedBatch {
        let wait = Int(feedWait / .milliseconds(1))
        let answer = try await call(
            .get, MeetingsWire.Path.changes(id),
            query: [
                URLQueryItem(name: "since", value: String(cursor)),
                URLQueryItem(name: "timeout_ms", value: String(wait)),
            ],
            timeout: feedWait + requestTimeout)
        guard let batch = WireJSON.decodeIfValid(MeetingsWire.Changes.self, from: answer)?.batch else {
            throw .invalidResponse
        }
        return batch
    }

    func hand(_ id: MeetingID, raised: Bool) async throws(MeetingError) -> MeetingSnapshot {
        try Self.snapshot(
            from: try await call(
                .post, MeetingsWire.Path.hand(id), body: MeetingsWire.HandRequest(raised: raised)))
    }

    func promote(_ id: MeetingID, _ target: UserID) async throws(MeetingError) -> MeetingSnapshot {
        try Self.snapshot(
            from: try await call(
                .post, MeetingsWire.Path.promote(id),
                body: MeetingsWire.TargetRequest(userID: target.rawValue)))
    }

    func demote(_ id: MeetingID, _ target: UserID) async throws(MeetingError) -> MeetingSnapshot {
        try Self.snapshot(
            from: try await call(
                .post, MeetingsWire.Path.demote(id),
                body: MeetingsWire.TargetRequest(userID: target.rawValue)))
    }

    func end(_ id: MeetingID) async throws(MeetingError) -> MeetingSnapshot {
        try Self.snapshot(from: try await call(.post, MeetingsWire.Path.end(id)))
    }

    func leave(_ id: MeetingID) async throws(MeetingError) {
        _ = try await call(.post, MeetingsWire.Path.leave(id))
    }

    func mediaSession(_ id: MeetingID) async throws(MeetingError) -> MediaSessionDescriptor {
        let answer = try await call(.post, MeetingsWire.Path.media(id))
        guard let media = WireJSON.decodeIfValid(MeetingsWire.Media.self, from: answer) else { throw .invalidResponse }
        return media.descriptor
    }

    /// Has the services join the member to the meeting's media room on a new media-server session
    /// (with the participant, display and token they assigned, which stays with them); the
    /// session and handle to continue on.
    func connectMedia(_ id: MeetingID) async throws(MeetingError) -> MediaServerLink {
        let answer = try await call(.post, MeetingsWire.Path.mediaConnect(id))
        guard let connection = WireJSON.decodeIfValid(MeetingsWire.MediaConnection.self, from: answer) else {
            throw .invalidResponse
        }
        return connection.link
    }

    /// A file of the playback stream (the playlist or a segment), by its path on the services.
    func playbackFile(_ path: String) async throws(MeetingError) -> [UInt8] {
        try await call(.get, path)
    }

    private static func snapshot(from answer: [UInt8]) throws(MeetingError) -> MeetingSnapshot {
        guard let snapshot = WireJSON.decodeIfValid(MeetingsWire.Snapshot.self, from: answer)?.snapshot else {
            throw .invalidResponse
        }
        return snapshot
    }

    private func call(
        _ method: HTTPMethod, _ path: String, query: [URLQueryItem] = [], timeout: Duration? = nil
    ) async throws(MeetingError) -> [UInt8] {
        do throws(ServicesError) {
            return try await services.send(method, path, query: query, timeout: timeout ?? requestTimeout)
        } catch {
            throw Self.meetingError(error)
        }
    }

    /// A request with a JSON body (``/SymorvaMatrix/WireJSON``).
    private func call(_ method: HTTPMethod, _ path: String, body: some Encodable & Sendable) async throws(MeetingError)
        -> [UInt8]
    {
        do throws(ServicesError) {
            return try await services.send(method, path, body: body, timeout: requestTimeout)
        } catch {
            throw Self.meetingError(error)
        }
    }

    /// A services failure in the member's terms: the meetings' codes first, then by class
    /// (``/SymorvaFeatureKit/FailureClass``).
    static func meetingError(_ error: ServicesError) -> MeetingError {
        switch error {
        case .server(let code, _, _, _):
            switch code {
            case "SY_NOT_ROOM_MEMBER": return .notRoomMember
            case "SY_NOT_HOST": return .notHost
            case "SY_MEETING_UNKNOWN": return .meetingUnknown
            case "SY_ROOM_UNKNOWN": return .roomUnknown
            case "SY_MEETING_ENDED": return .meetingEnded
            case "SY_NOT_PARTICIPANT": return .notParticipant
            case "SY_STAGE_FULL": return .stageFull
            case "SY_WRONG_ROLE": return .wrongRole
            case "SY_MEDIA_UNAVAILABLE": return .mediaUnavailable
            case "SY_HOMESERVER_UNAVAILABLE": return .homeserverUnavailable
            default: break
            }
        default: break
        }
        switch FailureClass(error) {
        case .transport(let problem): return .transport(problem)
        case .rateLimited(let retryAfter): return .rateLimited(retryAfter: retryAfter)
        case .refused(let code, let status): return .refused(code: code, status: status)
        case .signInRequired: return .notSignedIn
        case .moduleDisabled: return .moduleDisabled
        case .malformedResponse, .invalidRequest: return .invalidResponse
        }
    }
}
