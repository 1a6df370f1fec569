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
    /// The account's crypto module once its keys are published, no upload is in flight, and the
    /// automatic cross-signing bootstrap is over (the account's identity made, or found made by
    /// another device): under the default room key policy a device gets room keys only once
    /// cross-signed, so a test that shares a room right after sign-in waits for this.
    func readyCrypto() async throws -> AccountCrypto {
        let crypto = try #require(community.module(AccountCrypto.self))
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        let bootstrap = try await crypto.automaticBootstrap.observable.wait(timeout: .seconds(60)) {
            $0 != .pending
        }
        if case .failed(let reason) = bootstrap {
            throw IntegrationFailure("cross-signing bootstrap failed: \(reason)")
        }
        return crypto
    }
}

extension AccountCrypto {
    /// Waits until the account's tracking lists `deviceID` of `user` cross-signed by its owner (or
    /// verified): under the default policy only then does it get this account's room keys.
    func waitForCrossSigned(_ deviceID: String, of user: UserID, timeout: Duration = .seconds(60)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let device = try await devices(of: user).first { $0.deviceID == deviceID }
            if let device, device.trust != .unverified { return }
            guard ContinuousClock.now < deadline else {
                throw IntegrationFailure(
                    "\(user) device \(deviceID) never cross-signed (\(String(describing: device?.trust)))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

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

extension DevEnvironment {
    /// A copy of the dev servers' manifest file with the permissive room key policy
    /// (`encryption.roomKeySharing: "allDevices"`), written into `folder`: for a `symorva`
    /// process whose other participant is matrix-nio (no cross-signing). See
    /// ``permissiveConfiguration``.
    func permissiveManifest(in folder: TemporaryDataDirectory) throws -> String {
        let path = try #require(manifestPath)
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var encryption = manifest["encryption"] as? [String: Any] ?? [:]
        encryption["roomKeySharing"] = "allDevices"
        manifest["encryption"] = encryption
        let copy = folder.path + "/symorva.config.json"
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: copy))
        return copy
    }
}
