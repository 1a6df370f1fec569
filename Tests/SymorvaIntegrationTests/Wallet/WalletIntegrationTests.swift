import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import SymorvaWallet
import Testing

/// The wallet SDK against the real Synapse and the reference community server.
///
/// Serialized: fault injection is server-wide, so a fault armed by one test must not meet
/// another test's confirm.
@Suite(
    "Wallet against the reference server", .serialized,
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server start --test"))
struct WalletIntegrationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    /// Two members: `alice` credited with `credit` ORB, both with PINs set (sealed).
    func pair(
        credit: String = "100.00", aliceConfiguration: WalletConfiguration = WalletMember.configuration(),
        aliceClock: any RuntimeClock = SystemClock(), tracer: Tracer = Tracer()
    ) async throws -> (alice: WalletMember, bob: WalletMember) {
        let alice = try await WalletMember.register(
            "alice", in: environment, transport: transport, configuration: aliceConfiguration, clock: aliceClock,
            tracer: tracer)
        let bob = try await WalletMember.register("bob", in: environment, transport: transport)
        try await alice.wallet.setPIN(Secret("4711"))
        try await bob.wallet.setPIN(Secret("2580"))
        try await alice.credit(alice.memberID, credit)
        return (alice, bob)
    }

    @Test("A transfer settles and both balances change")
    func settles() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(
            to: bob.memberID, asset: WalletMember.orb, amount: .orb("25"))
        #expect(draft.amount == .orb("25.00"))
        #expect(draft.total == (try draft.amount.adding(draft.fee)))
        #expect(draft.verificationMethods == [.pin])

        let transfer = try await draft.confirm(with: .pin(Secret("4711"))).settledTransfer()
        #expect(transfer.summary.recipient == bob.memberID)
        #expect(transfer.summary.amount == .orb("25.00"))
        #expect(try await alice.orbBalance() == "75.00")
        #expect(try await bob.orbBalance() == "25.00")
        #expect(alice.wallet.pendingCommands.value.isEmpty)
        try await alice.waitForEmptyStore()
        // The settled transfer refreshed the observable balances by itself as well.
        try await alice.wallet.balances.wait { $0.first?.amount == .orb("75.00") }
    }

    @Test("A wrong PIN says how many attempts are left and keeps the draft confirmable")
    func wrongPIN() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
        let wrong = try await draft.confirm(with: .pin(Secret("0000")))
        #expect(wrong.failure == .wrongPIN(attemptsLeft: 4))
        #expect(draft.canConfirm)
        #expect(draft.lastRejection == .wrongPIN(attemptsLeft: 4))
        // A malformed PIN is refused on the device and costs no attempt.
        #expect(try await draft.confirm(with: .pin(Secret("12"))).failure == .verification(.malformedPIN))
        _ = try await draft.confirm(with: .pin(Secret("4711"))).settledTransfer()
        #expect(try await alice.orbBalance() == "95.00")
    }

    @Test("Five wrong PINs lock the wallet")
    func lockOut() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
        var failures: [TransferFailure?] = []
        for _ in 0..<5 { failures.append(try await draft.confirm(with: .pin(Secret("9999"))).failure) }
        #expect(
            failures == [
                .wrongPIN(attemptsLeft: 4), .wrongPIN(attemptsLeft: 3), .wrongPIN(attemptsLeft: 2),
                .wrongPIN(attemptsLeft: 1), .lockedOut,
            ])
        #expect(!draft.canConfirm)
        await #expect(throws: TransferError.failure(.lockedOut)) {
            _ = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("1"))
        }
        #expect(try await alice.orbBalance() == "100.00")
    }

    @Test("Insufficient balance: refused when preparing, and when confirming after the balance fell")
    func insufficientBalance() async throws {
        let (alice, bob) = try await pair(credit: "10.00")
        defer { for member in [alice, bob] { member.removeFiles() } }
        await #expect(throws: TransferError.failure(.insufficientFunds)) {
            _ = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("25"))
        }
        let first = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("8"))
        let second = try await alice.wallet.prepareTransfer(
            to: bob.memberID, asset: WalletMember.orb, amount: .orb("8"))
        _ = try await first.confirm(with: .pin(Secret("4711"))).settledTransfer()
        #expect(try await second.confirm(with: .pin(Secret("4711"))).failure == .insufficientFunds)
        #expect(try await alice.orbBalance() == "2.00")
        #expect(try await bob.orbBalance() == "8.00")
    }

    @Test("A draft expires on the device at its instant; confirming it sends nothing")
    func expiresOnDevice() async throws {
        let (alice, bob) = try await pair(
            aliceConfiguration: WalletMember.configuration(draftLifetime: .milliseconds(300)))
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
        try await draft.states.wait {
            if case .expired = $0 { return true }
            return false
        }
        #expect(try await draft.confirm(with: .pin(Secret("4711"))).failure == .draftExpired)
        #expect(try await alice.storedCommands().isEmpty)
        #expect(try await alice.orbBalance() == "100.00")
    }

    @Test("A draft the service has expired is refused at confirm as expired")
    func expiresOnService() async throws {
        // The device's clock stands still, so only the service knows the draft expired.
        let (alice, bob) = try await pair(
            aliceConfiguration: WalletMember.configuration(draftLifetime: .milliseconds(200)), aliceClock: ManualClock()
        )
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
        try await Task.sleep(for: .milliseconds(500))
        #expect(draft.canConfirm)
        #expect(try await draft.confirm(with: .pin(Secret("4711"))).failure == .draftExpired)
        try await alice.waitForEmptyStore()
        #expect(try await bob.orbBalance() == "0.00")
    }

    @Test("Commit then drop: the outcome is unknown, a query settles it, and there is exactly one ledger entry")
    func commitThenDrop() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(
            to: bob.memberID, asset: WalletMember.orb, amount: .orb("30"))
        try await alice.armConfirmFault("commit_then_drop")
        let outcome = try await draft.confirm(with: .pin(Secret("4711")))
        await alice.clearFaults()
        let pending = try #require(outcome.pending, "expected unknown, got \(outcome)")
        #expect(pending.summary.amount == .orb("30.00"))
        #expect(alice.wallet.pendingCommands.value.map(\.commandID).contains(pending.commandID))

        let resolved = try await pending.query()
        let transfer = try resolved.settledTransfer()
        #expect(transfer.commandID == pending.commandID)
        try await alice.wallet.pendingCommands.wait { $0.isEmpty }
        try await alice.waitForEmptyStore()

        let sent = try await alice.entries(of: pending.commandID)
        let received = try await bob.entries(of: pending.commandID)
        #expect(sent.map(\.direction) == [.outgoing])
        #expect(received.map(\.direction) == [.incoming])
        #expect(try await alice.orbBalance() == "70.00")
        #expect(try await bob.orbBalance() == "30.00")
    }

    @Test("A 5xx after the commit is unknown too, and resolves by itself through the backoff queries")
    func commitThenError() async throws {
        let (alice, bob) = try await pair()
        defer { for member in [alice, bob] { member.removeFiles() } }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("1"))
        try await alice.armConfirmFault("commit_then_error5xx")
        let outcome = try await draft.confirm(with: .pin(Secret("4711")))
        await alice.clearFaults()
        let pending = try #require(outcome.pending, "expected unknown, got \(outcome)")
        // No explicit query: the scheduled one resolves it.
        try await pending.states.wait { $0.isFinal }
        #expect(try await alice.entries(of: pending.commandID).count == 1)
        try await alice.waitForEmptyStore()
    }
}
