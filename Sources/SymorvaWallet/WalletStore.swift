import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The wallet's part of the account database: confirmations whose outcome the device does not
/// know yet.
///
/// A row is written **before** the confirm request leaves (the machine emits `sendConfirm`
/// only after `commandPersisted`) and removed only when the service has given a definitive
/// answer. So after a crash at any point, every command that may have executed is here, and
/// ``AccountWallet/resumePendingCommands()`` queries each one until it is resolved.
///
/// What is stored is the command ID and the transfer's figures (``TransferSummary``): enough to
/// show the member what is pending and to query it. Never the PIN, never the sealed
/// confirmation, never the draft's sealing key.
///
/// The table lives in the account's database file, versioned per feature: its ``schema`` is
/// what the wallet's module factory declares, and the account database applies it when it
/// opens, before the wallet is made.
package struct WalletStore: Sendable {
    /// The feature name under which the wallet's schema version is kept.
    package static let feature = "wallet"

    /// The wallet's migrations, in order.
    package static let migrations: [Migration] = [
        Migration(
            version: 1, name: "wallet_pending_commands",
            sql: """
                CREATE TABLE wallet_pending_commands (
                    command_id TEXT PRIMARY KEY,             -- lowercased UUID, generated on the device
                    draft_id TEXT NOT NULL,
                    recipient TEXT NOT NULL,                 -- Matrix user ID
                    asset TEXT NOT NULL,                     -- asset code
                    asset_precision INTEGER NOT NULL,
                    amount_minor INTEGER NOT NULL,           -- what the recipient receives
                    fee_minor INTEGER NOT NULL,
                    total_minor INTEGER NOT NULL,            -- amount + fee: what leaves the balance
                    created_at_ms INTEGER NOT NULL,          -- wall clock, Unix milliseconds
                    state TEXT NOT NULL CHECK (state IN ('confirming', 'unknown'))
                ) STRICT;
                CREATE INDEX wallet_pending_commands_created ON wallet_pending_commands(created_at_ms);
                """)
    ]

    /// The wallet's tables as its module factory declares them (feature `wallet`).
    package static let schema = AccountMigrations.Feature(name: feature, migrations: migrations)

    /// Where a stored command is, as far as the device knows.
    package enum StoredState: String, Sendable, Hashable {
        /// Written before the confirm request; the request may or may not have left.
        case confirming
        /// The confirm request had no definitive answer; the command is being queried.
        case unknown
    }

    /// One row of the table.
    package struct StoredCommand: Sendable, Hashable {
        /// The command and its figures.
        package var pending: PendingCommand
        /// When the row was written, in Unix milliseconds.
        package var createdAtMilliseconds: Int64
        /// Where the command is.
        package var state: StoredState
    }

    /// The account's database.
    package let database: SQLiteDatabase
    /// The clock that stamps `created_at_ms`.
    private let wallClock: any WallClock
    private let logger = Logger(category: "wallet.store")

    private init(database: SQLiteDatabase, wallClock: any WallClock) {
        self.database = database
        self.wallClock = wallClock
    }

    /// The store on `database`. On an account database the ``schema`` is already applied; on
    /// one the community did not open (tools, tests) it is applied here, the same way.
    ///
    /// - Throws: what ``/SymorvaFeatureKit/AccountMigrations/apply(to:)`` throws.
    package static func open(
        on database: SQLiteDatabase, wallClock: any WallClock = SystemWallClock()
    ) async throws(StoreError) -> WalletStore {
        try await schema.apply(to: database)
        return WalletStore(database: database, wallClock: wallClock)
    }

    /// Records `pending` as `confirming`. A command ID that is already stored is refused with a
    /// constraint error: a command ID names one confirmation, ever.
    ///
    /// The row is written durably (``/SymorvaStore/SQLiteDatabase/Durability/full``): it is on
    /// stable storage before the confirm request can leave, so not even a power loss makes the
    /// device forget a command the service may have executed.
    package func insert(_ pending: PendingCommand, createdAtMilliseconds: Int64? = nil) async throws(StoreError) {
        let summary = pending.summary
        let created = createdAtMilliseconds ?? wallClock.now.millisecondsSince1970
        try await database.transaction(durability: .full) { db throws(StoreError) in
            try db.execute(
                """
                INSERT INTO wallet_pending_commands(command_id, draft_id, recipient, asset, asset_precision,
                    amount_minor, fee_minor, total_minor, created_at_ms, state)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'confirming')
                """,
                [
                    .text(pending.commandID.rawValue), .text(summary.draftID.rawValue),
                    .text(summary.recipient.rawValue),
                    .text(summary.asset.code), .int(summary.asset.precision), .integer(summary.amount.minorUnits),
                    .integer(summary.fee.minorUnits), .integer(summary.total.minorUnits), .integer(created),
                ])
        }
    }

    /// Notes that the command's confirm request had no definitive answer. Does nothing when the
    /// row is gone (the command was resolved in the meantime).
    package func markUnknown(_ commandID: CommandID) async throws(StoreError) {
        try await database.execute(
            "UPDATE wallet_pending_commands SET state = 'unknown' WHERE command_id = ?", [.text(commandID.rawValue)])
    }

    /// Removes the command: the service gave a definitive answer. Removing a missing row is not
    /// an error (a restart may resolve a command twice).
    package func remove(_ commandID: CommandID) async throws(StoreError) {
        try await database.execute(
            "DELETE FROM wallet_pending_commands WHERE command_id = ?", [.text(commandID.rawValue)])
    }

    /// Every stored command, oldest first. A row that cannot be read back (which only a damaged
    /// file produces) is logged by its position and skipped.
    package func storedCommands() async throws(StoreError) -> [StoredCommand] {
        let rows = try await database.queryAll(
            """
            SELECT command_id, draft_id, recipient, asset, asset_precision, amount_minor, fee_minor, total_minor,
                created_at_ms, state
            FROM wallet_pending_commands ORDER BY created_at_ms, command_id
            """
        ) { row throws(StoreError) -> StoredCommand? in Self.decode(row) }
        let readable = rows.compactMap { $0 }
        if readable.count != rows.count {
            logger.error("skipped unreadable pending wallet commands count=\(rows.count - readable.count)")
        }
        return readable
    }

    /// The stored commands' ``PendingCommand`` values, oldest first.
    package func pendingCommands() async throws(StoreError) -> [PendingCommand] {
        try await storedCommands().map(\.pending)
    }

    private static func decode(_ row: SQLiteRow) -> StoredCommand? {
        guard let commandID = CommandID(uuidString: row.string(0)),
            let state = StoredState(rawValue: row.string(9))
        else { return nil }
        let precision = row.int(4)
        guard let amount = try? Amount(minorUnits: row.int64(5), precision: precision),
            let fee = try? Amount(minorUnits: row.int64(6), precision: precision),
            let total = try? Amount(minorUnits: row.int64(7), precision: precision)
        else { return nil }
        let summary = TransferSummary(
            draftID: DraftID(row.string(1)), recipient: UserID(stored: row.string(2)),
            asset: Asset(code: row.string(3), precision: precision), amount: amount, fee: fee, total: total)
        return StoredCommand(
            pending: PendingCommand(commandID: commandID, summary: summary), createdAtMilliseconds: row.int64(8),
            state: state)
    }
}
