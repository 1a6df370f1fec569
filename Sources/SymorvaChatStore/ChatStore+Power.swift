import SymorvaMachines
import SymorvaStore

extension ChatStore {
    /// The stored `m.room.create` of a room: its sender and content, or `nil` before the room's
    /// state has synced.
    package func createEvent(roomID: RoomID) async throws(ChatStoreError) -> (sender: String, content: [UInt8])? {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return nil }
            return try db.queryOne(
                """
                SELECT sender, content FROM room_state
                WHERE room_nid = ? AND type = 'm.room.create' AND state_key = '' AND sender IS NOT NULL
                """,
                [.integer(nid)]
            ) { row in (row.string(0), row.blob(1)) }
        }
    }

    /// The users whose stored `m.room.member` state in the room has `membership` (`knock`,
    /// `invite`, `join`, …).
    package func members(roomID: RoomID, membership: String) async throws(ChatStoreError) -> [String] {
        try await read { db throws(StoreError) in
            guard let nid = try Self.roomNID(roomID, db: db) else { return [] }
            return try db.queryAll(
                """
                SELECT state_key FROM room_state
                WHERE room_nid = ? AND type = 'm.room.member' AND json_valid(CAST(content AS TEXT))
                    AND json_extract(CAST(content AS TEXT), '$.membership') = ?
                ORDER BY state_key
                """,
                [.integer(nid), .text(membership)]
            ) { $0.string(0) }
        }
    }
}
