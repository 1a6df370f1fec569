import SymorvaCrypto
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

extension CryptoStore {
    /// The account's cross-signing private keys as stored: the master public key and the three
    /// seeds, opened in memory.
    package struct StoredCrossSigningKeys: Sendable {
        package var masterKey: String
        package var masterSeed: Secret<[UInt8]>
        package var selfSigningSeed: Secret<[UInt8]>
        package var userSigningSeed: Secret<[UInt8]>
    }

    /// A user's pinned identity.
    package struct PinnedIdentity: Sendable, Hashable {
        /// The master key pinned on first sight (or acknowledged since).
        package var pinnedMasterKey: String
        /// Another master key the server lists since, not acknowledged yet; the empty string when
        /// the server stopped listing any (``removedMarker``).
        package var changedMasterKey: String?
        /// What `changedMasterKey` holds when a pinned identity disappeared from the server's
        /// answers.
        package static let removedMarker = ""

        /// The unacknowledged change, typed.
        package var change: UserIdentityChange? {
            guard let changedMasterKey else { return nil }
            return changedMasterKey == Self.removedMarker ? .removed : .replaced
        }
        /// Our user-signing key signed the user's current master key.
        package var verified: Bool
    }

    private func crossSigningData(_ field: String) -> [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.cross_signing.\(field)")
    }

