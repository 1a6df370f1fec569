import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaWallet

/// A wallet whose account database fills up (`PRAGMA max_page_count`) between preparing and
/// confirming: the command cannot be recorded, so the confirmation must never leave, the draft
/// must stay confirmable, and once there is room again the same draft confirms.
@Suite("Confirming with a full disk")
struct WalletStorageFullTests {
    /// A draft ID larger than a page of the database, so that recording the command needs new pages.
    static let draftID = "d_" + String(repeating: "a", count: 20_000)

    @Test("A confirmation that cannot be recorded is a typed failure, sends nothing and keeps the draft")
    func confirmWithFullDisk() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        let draft = WalletFixtures.draftJSON.replacingOccurrences(of: "d_abc", with: Self.draftID)
        transport.on("POST", "/_symorva/v1/wallet/transfers/prepare") { _ in .json(200, draft) }
        let transfer = WalletFixtures.transferJSON.replacingOccurrences(of: "d_abc", with: Self.draftID)
        transport.on("POST", "/_symorva/v1/wallet/transfers/confirm") { request in
            let commandID =
                (try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])?[
                    "command_id"] as? String ?? ""
            let settled = transfer.replacingOccurrences(of: WalletFixtures.commandID.rawValue, with: commandID)
            return .json(200, #"{"status": "settled", "command_id": "\#(commandID)", "transfer": \#(settled)}"#)
        }
        let clock = ManualClock(now: .seconds(100))
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: .never)
        let database = try await SQLiteDatabase.open(path: ":memory:", configuration: .account)
        let scope = AccountScope(label: WalletFixtures.alice.rawValue)
        let wallet = try await AccountWallet(
            member: WalletFixtures.alice, services: services, database: database, scope: scope,
            configuration: WalletConfiguration(assets: [WalletFixtures.orb]), clock: clock)
        defer { wallet.shutdown() }
        let confirms = { transport.requests("POST", "/_symorva/v1/wallet/transfers/confirm").count }

        try await fillUp(database)
        // Preparing writes nothing: it works on a full disk.
        let prepared = try await wallet.prepareTransfer(
            to: WalletFixtures.bob, asset: WalletFixtures.orb, amount: WalletFixtures.amount("25.00"))
        let refused = try await prepared.confirm(with: .pin(Secret("1234")))
        guard case .failed(.storeUnavailable) = refused else {
            Issue.record("expected a store failure, got \(refused)")
            return
        }
        #expect(confirms() == 0, "a confirmation left without its command on record")
        #expect(try await WalletStore.open(on: database).pendingCommands().isEmpty)

        try await makeRoom(in: database)
        let outcome = try await prepared.confirm(with: .pin(Secret("1234")))
        guard case .settled = outcome else {
            Issue.record("expected settled, got \(outcome)")
            return
        }
        #expect(confirms() == 1)
    }
}

/// Fills `database` to its page limit (`PRAGMA max_page_count`): a write that needs a new page
/// fails with `SQLITE_FULL` until ``makeRoom(in:)``.
func fillUp(_ database: SQLiteDatabase) async throws {
    try await database.executeScript("CREATE TABLE IF NOT EXISTS filler(x BLOB)")
    let pages = try await database.queryOne("PRAGMA page_count") { $0.int(0) } ?? 0
    try await database.executeScript("PRAGMA max_page_count = \(pages + 64)")
    try await database.run { db throws(StoreError) in
        while true {
            do throws(StoreError) {
                try db.execute("INSERT INTO filler VALUES (randomblob(3000))")
            } catch {
                guard error == .full else { throw error }
                return
            }
        }
    }
}

/// Gives the database room again, as freeing disk space does.
func makeRoom(in database: SQLiteDatabase) async throws {
    try await database.executeScript("PRAGMA max_page_count = 1073741823")
}
