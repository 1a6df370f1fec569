import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaTransport
import Testing

/// A wallet confirmation that meets the reference server's rate limit (`low` profile, what
/// `Scripts/test` starts): refused before anything is recorded, so the transfer stays
/// confirmable, never unknown. Fresh members, so no other test meets the emptied bucket.
@Suite(
    "Wallet rate limits against the reference server", .serialized,
    .requires(
        DevEnvironment.hasLowServicesRateLimits,
        "needs the services with SYMORVA_SERVICES_RATE_LIMIT=low (what Scripts/test starts)"))
struct WalletRateLimitIntegrationTests {
    let environment = DevEnvironment.current!
    let transport = CurlTransport()

    /// Empties `member`'s `writes` bucket with prepares that are never sent again, until one is
    /// answered 429.
    func exhaustWrites(of member: WalletMember, to recipient: UserID) async throws {
        let burner = CommunityServicesClient(
            baseURL: environment.servicesURL, transport: transport,
            tokenSource: HomeserverOpenIDSource(
                account: member.account, environment: environment, transport: transport),
            rateLimitPolicy: .never)
        let body = Array(#"{"recipient": "\#(recipient.rawValue)", "asset": "ORB", "amount": "1.00"}"#.utf8)
        for _ in 0..<100 {
            do throws(ServicesError) {
                _ = try await burner.send(.post, "/_symorva/v1/wallet/transfers/prepare", json: body)
            } catch {
                guard case .rateLimited = error else { throw error }
                return
            }
        }
        throw IntegrationFailure("100 quick prepares were never limited")
    }

    @Test("A rate-limited confirm executes nothing and keeps the draft; after the hint it settles once")
    func confirmRateLimited() async throws {
        let alice = try await WalletMember.register("alice", in: environment, transport: transport)
        let bob = try await WalletMember.register("bob", in: environment, transport: transport)
        defer { for member in [alice, bob] { member.removeFiles() } }
        try await alice.wallet.setPIN(Secret("4711"))
        try await bob.wallet.setPIN(Secret("2580"))
        try await alice.credit(alice.memberID, "100.00")

        // The bucket refills (2 a second), so on a very slow machine a token may come back
        // between the burst and the confirm; then that transfer settles and the test tries again.
        for _ in 1...3 {
            let draft = try await alice.wallet.prepareTransfer(
                to: bob.memberID, asset: WalletMember.orb, amount: .orb("5"))
            let before = try await alice.orbBalance()
            try await exhaustWrites(of: alice, to: bob.memberID)
            let outcome = try await draft.confirm(with: .pin(Secret("4711")))
            guard case .failed(.rateLimited(let retryAfter)) = outcome else {
                _ = try outcome.settledTransfer()
                continue
            }
            // Not unknown, not final: the member may confirm again, and nothing is pending.
            #expect(draft.canConfirm)
            #expect(draft.lastRejection == .rateLimited(retryAfter: retryAfter))
            #expect(alice.wallet.pendingCommands.value.isEmpty)
            #expect(try await alice.storedCommands().isEmpty)
            guard case .drafted(let drafted) = draft.states.value, let limited = drafted.spentCommandIDs.last else {
                throw IntegrationFailure("expected drafted with the limited command spent, got \(draft.states.value)")
            }
            #expect(try await alice.entries(of: limited).isEmpty)
            #expect(try await alice.orbBalance() == before)

            try await Task.sleep(for: try #require(retryAfter, "the 429 carries its hint"))
            let transfer = try await draft.confirm(with: .pin(Secret("4711"))).settledTransfer()
            #expect(transfer.commandID != limited)
            #expect(try await alice.entries(of: transfer.commandID).map(\.direction) == [.outgoing])
            #expect(try await bob.entries(of: transfer.commandID).map(\.direction) == [.incoming])
            #expect(try await alice.orbBalance() == (try Amount(before, precision: 2).subtracting(.orb("5"))).formatted)
            return
        }
        Issue.record("the confirm was never rate limited in three tries")
    }
}
