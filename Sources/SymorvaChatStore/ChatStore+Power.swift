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
}
