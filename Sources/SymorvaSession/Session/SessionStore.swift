import Foundation
import SymorvaCrypto
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The session row of one account's database: who, which device, which homeserver, and the
/// tokens — sealed with ``SecretBox`` (XChaCha20-Poly1305) under the account's key.
///
/// Each token is sealed with associated data naming the account and the column
/// (`session.access_token`, `session.refresh_token`), so a sealed token copied into another
/// column, another account's file or another row fails to open. Any flipped byte fails too:
/// loading throws `.secrets(.decryptionFailed)`, never crashes and never returns a wrong token.
/// Sealing and opening run inside the database's closures, on its store thread.
struct SessionStore: Sendable {
    /// The session feature's migrations.
    static let feature = AccountMigrations.Feature(
        name: "session",
        migrations: [
            Migration(
                version: 1, name: "session_current",
                sql: """
                    CREATE TABLE session_current (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        user_id TEXT NOT NULL,
                        device_id TEXT NOT NULL,
                        homeserver_url TEXT NOT NULL,
                        server_name TEXT,
                        server_versions TEXT NOT NULL,
                        access_token BLOB NOT NULL,
                        refresh_token BLOB,
                        issued_at_ms INTEGER,
                        expires_at_ms INTEGER,
                        soft_logged_out INTEGER NOT NULL DEFAULT 0,
                        saved_at_ms INTEGER NOT NULL
                    )
                    """)
        ])

    /// The associated-data field names of the two sealed columns.
    enum Field {
        static let accessToken = "session.access_token"
        static let refreshToken = "session.refresh_token"
    }

    let database: SQLiteDatabase
    let userID: UserID
    let box: SecretBox

    /// A store over `database`, sealing with `key`.
    init(database: AccountDatabase, key: Secret<[UInt8]>) throws(AccountStorageError) {
        self.database = database.database
        self.userID = database.userID
        do { self.box = try SecretBox(key: key) } catch { throw .secrets(error) }
    }

    /// Saves `session` as the account's session, replacing the previous one.
    func save(_ session: Session, softLoggedOut: Bool = false, savedAt: Timestamp) async throws(AccountStorageError) {
        guard session.userID == userID else { throw .unknownAccount }
        let account = userID.rawValue
        let access: [UInt8]
        let refresh: [UInt8]?
        do {
            access = try box.seal(
                session.tokens.accessToken,
                associatedData: SecretBox.associatedData(account: account, field: Field.accessToken))
            refresh = try session.tokens.refreshToken.map { token throws(SecretsError) in
                try box.seal(
                    token, associatedData: SecretBox.associatedData(account: account, field: Field.refreshToken))
            }
        } catch {
            throw .secrets(error)
        }
        let versions = String(
            decoding: (try? JSONEncoder().encode(session.homeserver.versions)) ?? Data(), as: UTF8.self)
        do {
            try await database.transaction { db throws(StoreError) in
                try db.execute(
                    """
                    INSERT OR REPLACE INTO session_current (id, user_id, device_id, homeserver_url, server_name,
                        server_versions, access_token, refresh_token, issued_at_ms, expires_at_ms, soft_logged_out,
                        saved_at_ms)
                    VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .text(account), .text(session.deviceID.rawValue), .text(session.homeserver.baseURL.rawValue),
                        .text(session.homeserver.serverName), .text(versions), .blob(access),
                        refresh.map(SQLiteValue.blob) ?? .null,
                        .integer(session.tokens.expiry?.issuedAt.millisecondsSince1970),
                        .integer(session.tokens.expiry?.expiresAt.millisecondsSince1970), .bool(softLoggedOut),
                        .integer(savedAt.millisecondsSince1970),
                    ])
            }
        } catch {
            throw .store(error)
        }
    }

    /// The saved session, or `nil` when there is none.
    ///
    /// - Throws: `.secrets(.decryptionFailed)` when a token was tampered with, moved, or sealed
    ///   under another key; `.store(.corrupt)` when the row cannot be read.
    func load() async throws(AccountStorageError) -> StoredSession? {
        let account = userID.rawValue
        let row: SealedSessionRow?
        do {
            row = try await database.run { db throws(StoreError) -> SealedSessionRow? in
                try db.queryOne(
                    """
                    SELECT user_id, device_id, homeserver_url, server_name, server_versions, access_token,
                        refresh_token, issued_at_ms, expires_at_ms, soft_logged_out
                    FROM session_current WHERE id = 1
                    """
                ) { row throws(StoreError) -> SealedSessionRow in
                    guard row.string(0) == account, let userID = UserID(account),
                        let baseURL = HomeserverURL(row.string(2)),
                        let versions = try? JSONDecoder().decode(ServerVersions.self, from: Data(row.string(4).utf8))
                    else { throw StoreError.corrupt }
                    var expiry: TokenExpiry?
                    if let issued = row.optionalInt64(7), let expires = row.optionalInt64(8) {
                        expiry = TokenExpiry(
                            issuedAt: Timestamp(millisecondsSince1970: issued),
                            expiresAt: Timestamp(millisecondsSince1970: expires))
                    }
                    return SealedSessionRow(
                        userID: userID, deviceID: DeviceID(row.string(1)),
                        homeserver: HomeserverInfo(
                            baseURL: baseURL, serverName: row.optionalString(3), versions: versions),
                        accessToken: row.blob(5), refreshToken: row.optionalBlob(6), expiry: expiry,
                        isSoftLoggedOut: row.int(9) != 0)
                }
            }
        } catch {
            throw .store(error)
        }
        guard let row else { return nil }
        do {
            let access = try box.openString(
                row.accessToken, associatedData: SecretBox.associatedData(account: account, field: Field.accessToken))
            let refresh = try row.refreshToken.map { sealed throws(SecretsError) in
                try box.openString(
                    sealed, associatedData: SecretBox.associatedData(account: account, field: Field.refreshToken))
            }
            let session = Session(
                userID: row.userID, deviceID: row.deviceID, homeserver: row.homeserver,
                tokens: SessionTokens(accessToken: access, refreshToken: refresh, expiry: row.expiry))
            return StoredSession(session: session, isSoftLoggedOut: row.isSoftLoggedOut)
        } catch {
            throw .secrets(error)
        }
    }

    /// The saved row as read, tokens still sealed: they are opened off the store's thread.
    private struct SealedSessionRow: Sendable {
        var userID: UserID
        var deviceID: DeviceID
        var homeserver: HomeserverInfo
        var accessToken: [UInt8]
        var refreshToken: [UInt8]?
        var expiry: TokenExpiry?
        var isSoftLoggedOut: Bool
    }

    /// Marks the saved session soft logged out, so that a relaunch restores that state; the
    /// tokens stay (they are dead on the server, and re-authentication replaces them).
    func markSoftLoggedOut() async throws(AccountStorageError) {
        do {
            try await database.run { db throws(StoreError) in
                try db.execute("UPDATE session_current SET soft_logged_out = 1 WHERE id = 1")
            }
        } catch {
            throw .store(error)
        }
    }
}