    /// Stores the account's cross-signing private keys (replacing any), each seed sealed with the
    /// secrets-at-rest key, durably.
    package func saveCrossSigningKeys(_ keys: StoredCrossSigningKeys) async throws(CryptoStoreError) {
        let sealed: [[UInt8]]
        do {
            sealed = [
                try secrets.seal(keys.masterSeed, associatedData: crossSigningData("master")),
                try secrets.seal(keys.selfSigningSeed, associatedData: crossSigningData("self_signing")),
                try secrets.seal(keys.userSigningSeed, associatedData: crossSigningData("user_signing")),
            ]
        } catch {
            throw .secrets(error)
        }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute(
                    """
                    INSERT INTO e2ee_cross_signing_keys(id, master_key, sealed_master, sealed_self_signing, sealed_user_signing)
                    VALUES (1, ?, ?, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET master_key = excluded.master_key,
                        sealed_master = excluded.sealed_master, sealed_self_signing = excluded.sealed_self_signing,
                        sealed_user_signing = excluded.sealed_user_signing
                    """,
                    [.text(keys.masterKey), .blob(sealed[0]), .blob(sealed[1]), .blob(sealed[2])])
            }
        } catch {
            throw .store(error)
        }
    }

    /// The master public key of the private keys this device holds, without opening them.
    package func crossSigningMasterKey() async throws(CryptoStoreError) -> String? {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT master_key FROM e2ee_cross_signing_keys WHERE id = 1") { $0.string(0) }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The account's cross-signing private keys, opened, or `nil` when this device holds none.
    package func crossSigningKeys() async throws(CryptoStoreError) -> StoredCrossSigningKeys? {
        let row: (String, [UInt8], [UInt8], [UInt8])?
        do {
            row = try await database.run { db throws(StoreError) in
                try db.queryOne(
                    """
                    SELECT master_key, sealed_master, sealed_self_signing, sealed_user_signing
                    FROM e2ee_cross_signing_keys WHERE id = 1
                    """
                ) { ($0.string(0), $0.blob(1), $0.blob(2), $0.blob(3)) }
            }
        } catch {
            throw .store(error)
        }
        guard let row else { return nil }
        do {
            return StoredCrossSigningKeys(
                masterKey: row.0, masterSeed: try secrets.open(row.1, associatedData: crossSigningData("master")),
                selfSigningSeed: try secrets.open(row.2, associatedData: crossSigningData("self_signing")),
                userSigningSeed: try secrets.open(row.3, associatedData: crossSigningData("user_signing")))
        } catch {
            throw .secrets(error)
        }
    }

    /// Forgets the cross-signing private keys (the server lists another identity for the account:
    /// they sign nothing any more).
    package func forgetCrossSigningKeys() async throws(CryptoStoreError) {
        do {
            try await database.transaction { db throws(StoreError) in
                try db.execute("DELETE FROM e2ee_cross_signing_keys")
            }
        } catch {
            throw .store(error)
        }
    }

    /// Compares `identity` with the user's pin, inside a `keys/query`'s transaction: the first
    /// master key seen is pinned; another one is recorded as changed (until acknowledged); the
    /// pinned one again clears a recorded change.
    static func pinIdentity(_ identity: UserIdentity, in db: isolated SQLiteDatabase) throws(StoreError) {
        let user = identity.userID.rawValue
        let pinned = try db.queryOne(
            "SELECT pinned_master_key FROM e2ee_identities WHERE user_id = ?", [.text(user)]
        ) { $0.string(0) }
        let verified: SQLiteValue = .integer(identity.isVerified ? 1 : 0)
        switch IdentityPinOutcome.compare(pinned: pinned, current: identity.masterKey) {
        case .firstSeen:
            try db.execute(
                "INSERT INTO e2ee_identities(user_id, pinned_master_key, verified) VALUES (?, ?, ?)",
                [.text(user), .text(identity.masterKey), verified])
        case .unchanged:
            try db.execute(
                "UPDATE e2ee_identities SET changed_master_key = NULL, verified = ? WHERE user_id = ?",
                [verified, .text(user)])
        case .changed:
            try db.execute(
                "UPDATE e2ee_identities SET changed_master_key = ?, verified = ? WHERE user_id = ?",
                [.text(identity.masterKey), verified, .text(user)])
        }
    }

    /// A user the `keys/query` answered without any identity while one is pinned: the pinned
    /// identity disappeared (the server stopped returning the master key). Recorded as a change
    /// (``PinnedIdentity/removedMarker``) until acknowledged; it is never silent.
    static func identityMissing(of user: UserID, in db: isolated SQLiteDatabase) throws(StoreError) {
        try db.execute(
            """
            UPDATE e2ee_identities SET changed_master_key = ?, verified = 0
            WHERE user_id = ? AND pinned_master_key != ?
            """,
            [.text(PinnedIdentity.removedMarker), .text(user.rawValue), .text(PinnedIdentity.removedMarker)])
    }

    /// Pins this account's own identity to `masterKey` (this device just made or restored it):
    /// no change is recorded for it.
    package func pinOwnIdentity(masterKey: String) async throws(CryptoStoreError) {
        do {
            try await database.transaction { db throws(StoreError) in
                try db.execute(
                    """
                    INSERT INTO e2ee_identities(user_id, pinned_master_key, changed_master_key, verified)
                    VALUES (?, ?, NULL, 1)
                    ON CONFLICT(user_id) DO UPDATE SET pinned_master_key = excluded.pinned_master_key,
                        changed_master_key = NULL, verified = 1
                    """,
                    [.text(userID.rawValue), .text(masterKey)])
            }
        } catch {
            throw .store(error)
        }
    }

    /// The pinned identity of `user`, if one was seen.
    package func identity(of user: UserID) async throws(CryptoStoreError) -> PinnedIdentity? {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne(
                    "SELECT pinned_master_key, changed_master_key, verified FROM e2ee_identities WHERE user_id = ?",
                    [.text(user.rawValue)]
                ) {
                    PinnedIdentity(
                        pinnedMasterKey: $0.string(0), changedMasterKey: $0.isNull(1) ? nil : $0.string(1),
                        verified: $0.int(2) != 0)
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The users whose identity changed and is not acknowledged, sorted.
    package func changedIdentities() async throws(CryptoStoreError) -> [UserID] {
        do {
            let raw = try await database.run { db throws(StoreError) in
                try db.queryAll(
                    "SELECT user_id FROM e2ee_identities WHERE changed_master_key IS NOT NULL ORDER BY user_id"
                ) { $0.string(0) }
            }
            return raw.compactMap(UserID.init)
        } catch {
            throw .store(error)
        }
    }

    /// Acknowledges a change of `user`'s identity: the new master key is pinned (or, when the
    /// identity disappeared, the pin is dropped). Returns whether there was a change to
    /// acknowledge.
    @discardableResult
    package func acknowledgeIdentity(of user: UserID) async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.transaction { db throws(StoreError) -> Bool in
                // An identity that disappeared: acknowledged, the user has none (the next one seen
                // is pinned on first sight).
                try db.execute(
                    "DELETE FROM e2ee_identities WHERE user_id = ? AND changed_master_key = ?",
                    [.text(user.rawValue), .text(PinnedIdentity.removedMarker)])
                if db.changes > 0 { return true }
                try db.execute(
                    """
                    UPDATE e2ee_identities SET pinned_master_key = changed_master_key, changed_master_key = NULL
                    WHERE user_id = ? AND changed_master_key IS NOT NULL
                    """,
                    [.text(user.rawValue)])
                return db.changes > 0
            }
        } catch {
            throw .store(error)
        }
    }
}

extension DeviceTrustLevel {
    /// The value of `e2ee_devices.trust`.
    var storedValue: Int {
        switch self {
        case .unverified: 0
        case .crossSigned: 1
        case .verified: 2
        }
    }

    /// The level a stored value names (an unknown value is the lowest).
    init(storedValue: Int) {
        switch storedValue {
        case 2: self = .verified
        case 1: self = .crossSigned
        default: self = .unverified
        }
    }
}
