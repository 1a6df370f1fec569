import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaWallet
import Testing

/// The wallet through the ``FaultProxy`` in front of the reference services: Alice's requests to
/// the services meet injected faults; Bob talks to the services directly. Part of the serialized
/// wallet suite (its other tests arm server-wide faults that must not meet these confirms).
extension WalletIntegrationTests {
    /// Alice (credited 100 ORB) behind a fault proxy, Bob direct; both with PINs.
    private func proxiedPair() async throws -> (alice: WalletMember, bob: WalletMember, proxy: FaultProxy) {
        let proxy = try FaultProxy(inFrontOf: environment.servicesURL)
        let alice = try await WalletMember.register(
            "alice", in: environment, transport: transport, servicesURL: URL(string: proxy.url)!)
        let bob = try await WalletMember.register("bob", in: environment, transport: transport)
        try await alice.wallet.setPIN(Secret("4711"))
        try await bob.wallet.setPIN(Secret("2580"))
        try await bob.credit(alice.memberID, "100.00")
        return (alice, bob, proxy)
    }

    @Test(
        "The confirm's answer is lost after the service executed it: unknown, a query settles it, one ledger entry",
        arguments: [FaultProxy.Fault.dropResponse, .resetMidBody, .truncateBody])
    func confirmAnswerLost(fault: FaultProxy.Fault) async throws {
        let (alice, bob, proxy) = try await proxiedPair()
        defer {
            proxy.close()
            for member in [alice, bob] { member.removeFiles() }
        }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("9"))
        let rule = proxy.inject(fault, method: "POST", path: "/_symorva/v1/wallet/transfers/confirm")
        let outcome = try await draft.confirm(with: .pin(Secret("4711")))
        let pending = try #require(outcome.pending, "expected unknown, got \(outcome)")
        #expect(proxy.injectedCount(rule) == 1)
        #expect(proxy.forwardedCount(rule) == 1, "the service saw the confirm")

        let transfer = try await pending.query().settledTransfer()
        #expect(transfer.commandID == pending.commandID)
        try await alice.waitForEmptyStore()
        #expect(try await alice.entries(of: pending.commandID).count == 1)
        #expect(try await bob.entries(of: pending.commandID).count == 1)
        #expect(try await alice.orbBalance() == "91.00")
        #expect(proxy.forwardedCount(rule) == 1, "never confirmed again")
    }

    @Test("A 503 from in front of the service (never reached it) is unknown; the query finds nothing and nothing moves")
    func confirmNeverReached() async throws {
        let (alice, bob, proxy) = try await proxiedPair()
        defer {
            proxy.close()
            for member in [alice, bob] { member.removeFiles() }
        }
        let draft = try await alice.wallet.prepareTransfer(to: bob.memberID, asset: WalletMember.orb, amount: .orb("4"))
        let rule = proxy.inject(.status(503), method: "POST", path: "/_symorva/v1/wallet/transfers/confirm")
        let outcome = try await draft.confirm(with: .pin(Secret("4711")))
        let pending = try #require(outcome.pending, "a 5xx may follow an execution: expected unknown, got \(outcome)")
        #expect(proxy.forwardedCount(rule) == 0)

        let resolved = try await pending.query()
        #expect(resolved.failure == .notReceived)
        try await alice.waitForEmptyStore()
        #expect(try await alice.entries(of: pending.commandID).isEmpty)
        #expect(try await bob.entries(of: pending.commandID).isEmpty)
        #expect(try await alice.orbBalance() == "100.00")
    }

    @Test("A truncated or reset balances answer is a typed transport error; the next refresh succeeds")
    func balancesAnswerCut() async throws {
        let (alice, bob, proxy) = try await proxiedPair()
        defer {
            proxy.close()
            for member in [alice, bob] { member.removeFiles() }
        }
        proxy.inject(.truncateBody, method: "GET", path: "/_symorva/v1/wallet/balances")
        await #expect(throws: TransferError.transport(.responseDropped)) {
            _ = try await alice.wallet.refreshBalances()
        }
        proxy.inject(.resetMidBody, method: "GET", path: "/_symorva/v1/wallet/balances")
        await #expect(throws: TransferError.self) { _ = try await alice.wallet.refreshBalances() }
        #expect(try await alice.orbBalance() == "100.00")
    }
}
