import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

extension CommunityFixture {
    /// The account's crypto module once its keys are published and no upload is in flight.
    func readyCrypto() async throws -> AccountCrypto {
        let crypto = try #require(community.module(AccountCrypto.self))
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        return crypto
    }
}

extension AccountCrypto {
    /// Waits until the account's tracking knows `deviceID` of `user` (a `keys/query` answered
    /// after the user shared an encrypted room with it); returns the device IDs then known.
    @discardableResult
    func waitForDevice(_ deviceID: String, of user: UserID, timeout: Duration = .seconds(60)) async throws
        -> [String]
    {
        let deadline = ContinuousClock.now + timeout
        while true {
            let known = try await devices(of: user).map(\.deviceID)
            if known.contains(deviceID) { return known }
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure("\(user) device \(deviceID) never became known (known: \(known))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

extension SendReceipt {
    /// Waits until sent and returns the event's ID.
    func sentEventID() async throws -> EventID {
        try await waitUntilSent()
        guard case .sent(let eventID) = state.value else { throw IntegrationFailure("not sent: \(state.value)") }
        return eventID
    }
}

/// Registers a Matrix account for a peer that is not SymorvaKit (it logs in itself).
func registerPeerAccount(_ prefix: String) async throws -> RegisteredAccount {
    try await RegisteredAccount.register(
        DevEnvironment.uniqueUsername(prefix), password: testPassword.exposedValue, in: DevEnvironment.current!,
        transport: CurlTransport())
}
