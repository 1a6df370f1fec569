import SymorvaMachines
import SymorvaMatrix
import SymorvaStore

/// Spaces as the store knows them: joined rooms created as spaces (`m.room.create` with `type`
/// `m.space`) and the rooms each links with `m.space.child`.
extension ChatStore {
    /// A joined space: its ID and name (`nil` when it has none).
    package struct StoredSpace: Sendable, Hashable {
        package var roomID: RoomID
        package var name: String?
    }

    /// The account's joined spaces, by name.
    package func joinedSpaces() async throws(ChatStoreError) -> [StoredSpace] {
        try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT r.room_id, r.name FROM rooms r JOIN room_state s ON s.room_nid = r.room_nid
                WHERE r.membership = 0 AND s.type = 'm.room.create' AND s.state_key = ''
                    AND json_valid(CAST(s.content AS TEXT))
                    AND json_extract(CAST(s.content AS TEXT), '$.type') = 'm.space'
                ORDER BY r.name IS NULL, r.name COLLATE NOCASE, r.room_id
                """
            ) { row in StoredSpace(roomID: RoomID(row.string(0)), name: row.isNull(1) ? nil : row.string(1)) }
        }
    }

    /// The rooms `spaceID` links to (`m.space.child` with a non-empty `via`), with the servers
    /// each names; empty when the space is not stored.
    package func spaceChildren(of spaceID: RoomID) async throws(ChatStoreError) -> [(roomID: RoomID, via: [String])] {
        let rows = try await read { db throws(StoreError) -> [(String, [UInt8])] in
            guard let nid = try Self.roomNID(spaceID, db: db) else { return [] }
            return try db.queryAll(
                "SELECT state_key, content FROM room_state WHERE room_nid = ? AND type = 'm.space.child' ORDER BY state_key",
                [.integer(nid)]
            ) { row in (row.string(0), row.blob(1)) }
        }
        struct Link: Decodable { var via: [String]? }
        return rows.compactMap { key, content in
            guard let via = WireJSON.decodeIfValid(Link.self, from: content)?.via, !via.isEmpty else { return nil }
            return (RoomID(key), via)
        }
    }
}

extension ChatStore {
    /// The rooms whose stored `m.space.parent` names `spaceID` (a room may claim its space).
    package func roomsClaiming(parent spaceID: RoomID) async throws(ChatStoreError) -> [RoomID] {
        try await read { db throws(StoreError) in
            try db.queryAll(
                """
                SELECT r.room_id FROM room_state s JOIN rooms r ON r.room_nid = s.room_nid
                WHERE s.type = 'm.space.parent' AND s.state_key = ? AND json_valid(CAST(s.content AS TEXT))
                    AND json_array_length(json_extract(CAST(s.content AS TEXT), '$.via')) > 0
                """, [.text(spaceID.rawValue)]
            ) { RoomID($0.string(0)) }
        }
    }
}
