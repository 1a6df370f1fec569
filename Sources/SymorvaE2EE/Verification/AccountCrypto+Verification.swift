import SymorvaMachines
import SymorvaRuntime

extension AccountCrypto {
    /// The last verification another device started with this account (a request, or a
    /// `start` without request): `nil` until one arrives. The app shows it and answers with
    /// ``SASVerification/accept()`` or ``SASVerification/cancel()``.
    public var incomingVerification: ObservableValue<SASVerification?> { verifications.incoming.observable }

    /// Starts an interactive verification (emoji or decimals) of `user`: one of this account's
    /// own devices when `user` is the account, else another member. A request goes to `device`
    /// (every device of the user when `nil`); with `startDirectly` (needs a device) the SAS
    /// starts at once, for clients that only know that way (matrix-nio).
    ///
    /// On success the other device is signed with this account's self-signing key, or the other
    /// user's master key with its user-signing key, and the signature uploaded.
    ///
    /// - Throws: ``KeyVerificationError/unknownDevice`` when the user's devices are not tracked,
    ///   ``KeyVerificationError/notReady`` before this device's keys are loaded.
    public func verify(_ user: UserID, device: DeviceID? = nil, startDirectly: Bool = false)
        async throws(KeyVerificationError) -> SASVerification
    {
        try await verifications.request(user: user, device: device, startDirectly: startDirectly)
    }

    /// After a verification with `device`, another device of this account: when this device
    /// holds no cross-signing keys (a new device), it asks the account's trusted devices for the
    /// secrets — the cross-signing keys and the key backup's key — the device just verified
    /// among them, which answers since the flow cross-signed this device before its `done`
    /// (``requestSecretsFromOwnDevices(timeout:)``). A device that holds the keys has nothing to
    /// ask: it answers the other's requests.
    func takeSecretsAfterVerifying(_ device: DeviceID) async {
        do throws(RecoveryError) {
            guard try await heldKeys() == nil else { return }
            let outcome = try await requestSecretsFromOwnDevices()
            let restored = outcome.backupRestore.map { "\($0.imported)/\($0.total)" } ?? "none"
            logger.info(
                "secrets after self-verification device=\(device) crossSigning=\(outcome.crossSigning) backup=\(restored)"
            )
        } catch {
            logger.warning("secrets after self-verification not received device=\(device) error=\(error)")
        }
    }
}
