import Foundation
import SymorvaMachines
import SymorvaTesting
import Testing

@testable import SymorvaWallet

/// How the wallet's exchanges read a 429 (`SY_LIMIT_EXCEEDED`): the service refused before
/// handling anything, so it is never an unknown outcome.
@Suite("Transfer interpreter: rate limits")
struct WalletRateLimitTests {
    @Test("A rate-limited confirm is a definitive refusal that keeps the draft, sent once and never retried")
    func confirm() async throws {
        let harness = try await InterpreterHarness(rateLimitPolicy: .standard)
        let event = await harness.confirm { _ in .rateLimited(milliseconds: 1_500) }
        #expect(event == .confirmResponse(.failed(.rateLimited(retryAfter: .milliseconds(1_500)))))
        #expect(harness.transport.requests.count == 1)
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test("A rate-limited query leaves the command unknown, with the hint for the next query")
    func query() async throws {
        let harness = try await InterpreterHarness()
        #expect(
            await harness.query { _ in .rateLimited(milliseconds: 1_800) }
                == .queryResponse(.rateLimited(retryAfter: .milliseconds(1_800))))
        #expect(
            await harness.query { _ in .rateLimited(milliseconds: nil) }
                == .queryResponse(.rateLimited(retryAfter: nil)))
    }

    @Test("A prepare still limited after the client's retries fails as rate limited; nothing was committed")
    func prepareRefused() async throws {
        let harness = try await InterpreterHarness()
        #expect(
            await harness.prepare { _ in .rateLimited(milliseconds: 2_000) }
                == .prepareResponse(.failed(.rateLimited(retryAfter: .seconds(2)))))
    }

    @Test("A prepare limited once is sent again after the hint and drafts")
    func prepareRetried() async throws {
        let harness = try await InterpreterHarness(rateLimitPolicy: .standard)
        harness.transport.on(
            "POST", "/_symorva/v1/wallet/transfers/prepare",
            ScriptedHTTPTransport.sequence([.rateLimited(milliseconds: 1_300), .json(200, WalletFixtures.draftJSON)]))
        let request = TransferRequest(
            recipient: WalletFixtures.bob, asset: WalletFixtures.orb, amount: WalletFixtures.amount("25.00"))
        async let event = harness.perform(.sendPrepare(request))
        try await harness.clock.waitForSleepers(count: 1)
        await harness.clock.advance(by: .milliseconds(1_300))
        guard case .prepareResponse(.drafted(let draft)) = await event else {
            Issue.record("expected a draft")
            return
        }
        #expect(draft.summary == WalletFixtures.summary)
        #expect(harness.transport.requests.count == 2)
    }

    @Test("Reads (balances, history, PIN) that stay limited throw the typed failure with the hint")
    func reads() {
        #expect(
            WalletService.transferError(.rateLimited(retryAfter: .milliseconds(250)))
                == .failure(.rateLimited(retryAfter: .milliseconds(250))))
        #expect(WalletService.transferError(.rateLimited(retryAfter: nil)) == .failure(.rateLimited(retryAfter: nil)))
        #expect(
            WalletService.prepareResult(for: .rateLimited(retryAfter: nil)) == .failed(.rateLimited(retryAfter: nil)))
    }
}
