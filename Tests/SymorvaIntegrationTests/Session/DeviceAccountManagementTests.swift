import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaSession
import Testing

/// Renaming and removing devices and deactivating the account against the real Synapse, through
/// the product API (removal and deactivation through the session's password stage).
@Suite(
    "Devices and account: rename, remove, deactivate",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct DeviceAccountManagementTests {
    @Test("A device is renamed; another is removed with the password, and a wrong one leaves it")
    func renameAndRemove() async throws {
        let first = CommunityFixture()
        let username = DevEnvironment.uniqueUsername("dev")
        _ = try await first.community.session.register(username: username, password: testPassword)
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let session = first.community.session

        let devices = try await session.devices()
        #expect(devices.count == 2)
        let own = try #require(devices.first { $0.isCurrent })
        let other = try #require(devices.first { !$0.isCurrent })
        try await session.renameDevice(own.deviceID, to: "Kitchen tablet")
        #expect(try await session.devices().first { $0.deviceID == own.deviceID }?.displayName == "Kitchen tablet")

        await #expect(throws: SessionError.invalidCredentials) {
            try await session.removeDevice(other.deviceID, password: Secret("not it"))
        }
        #expect(try await session.devices().contains { $0.deviceID == other.deviceID })
        try await session.removeDevice(other.deviceID, password: testPassword)
        #expect(try await session.devices().map(\.deviceID) == [own.deviceID])
    }

    @Test("Deactivation asks for the password, then wipes the account's data here; the account cannot sign in again")
    func deactivate() async throws {
        let fixture = CommunityFixture()
        let username = DevEnvironment.uniqueUsername("gone")
        let account = try await fixture.community.session.register(username: username, password: testPassword)
        let session = fixture.community.session
        await #expect(throws: SessionError.invalidCredentials) {
            try await session.deactivateAccount(password: Secret("not it"))
        }
        #expect(session.state.value.account?.id == account.id)

        try await session.deactivateAccount(password: testPassword)
        #expect(session.accounts.value.isEmpty)
        #expect(session.state.value.account == nil)
        let folders = (try? FileManager.default.contentsOfDirectory(atPath: fixture.data.path + "/accounts")) ?? []
        #expect(folders.isEmpty, "the account's folder is wiped: \(folders)")
        let again = CommunityFixture()
        await #expect(throws: SessionError.self) {
            try await again.community.session.signIn(username: username, password: testPassword)
        }
    }
}
