import SymorvaMachines

/// The threads endpoints (spec v1.4+): the room's thread list, a thread's replies through
/// `/relations`, and the threaded read receipt.
package enum ThreadsAPI {
    static let v1 = "/_matrix/client/v1"

    /// `GET /_matrix/client/v1/rooms/{roomId}/threads`: the room's thread roots, most recently
    /// active first, each with its bundled `m.thread` aggregation (count, latest reply,
    /// whether the account took part).
    package static func threads(roomID: RoomID, from token: String?, limit: Int) -> MatrixEndpoint {
        var query = [MatrixEndpoint.QueryItem(name: "limit", value: String(max(1, limit)))]
        if let token { query.append(.init(name: "from", value: token)) }
        return MatrixEndpoint(
            method: .get, path: "\(v1)/rooms/\(percentEncoded(roomID.rawValue))/threads", query: query,
            requiresAuth: true)
    }

    /// `GET /_matrix/client/v1/rooms/{roomId}/relations/{root}/m.thread?dir=b`: the thread's
    /// replies, newest first, from `token` (`nil`: the newest); `next_batch` continues.
    package static func replies(roomID: RoomID, root: EventID, from token: String?, limit: Int) -> MatrixEndpoint {
        var query = [
            MatrixEndpoint.QueryItem(name: "dir", value: "b"),
            MatrixEndpoint.QueryItem(name: "limit", value: String(max(1, limit))),
        ]
        if let token { query.append(.init(name: "from", value: token)) }
        return MatrixEndpoint(
            method: .get,
            path: "\(v1)/rooms/\(percentEncoded(roomID.rawValue))/relations/\(percentEncoded(root.rawValue))/m.thread",
            query: query, requiresAuth: true)
    }

    /// `GET /_matrix/client/v1/rooms/{roomId}/relations/{eventId}?dir=b`: the events that relate
    /// to `eventID` (edits, reactions, references), newest first, at most `limit`.
    package static func relations(roomID: RoomID, eventID: EventID, limit: Int) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get,
            path: "\(v1)/rooms/\(percentEncoded(roomID.rawValue))/relations/\(percentEncoded(eventID.rawValue))",
            query: [
                MatrixEndpoint.QueryItem(name: "dir", value: "b"),
                MatrixEndpoint.QueryItem(name: "limit", value: String(max(1, limit))),
            ], requiresAuth: true)
    }

    /// `POST /rooms/{roomId}/receipt/{type}/{eventId}` with `thread_id`: a read receipt that
    /// counts for one thread only (`main` for the main timeline), private when `privately`.
    package static func receipt(roomID: RoomID, eventID: EventID, threadID: String, privately: Bool)
        -> MatrixEndpoint
    {
        var body = JSONObjectWriter()
        body.string("thread_id", threadID)
        let type = privately ? "m.read.private" : "m.read"
        return MatrixEndpoint(
            method: .post, path: "\(ChatAPI.room(roomID))/receipt/\(type)/\(percentEncoded(eventID.rawValue))",
            body: body.bytes, requiresAuth: true)
    }
}
