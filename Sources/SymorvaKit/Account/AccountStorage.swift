import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// Every account's local data on this device: the registry (`accounts.json`), one database per
/// account, the keys that seal their secrets, and wiping.
///
/// One per community. Databases are opened once per account and shared by whoever needs them
/// (the sign-in flow that saves a new session, the account's running session, sign-out);
/// concurrent first opens of one account join a single open.
actor AccountStorage {
    /// The data folder.
    nonisolated let dataDirectory: String
    /// The migrations every account database gets.
    nonisolated let migrations: AccountMigrations
    private let keyProvider: any KeyProvider
    private let registryFile: AccountRegistryFile
    private let logger: Logger
    private var registry: AccountRegistry?
    private var databases: [UserID: AccountDatabase] = [:]
    private var opening: [UserID: Task<Result<AccountDatabase, AccountStorageError>, Never>] = [:]
    private nonisolated let accountsPublisher = ObservableValue<[StoredAccount]>.Publisher([])

    /// Storage under `dataDirectory`.
    init(dataDirectory: String, keyProvider: any KeyProvider, migrations: AccountMigrations, logger: Logger) {
        self.dataDirectory = dataDirectory
        self.keyProvider = keyProvider
        self.migrations = migrations
        self.registryFile = AccountRegistryFile(path: dataDirectory + "/accounts.json")
        self.logger = logger
    }

    /// The restorable accounts, updated on every registry change.
    nonisolated var accounts: ObservableValue<[StoredAccount]> { accountsPublisher.observable }

    // MARK: Registry

    /// The registry as stored (read once, then kept in memory and written through).
    func currentRegistry() throws(AccountStorageError) -> AccountRegistry {
        if let registry { return registry }
        AccountFiles.removeTemporaryFiles(of: registryFile.path)
        let loaded = try registryFile.read()
        registry = loaded
        accountsPublisher.publish(loaded.restorable)
        return loaded
    }

    private func updateRegistry(_ change: (inout AccountRegistry) -> Void) throws(AccountStorageError) {
        var updated = try currentRegistry()
        change(&updated)
        guard updated != registry else { return }
        try registryFile.write(updated)
        registry = updated
        accountsPublisher.publish(updated.restorable)
    }

    /// Finishes wipes that a previous run left half-done, then returns what to restore.
    func restore() async throws(AccountStorageError) -> RestoredAccounts {
        let pending = try currentRegistry().accounts.filter(\.isPendingWipe)
        for account in pending {
            logger.notice("finishing an interrupted wipe account=\(account.userID)")
            try await wipe(account.userID)
        }
        return try currentRegistry().restoredAccounts
    }

    /// Records (or updates) an account whose session was just saved.
    func record(_ session: Session) throws(AccountStorageError) {
        let entry = StoredAccount(
            userID: session.userID, deviceID: session.deviceID, homeserverURL: session.homeserver.baseURL)
        try updateRegistry { $0.upsert(entry) }
    }

    /// Remembers `userID` as the active account (restored first at the next launch).
    func setActive(_ userID: UserID?) throws(AccountStorageError) {
        try updateRegistry { $0.active = userID }
    }

    // MARK: Databases

    /// The account's database, opened (and migrated) on first use.
    func database(for userID: UserID) async throws(AccountStorageError) -> AccountDatabase {
        if let open = databases[userID] { return open }
        let task: Task<Result<AccountDatabase, AccountStorageError>, Never>
        if let running = opening[userID] {
            task = running
        } else {
            let (directory, migrations, logger) = (dataDirectory, migrations, logger)
            task = Task {
                do throws(AccountStorageError) {
                    return .success(
                        try await AccountDatabase.open(
                            userID: userID, dataDirectory: directory, migrations: migrations, logger: logger))
                } catch {
                    return .failure(error)
                }
            }
            opening[userID] = task
        }
        let result = await task.value
        if opening[userID] == task { opening[userID] = nil }
        let database = try result.get()
        if databases[userID] == nil { databases[userID] = database }
        return databases[userID]!
    }

    /// The account's session store: its database and the key that seals its tokens.
    func sessionStore(for userID: UserID) async throws(AccountStorageError) -> SessionStore {
        let database = try await database(for: userID)
        let key: Secret<[UInt8]>
        do { key = try keyProvider.key(for: userID.rawValue) } catch { throw .store(error) }
        return try SessionStore(database: database, key: key)
    }

    /// Forgets the open database of an account that is no longer in use (switched away from).
    func release(_ userID: UserID) {
        databases[userID] = nil
    }

    // MARK: Wiping

    /// Deletes the account's local data: marks it pending-wipe in the registry first (so a
    /// crash half-way never restores a half-deleted account), deletes its folder and key, then
    /// removes it from the registry.
    func wipe(_ userID: UserID) async throws(AccountStorageError) {
        if var entry = try currentRegistry().account(userID), !entry.isPendingWipe {
            entry.isPendingWipe = true
            try updateRegistry { $0.upsert(entry) }
        }
        databases[userID] = nil
        opening[userID]?.cancel()
        try AccountFiles.removeTree(AccountDatabase.directory(for: userID, in: dataDirectory))
        do { try keyProvider.removeKey(for: userID.rawValue) } catch { throw .store(error) }
        try updateRegistry { $0.remove(userID) }
        logger.info("account data wiped account=\(userID)")
    }
}
