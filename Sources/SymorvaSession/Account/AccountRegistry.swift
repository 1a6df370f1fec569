import Foundation
import SymorvaCrypto
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One account known on this device, as `accounts.json` lists it.
package struct StoredAccount: Sendable, Hashable, Codable {
    /// The account's Matrix user ID.
    package var userID: UserID
    /// Its device on this installation.
    package var deviceID: DeviceID
    /// The homeserver the account lives on.
    package var homeserverURL: HomeserverURL
    /// Set before the account's folder is deleted: an account marked so is never restored, and
    /// its wipe is finished at the next launch if the process died half-way.
    package var isPendingWipe: Bool

    /// A stored account.
    package init(userID: UserID, deviceID: DeviceID, homeserverURL: HomeserverURL, isPendingWipe: Bool = false) {
        self.userID = userID
        self.deviceID = deviceID
        self.homeserverURL = homeserverURL
        self.isPendingWipe = isPendingWipe
    }
}

/// The accounts known on this device and which one is active: `<data>/accounts.json`.
///
/// A plain value read and written whole; ``AccountRegistryFile`` does the file work. Every write
/// goes to a temporary file that is synced and renamed over the old one, so a crash leaves
/// either the old or the new list, never a torn one.
package struct AccountRegistry: Sendable, Hashable, Codable {
    /// The file format version.
    package var version: Int
    /// Every account, in the order they were added (including those pending a wipe).
    package var accounts: [StoredAccount]
    /// The account that was active last.
    package var active: UserID?

    /// An empty registry.
    package init(accounts: [StoredAccount] = [], active: UserID? = nil) {
        self.version = 1
        self.accounts = accounts
        self.active = active
    }

    /// The accounts that can be restored (not pending a wipe).
    package var restorable: [StoredAccount] { accounts.filter { !$0.isPendingWipe } }

    /// The entry of `userID`.
    package func account(_ userID: UserID) -> StoredAccount? { accounts.first { $0.userID == userID } }

    /// Adds the account at the end, or updates it in place (keeping its position).
    package mutating func upsert(_ account: StoredAccount) {
        if let index = accounts.firstIndex(where: { $0.userID == account.userID }) {
            accounts[index] = account
        } else {
            accounts.append(account)
        }
    }

    /// Removes the account (and clears `active` if it was the active one).
    package mutating func remove(_ userID: UserID) {
        accounts.removeAll { $0.userID == userID }
        if active == userID { active = nil }
    }

    /// What the app flow restores: every restorable account and the last active one.
    package var restoredAccounts: RestoredAccounts {
        RestoredAccounts(accounts: restorable.map(\.userID), active: active)
    }
}

/// Reads and writes `accounts.json` atomically.
package struct AccountRegistryFile: Sendable {
    /// The file's path.
    package let path: String

    /// The registry file at `path`.
    package init(path: String) { self.path = path }

    /// The registry, or an empty one when the file does not exist yet.
    package func read() throws(AccountStorageError) -> AccountRegistry {
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) != 0 && errno == ENOENT { return AccountRegistry() }
            throw .fileSystem(operation: "read accounts.json", errno: errno)
        }
        do {
            let registry = try JSONDecoder().decode(AccountRegistry.self, from: data)
            guard registry.version == 1 else { throw AccountStorageError.unreadableRegistry(reason: "version") }
            return registry
        } catch let error as AccountStorageError {
            throw error
        } catch {
            throw .unreadableRegistry(reason: "not an account list")
        }
    }

    /// Replaces the file with `registry`: temporary file, `fsync`, `rename`, `fsync` of the folder.
    package func write(_ registry: AccountRegistry) throws(AccountStorageError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(registry) } catch { throw .unreadableRegistry(reason: "encoding") }
        try AccountFiles.writeAtomically(Array(data), to: path)
    }
}

/// Every account's local data on this device: the registry (`accounts.json`), one database per
/// account, the keys that seal their secrets, and wiping.
///
/// One per community. Databases are opened once per account and shared by whoever needs them
/// (the sign-in flow that saves a new session, the account's running session, sign-out);
/// concurrent first opens of one account join a single open.
package actor AccountStorage {
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
    package init(dataDirectory: String, keyProvider: any KeyProvider, migrations: AccountMigrations, logger: Logger) {
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
        do { key = try keyProvider.key(for: userID.rawValue) } catch { throw .secrets(error) }
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
        FaultPoint.accountWipe.reach()
        do { try keyProvider.removeKey(for: userID.rawValue) } catch { throw .secrets(error) }
        try updateRegistry { $0.remove(userID) }
        logger.info("account data wiped account=\(userID)")
    }
}
