import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaTesting
import Testing

/// The random walk's oracle (``StudioWorld``) can fail: content that reaches it under a grant the
/// service holds ended, however it ended, is a violation. Raw requests stand in for a device that
/// would send them.
@Suite("Studio oracle")
struct StudioOracleTests {
    let clock = ManualClock(now: .seconds(1_000))
    let items = StudioFixtures.messages(2, tag: "oracle-body")
    let world: StudioWorld

    init() {
        world = StudioWorld(clock: clock, bodies: items.map(\.body))
        world.serviceSkew = .seconds(90)
    }

    func post(_ path: String, _ json: String) async throws -> (status: Int, body: [String: Any]) {
        let request = HTTPRequest(
            method: .post, url: URL(string: "http://services.test\(path)")!, body: Array(json.utf8))
        let response = try await world.transport.send(request)
        let body = (try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
        return (response.status, body)
    }

    /// A grant of the first message; its ID and its `expires_at_ms` (the service's clock).
    func grant() async throws -> (id: String, expiresAt: Int64) {
        let answer = try await post(
            StudioWorld.grantsPath,
            #"{"room_id": "!room:localhost", "purpose": "summarize", "scope": {"event_ids": ["$m1"]}, "expires_in_ms": 600000}"#
        )
        let id = try #require(answer.body["grant_id"] as? String)
        let expiresAt = try #require((answer.body["expires_at_ms"] as? NSNumber)?.int64Value)
        return (id, expiresAt)
    }

    /// Sends the first message's body under `grant`; the status the service answers.
    func summarize(_ grant: String) async throws -> Int {
        let item = items[0]
        return try await post(
            StudioWorld.summariesPath,
            #"{"grant_id": "\#(grant)", "items": [{"event_id": "\#(item.eventID.rawValue)", "timestamp": \#(item.timestamp.rawValue), "body": "\#(item.body)"}]}"#
        ).status
    }

    @Test("Content under a live grant is no violation")
    func live() async throws {
        let grant = try await grant()
        #expect(try await summarize(grant.id) == 200)
        #expect(world.violations.isEmpty)
    }

    @Test("Content under a grant the member revoked on another device is a violation (and refused)")
    func otherDevice() async throws {
        let grant = try await grant()
        world.otherDeviceRevokes(GrantID(grant.id))
        #expect(try await summarize(grant.id) == 409)
        #expect(world.violations == ["content under grant \(grant.id) revoked at the service by otherDevice"])
    }

    @Test("The service revoking a grant refuses that request; content after it is a violation")
    func service() async throws {
        let grant = try await grant()
        world.fault = .revokedByService
        #expect(try await summarize(grant.id) == 409)
        world.fault = .none
        #expect(world.violations.isEmpty, "the grant was live when that request arrived")
        #expect(try await summarize(grant.id) == 409)
        #expect(world.violations == ["content under grant \(grant.id) revoked at the service by service"])
    }

    @Test("Content after this device's revoke reached the service is a violation")
    func thisDevice() async throws {
        let grant = try await grant()
        #expect(try await post("\(StudioWorld.grantsPath)/\(grant.id)/revoke", "{}").status == 200)
        #expect(try await summarize(grant.id) == 409)
        #expect(world.violations == ["content under grant \(grant.id) revoked at the service by thisDevice"])
    }

    @Test("The service stamps expiry by its own clock; content at or after it is a violation")
    func expiredByServiceClock() async throws {
        let grant = try await grant()
        // The service's clock runs 90 s ahead of the device's wall clock.
        #expect(grant.expiresAt - world.wallClock.now.millisecondsSince1970 == 690_000)
        await clock.advance(by: .seconds(599))
        #expect(try await summarize(grant.id) == 200)
        #expect(world.violations.isEmpty)
        await clock.advance(by: .seconds(1))
        #expect(try await summarize(grant.id) == 409)
        #expect(world.violations == ["content under grant \(grant.id) expired by the service's clock"])
    }
}

/// The oracle's service clock against the real device code: after a restart the device reads a
/// grant's `expires_at_ms` (the service's clock) against its own wall clock.
@Suite("Studio expiry by the service's clock")
struct StudioServiceClockTests {
    @Test("After a restart, content under a grant the service's clock (90 s ahead) has expired is a violation")
    func restartedGrantExpiredByTheServiceClock() async throws {
        let h = try await AccountStudioTests.Harness()
        h.world.serviceSkew = .seconds(90)
        let first = try await h.studio()
        _ = try await first.requestGrant(for: StudioWorld.room, scope: AccountStudioTests.selected)
        await first.shutdown()
        let second = try await h.studio()
        let restored = try #require(try await second.restoreGrants().first)
        // Past the service's expiry (600 s), before the device's reading of it (690 s).
        await h.clock.advance(by: .seconds(620))
        _ = try? await second.summarize(using: restored)
        await second.shutdown()
        #expect(h.world.violations.isEmpty, "\(h.world.violations)")
    }
}
