import CSQLite
import Dispatch
import SymorvaRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One SQLite database file, as an actor whose code runs on its own ``StoreExecutor`` thread.
///
/// The connection is opened with `SQLITE_OPEN_NOMUTEX`: the actor serialises access, so SQLite
/// needs no locks of its own, and no method ever runs on the caller's thread. The file is in
/// WAL mode with `synchronous=NORMAL` (a commit survives a killed process at once and a power
/// loss from the next checkpoint on; never corrupt), foreign keys on, and a busy timeout. A
/// transaction whose rows must be on stable storage when it returns asks for
/// ``Durability/full`` (``transaction(durability:_:)``).
///
/// Statements are prepared once and cached by SQL text. For bulk writes use
/// ``withStatement(_:_:)`` inside ``transaction(durability:_:)``: bind, step, reset per row, with no
/// per-row allocation beyond the values themselves.
///
/// Code that needs several statements to run together takes the database `isolated`:
/// ```swift
/// try await db.transaction { db in
///     try db.execute("INSERT INTO rooms(id) VALUES (?)", [.text(roomID)])
///     try db.execute("UPDATE sync SET token = ?", [.text(token)])
/// }
/// ```
public actor SQLiteDatabase {
    /// Options applied when opening.
    public struct Configuration: Sendable {
        /// How long a statement waits for another connection's lock before failing with `.busy`.
        public var busyTimeout: Duration
        /// How many prepared statements are kept; the cache is emptied when it grows beyond.
        public var statementCacheLimit: Int
        /// The page size of a new database file (`PRAGMA page_size`, a power of two from 512 to
        /// 65,536), set before WAL mode is enabled; `nil` keeps SQLite's default (4,096). An
        /// existing file keeps the page size it was created with.
        public var pageSize: Int?
        /// The connection's page cache in KiB (`PRAGMA cache_size = -N`); `nil` keeps SQLite's
        /// default (2 MB).
        public var cacheSizeKiB: Int?
        /// Whether SQLite checkpoints the write-ahead log by itself inside the `COMMIT` that
        /// grows it past 1,000 pages (SQLite's default). When `false`
        /// (`PRAGMA wal_autocheckpoint = 0`) the owner of the database must checkpoint it
        /// (``checkpoint()``), or the log grows until the connection closes.
        public var checkpointsAutomatically: Bool

        /// Creates a configuration.
        public init(
            busyTimeout: Duration = .seconds(5), statementCacheLimit: Int = 256, pageSize: Int? = nil,
            cacheSizeKiB: Int? = nil, checkpointsAutomatically: Bool = true
        ) {
            self.busyTimeout = busyTimeout
            self.statementCacheLimit = statementCacheLimit
            self.pageSize = pageSize
            self.cacheSizeKiB = cacheSizeKiB
            self.checkpointsAutomatically = checkpointsAutomatically
        }

        /// The settings of one account's database, the file every feature of the account
        /// shares and whose largest tenant is the chat timeline (events stored with their raw
        /// content, tens of megabytes written by one initial sync). Measured in
        /// `docs/benchmarks.md`:
        ///
        /// - 8 KB pages for new files: half as many page splits and WAL frames as with 4 KB for
        ///   the same rows (an initial sync of 1,000 rooms ingests about 10% faster and
        ///   checkpoints about 25% faster). Existing files keep their page size.
        /// - A 16 MB page cache: with the default 2 MB a large sync spills index pages to the
        ///   WAL and reads them back.
        /// - No automatic checkpoint: SQLite would copy the whole WAL into the database inside
        ///   the `COMMIT` of a large sync, on the path between the response and the updated
        ///   conversation list. The account's sync loop checkpoints after each committed
        ///   response instead, and every ingest starts with one.
        public static let account = Configuration(
            pageSize: 8192, cacheSizeKiB: 16 * 1024, checkpointsAutomatically: false)

        /// The per-connection pragmas these options set after opening (cache size, automatic
        /// checkpoint), for code that opens the same file with the C API (the benchmarks'
        /// baseline) and must match them.
        package var connectionPragmas: String {
            var pragmas = ""
            if let cacheSizeKiB { pragmas += "PRAGMA cache_size = -\(cacheSizeKiB);" }
            if !checkpointsAutomatically { pragmas += "PRAGMA wal_autocheckpoint = 0;" }
            return pragmas
        }
    }

    /// Counters for tests and benchmarks.
    public struct Statistics: Sendable, Equatable {
        /// Statements compiled (cache misses).
        public var statementsPrepared: Int
        /// Statements served from the cache.
        public var statementCacheHits: Int
    }

    /// The thread this database runs on.
    public nonisolated let executor: StoreExecutor
    /// The file path (or `:memory:`).
    public nonisolated let path: String

    /// Runs the actor on its store thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let configuration: Configuration
    private let logger: Logger
    private let handles = SQLiteHandles()
    private var connection: OpaquePointer? { handles.connection }
    private var transactionDepth = 0
    /// Whether the connection runs `synchronous=FULL` now (inside a durable transaction).
    private var isFullySynchronous = false
    private var commitProbe: (@Sendable (isolated SQLiteDatabase, Int) -> Void)?
    private var statistics = Statistics(statementsPrepared: 0, statementCacheHits: 0)

    private init(path: String, configuration: Configuration, executor: StoreExecutor, logger: Logger) {
        self.path = path
        self.configuration = configuration
        self.executor = executor
        self.logger = logger
    }

    /// Opens (creating if needed) the database at `path` and applies `migrations`.
    ///
    /// - Throws: `.open` when the file cannot be opened, `.newerSchema` when it was written by
    ///   a newer SDK, `.migration` when a migration fails.
    public static func open(
        path: String,
        migrations: [Migration] = [],
        configuration: Configuration = Configuration(),
        executor: StoreExecutor = StoreExecutor(),
        logger: Logger = Logger(category: "store")
    ) async throws(StoreError) -> SQLiteDatabase {
        let database = SQLiteDatabase(path: path, configuration: configuration, executor: executor, logger: logger)
        try await database.openConnection()
        try await database.migrate(migrations)
        return database
    }

    private func openConnection() throws(StoreError) {
        _ = sqliteLibraryConfigured
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            if let handle { sqlite3_close_v2(handle) }
            throw .open(code: code)
        }
        handles.connection = handle
        sqlite3_extended_result_codes(handle, 1)
        let (seconds, attoseconds) = configuration.busyTimeout.components
        sqlite3_busy_timeout(handle, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        do {
            if let pageSize = configuration.pageSize {
                // Only a file without pages takes a new page size, and only before WAL mode.
                try executeScript("PRAGMA page_size = \(pageSize)")
            }
            let mode = try queryOne("PRAGMA journal_mode=WAL") { $0.string(0) }
            if path != ":memory:" && !path.isEmpty && mode?.lowercased() != "wal" { throw StoreError.open(code: -1) }
            try executeScript("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;" + configuration.connectionPragmas)
        } catch let error as StoreError {
            logger.error("store configuration failed error=\(error)")
            throw error
        } catch {
            throw .open(code: -1)
        }
    }

    // MARK: Running statements

    /// Runs one statement with `bindings`, discarding any rows.
    public func execute(_ sql: String, _ bindings: [SQLiteValue] = []) throws(StoreError) {
        try withStatement(sql) { statement throws(StoreError) in try statement.run(bindings) }
    }

    /// Runs several `;`-separated statements without caching them (schema scripts, pragmas).
    public func executeScript(_ sql: String) throws(StoreError) {
        let connection = try openHandle()
        let code = sqlite3_exec(connection, sql, nil, nil, nil)
        guard code == SQLITE_OK else {
            throw StoreError.sqlite(sqlite3_extended_errcode(connection), connection: connection)
        }
    }

    /// Calls `row` for each row of `sql`.
    public func query(
        _ sql: String, _ bindings: [SQLiteValue] = [], _ row: (SQLiteRow) throws(StoreError) -> Void
    ) throws(StoreError) {
        try withStatement(sql) { statement throws(StoreError) in
            try statement.bind(bindings)
            while try statement.step() { try row(statement.row) }
        }
    }

    /// Maps every row of `sql` to a value.
    public func queryAll<T>(
        _ sql: String, _ bindings: [SQLiteValue] = [], _ transform: (SQLiteRow) throws(StoreError) -> T
    ) throws(StoreError) -> [T] {
        var results: [T] = []
        try query(sql, bindings) { row throws(StoreError) in results.append(try transform(row)) }
        return results
    }

    /// Maps the first row of `sql`, or returns `nil` when there is none.
    public func queryOne<T>(
        _ sql: String, _ bindings: [SQLiteValue] = [], _ transform: (SQLiteRow) throws(StoreError) -> T
    ) throws(StoreError) -> T? {
        try withStatement(sql) { statement throws(StoreError) -> T? in
            try statement.bind(bindings)
            return try statement.step() ? transform(statement.row) : nil
        }
    }

    /// Lends the cached prepared statement for `sql` to `body`; the fast path for bulk work.
    ///
    /// The statement comes with no bindings, and is reset and its bindings cleared after `body`,
    /// so a statement never holds a read lock, nor a borrowed buffer
    /// (``SQLiteStatement/bind(unsafeBorrowing:at:)``), between calls.
    public func withStatement<T>(
        _ sql: String, _ body: (SQLiteStatement) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let connection = try openHandle()
        var prepared = try statement(for: sql, connection: connection)
        var isPrivateCopy = false
        if handles.lent.contains(prepared.handle) {
            // The same SQL is already lent to an enclosing call: use a private statement so that
            // the outer one keeps its bindings and position.
            prepared = PreparedStatement(handle: try prepare(sql, connection: connection, persistent: false))
            isPrivateCopy = true
        }
        handles.lent.append(prepared.handle)
        let statement = SQLiteStatement(prepared, connection: connection)
        // Reset in case a step failed half-way; bindings were cleared when the last body returned
        // (a fresh statement has none).
        statement.reset()
        defer {
            statement.reset()
            statement.clearBindings()
            handles.lent.removeLast()
            if isPrivateCopy { prepared.finalize() }
        }
        return try body(statement)
    }

    /// The row ID of the last successful `INSERT`.
    public var lastInsertRowID: Int64 { connection.map { sqlite3_last_insert_rowid($0) } ?? 0 }

    /// Rows changed by the last `INSERT`, `UPDATE` or `DELETE`.
    public var changes: Int { connection.map { Int(sqlite3_changes($0)) } ?? 0 }

    /// Cache counters so far.
    public var statementStatistics: Statistics { statistics }

    /// Copies the write-ahead log into the database file: a passive checkpoint, which never
    /// waits for readers or writers of other connections and copies what it can. Needed when
    /// the configuration turns automatic checkpoints off
    /// (``Configuration/checkpointsAutomatically``); harmless otherwise.
    public func checkpoint() throws(StoreError) {
        _ = try queryOne("PRAGMA wal_checkpoint(PASSIVE)") { $0.int(0) }
    }

    // MARK: Transactions

    /// When a committed transaction is on stable storage.
    public enum Durability: Sendable, Hashable {
        /// The connection's `synchronous=NORMAL`: the commit survives a killed process (it is in
        /// the write-ahead log), but a power loss or an operating-system crash before the next
        /// checkpoint can roll it back. The right cost for data that can be fetched again (a
        /// `/sync` batch and its token, which move together).
        case normal
        /// `synchronous=FULL` for this transaction: the write-ahead log is synced to the disk
        /// before `COMMIT` returns, so the rows survive a power loss. For rows that must exist
        /// before a request leaves the device (a wallet command, a queued message).
        case full
    }

    /// Runs `body` in a transaction: `BEGIN IMMEDIATE` … `COMMIT`, or `ROLLBACK` when it throws.
    ///
    /// The body is synchronous on purpose: nothing else can run on the database between its
    /// statements. Nested calls become savepoints, so helpers may open their own transaction.
    ///
    /// `durability` applies to the outermost transaction: SQLite's `PRAGMA synchronous` is a
    /// setting of the connection that cannot change inside a transaction, so the database
    /// switches it to `FULL` before `BEGIN` and back after the commit (or rollback), on its own
    /// thread, where no other statement can run in between. A nested call inherits the
    /// durability of the transaction it is part of.
    public func transaction<T>(
        durability: Durability = .normal,
        _ body: @Sendable (isolated SQLiteDatabase) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        let depth = transactionDepth
        if depth > 0 && durability == .full && !isFullySynchronous {
            logger.error("a durable transaction nested in a normal one commits with the outer one's durability")
        }
        let switchesSynchronous = depth == 0 && durability == .full
        if switchesSynchronous {
            try executeScript("PRAGMA synchronous=FULL")
            isFullySynchronous = true
        }
        defer {
            if switchesSynchronous {
                // Cannot fail outside a transaction; a failure would only leave FULL (safe) on.
                do {
                    try executeScript("PRAGMA synchronous=NORMAL")
                    isFullySynchronous = false
                } catch {
                    logger.error("restoring synchronous=NORMAL failed error=\(error)")
                }
            }
        }
        let savepoint = "symorva_\(depth)"
        try execute(depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT \(savepoint)")
        transactionDepth += 1
        defer { transactionDepth -= 1 }
        let result: T
        do {
            result = try body(self)
            if depth == 0, let commitProbe {
                let level = try queryOne("PRAGMA synchronous") { $0.int(0) } ?? -1
                commitProbe(self, level)
            }
        } catch {
            rollback(savepoint: depth == 0 ? nil : savepoint)
            throw error
        }
        do {
            try execute(depth == 0 ? "COMMIT" : "RELEASE \(savepoint)")
        } catch {
            rollback(savepoint: depth == 0 ? nil : savepoint)
            throw error
        }
        return result
    }

    /// Installs (or with `nil` removes) a probe called inside every outermost transaction just
    /// before its `COMMIT`, with the connection's `PRAGMA synchronous` as read in that
    /// transaction (1 `NORMAL`, 2 `FULL`): tests prove with it that a row was committed durably.
    package func setCommitProbe(_ probe: (@Sendable (isolated SQLiteDatabase, _ synchronous: Int) -> Void)?) {
        commitProbe = probe
    }

    private func rollback(savepoint: String?) {
        guard let connection else { return }
        let sql = savepoint.map { "ROLLBACK TO \($0); RELEASE \($0)" } ?? "ROLLBACK"
        let code = sqlite3_exec(connection, sql, nil, nil, nil)
        if code != SQLITE_OK {
            // SQLite may already have rolled back (after SQLITE_FULL, for instance).
            logger.debug("rollback reported code=\(code)")
        }
    }

    // MARK: Internals

    private func openHandle() throws(StoreError) -> OpaquePointer {
        guard let connection else { throw .open(code: SQLITE_MISUSE) }
        return connection
    }

    private func statement(for sql: String, connection: OpaquePointer) throws(StoreError) -> PreparedStatement {
        if let cached = handles.statements[sql] {
            statistics.statementCacheHits += 1
            return cached
        }
        if handles.statements.count >= configuration.statementCacheLimit { handles.finalizeStatements() }
        let prepared = PreparedStatement(handle: try prepare(sql, connection: connection, persistent: true))
        statistics.statementsPrepared += 1
        handles.statements[sql] = prepared
        return prepared
    }

    private func prepare(_ sql: String, connection: OpaquePointer, persistent: Bool) throws(StoreError) -> OpaquePointer
    {
        var handle: OpaquePointer?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let code = sqlite3_prepare_v3(connection, sql, -1, flags, &handle, nil)
        guard code == SQLITE_OK, let handle else {
            if let handle { sqlite3_finalize(handle) }
            switch code & 0xFF {
            case SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_BUSY, SQLITE_LOCKED, SQLITE_FULL:
                throw StoreError.sqlite(code, connection: connection)
            default: break
            }
            throw .prepare(
                code: code, statement: StoreError.summary(sql), message: StoreError.message(connection))
        }
        return handle
    }
}

/// Process-wide SQLite settings, applied once before the first connection opens (SQLite accepts
/// them only before it initializes).
///
/// - Allocation statistics off: with them on (SQLite's default), every allocation and free
///   inside SQLite takes one global mutex to update counters that nothing here reads — about
///   two million lock/unlock pairs for one large initial sync, and contention between accounts'
///   store threads. `sqlite3_memory_used()` and the soft heap limit stop working; neither is
///   used.
private let sqliteLibraryConfigured: Bool = {
    _ = symorva_sqlite3_disable_memory_statistics()
    return true
}()

/// The connection and its cached statements, closed when the database actor goes away.
///
/// Safety of `@unchecked Sendable` (a C boundary object): only ``SQLiteDatabase`` holds it,
/// and touches it only on its executor's thread; `deinit` runs when the actor is released,
/// after its last job, so no other access can overlap.
private final class SQLiteHandles: @unchecked Sendable {
    var connection: OpaquePointer?
    var statements: [String: PreparedStatement] = [:]
    /// Statements currently lent to a `withStatement` body (innermost last).
    var lent: [OpaquePointer] = []

    /// Empties the cache, keeping the statements that are lent out right now.
    func finalizeStatements() {
        statements = statements.filter { entry in
            if lent.contains(entry.value.handle) { return true }
            entry.value.finalize()
            return false
        }
    }

    deinit {
        for statement in statements.values { statement.finalize() }
        if let connection { sqlite3_close_v2(connection) }
    }
}

/// One step of a database schema: the SQL that takes version `version - 1` to `version`.
///
/// Versions start at 1 and increase by one. The schema version is SQLite's
/// `PRAGMA user_version`; each migration runs in its own transaction together with the
/// version bump, so a crash leaves the database at the previous version, never in between.
public struct Migration: Sendable, Hashable {
    /// The schema version this migration produces.
    public var version: Int
    /// A short name for logs (`create_timeline`).
    public var name: String
    /// The `;`-separated statements.
    public var sql: String

    /// Creates a migration.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

extension SQLiteDatabase {
    /// The schema version (`PRAGMA user_version`).
    public func schemaVersion() throws(StoreError) -> Int {
        try queryOne("PRAGMA user_version") { $0.int(0) } ?? 0
    }

    /// Applies the migrations above the current schema version, in order, one transaction each.
    ///
    /// - Throws: `.invalidMigrations` unless versions run 1, 2, 3, …; `.newerSchema` when the
    ///   file's version is above the last migration (a newer SDK wrote it: refuse rather than
    ///   misread it); `.migration(version:code:)` when a step fails (it is rolled back).
    public func migrate(_ migrations: [Migration]) throws(StoreError) {
        guard migrations.enumerated().allSatisfy({ $0.element.version == $0.offset + 1 }) else {
            throw .invalidMigrations
        }
        let current = try schemaVersion()
        let supported = migrations.last?.version ?? 0
        guard current <= supported else { throw .newerSchema(found: current, supported: supported) }
        for migration in migrations where migration.version > current {
            do {
                try transaction { db throws(StoreError) in
                    try db.executeScript(migration.sql)
                    try db.executeScript("PRAGMA user_version = \(migration.version)")
                }
            } catch {
                throw .migration(version: migration.version, code: Self.code(of: error))
            }
        }
    }

    private static func code(of error: StoreError) -> Int32 {
        switch error {
        case .step(let code), .constraint(let code, _), .prepare(let code, _, _), .open(let code): code
        case .full: SQLITE_FULL
        case .corrupt: SQLITE_CORRUPT
        case .busy: SQLITE_BUSY
        default: SQLITE_ERROR
        }
    }
}

/// A serial executor that runs every job on one dedicated thread.
///
/// ``SQLiteDatabase`` uses one as its actor executor, so SQLite is only ever called from that
/// thread (the connection is opened with `SQLITE_OPEN_NOMUTEX`) and never from the caller's.
/// Several databases may share an executor; an account's stores usually do.
public final class StoreExecutor: SerialExecutor {
    private let shared: Shared

    /// Starts the executor's thread.
    public init() {
        shared = Shared()
        let shared = self.shared
        DedicatedThread.start { shared.run() }
        shared.started.wait()
    }

    deinit { shared.stop() }

    /// Queues a job for the thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        shared.push(UnownedJob(job), executor: asUnownedSerialExecutor())
    }

    /// This executor, unowned, for actors to return from `unownedExecutor`.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on the executor's thread (used by `assumeIsolated`).
    public func checkIsolated() {
        precondition(isCurrentThread, "not on the store executor's thread")
    }

    /// Whether the calling code runs on this executor's thread.
    public var isCurrentThread: Bool { shared.threadID.load(ordering: .acquiring) == DedicatedThread.currentID() }

    /// The job queue, shared by the executor and its thread. The thread holds it (not the
    /// executor) so that the executor can be released, which stops the thread.
    private final class Shared: Sendable {
        struct Queue {
            var jobs: [(job: UnownedJob, executor: UnownedSerialExecutor)] = []
            var stopped = false
        }
        let queue = Lock(Queue())
        let wakeUp = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let threadID = Atomic<UInt>(0)

        func push(_ job: UnownedJob, executor: UnownedSerialExecutor) {
            queue.withLock { $0.jobs.append((job, executor)) }
            wakeUp.signal()
        }

        func stop() {
            queue.withLock { $0.stopped = true }
            wakeUp.signal()
        }

        func run() {
            threadID.store(DedicatedThread.currentID(), ordering: .releasing)
            started.signal()
            while true {
                wakeUp.wait()
                let (batch, stopped) = queue.withLock { queue in
                    defer { queue.jobs.removeAll(keepingCapacity: true) }
                    return (queue.jobs, queue.stopped)
                }
                for entry in batch { entry.job.runSynchronously(on: entry.executor) }
                if stopped { return }
            }
        }
    }
}

extension SQLiteDatabase {
    /// Runs `body` on the database's thread with the database isolated: several statements
    /// with nothing else in between (one connection, one thread), without a transaction.
    public func run<T: Sendable>(
        _ body: @Sendable (isolated SQLiteDatabase) throws(StoreError) -> T
    ) throws(StoreError) -> T {
        try body(self)
    }
}
