import SymorvaMachines

/// The server-side key backup endpoints (spec v1.11, "Server-side key backups"): backup
/// versions and the room keys stored under one version.
extension E2EEAPI {
    /// The backup algorithm this SDK reads and writes.
    package static let backupAlgorithm = "m.megolm_backup.v1.curve25519-aes-sha2"
    /// The `errcode` of a request naming a backup version that is not the current one.
    package static let wrongRoomKeysVersion = "M_WRONG_ROOM_KEYS_VERSION"

    /// `POST /room_keys/version`: a new backup version with `authData` (the public key and its
    /// signatures). The answer holds `version`.
    package static func createBackupVersion(authData: JSONValue) throws(JSONValue.CanonicalJSONError)
        -> MatrixEndpoint
    {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/room_keys/version",
            body: try JSONValue.object(["algorithm": .string(backupAlgorithm), "auth_data": authData])
                .canonicalEncoding(),
            requiresAuth: true)
    }

    /// `GET /room_keys/version` (the current version) or `GET /room_keys/version/{version}`.
    /// `M_NOT_FOUND` when there is none.
    package static func backupVersion(_ version: String? = nil) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(prefix)/room_keys/version" + (version.map { "/\(percentEncoded($0))" } ?? ""),
            requiresAuth: true)
    }

    /// `DELETE /room_keys/version/{version}`: the version and every key stored under it.
    package static func deleteBackupVersion(_ version: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .delete, path: "\(prefix)/room_keys/version/\(percentEncoded(version))", requiresAuth: true)
    }

    /// Where room keys of `version` are: every room, one room, or one session of a room.
    package enum RoomKeysScope: Sendable, Hashable {
        /// Every room: the body is `{"rooms": {room: {"sessions": {session: key}}}}`.
        case all
        /// One room: the body is `{"sessions": {session: key}}`.
        case room(RoomID)
        /// One session: the body is the key itself.
        case session(RoomID, sessionID: String)

        var path: String {
            switch self {
            case .all: "/room_keys/keys"
            case .room(let room): "/room_keys/keys/\(percentEncoded(room.rawValue))"
            case .session(let room, let session):
                "/room_keys/keys/\(percentEncoded(room.rawValue))/\(percentEncoded(session))"
            }
        }
    }

    /// `PUT /room_keys/keys…?version=` with `body` shaped for `scope`. The server keeps a
    /// stored key unless the new one is better (the spec's merge rules); it answers
    /// `M_WRONG_ROOM_KEYS_VERSION` (403) when `version` is not the current one, `M_NOT_FOUND`
    /// when there is no backup.
    package static func putRoomKeys(version: String, scope: RoomKeysScope, body: JSONValue)
        throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint
    {
        MatrixEndpoint(
            method: .put, path: prefix + scope.path, query: [.init(name: "version", value: version)],
            body: try body.canonicalEncoding(), requiresAuth: true)
    }

    /// `GET /room_keys/keys…?version=`: the keys stored for `scope` (`M_NOT_FOUND` for a
    /// session or a version the backup does not have).
    package static func roomKeys(version: String, scope: RoomKeysScope) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: prefix + scope.path, query: [.init(name: "version", value: version)],
            requiresAuth: true)
    }
}
