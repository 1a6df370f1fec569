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

    /// Starts an interactive verification of another member `user` in `room`, a room this
    /// account shares with them (a DM): the request is an `m.room.message` (msgtype
    /// `m.key.verification.request`, encrypted when the room is) that every device of `user`
    /// sees, the flow's ID is that event's ID, and each later step is a room event related to
    /// it (`m.reference`). The first of their devices to answer does the flow. On success
    /// `user`'s master key is signed with this account's user-signing key and uploaded. Own
    /// devices verify over to-device messages (``verify(_:device:startDirectly:)``).
    ///
    /// - Throws: ``KeyVerificationError/unknownDevice`` when `user` is this account or their
    ///   devices are not known, ``KeyVerificationError/notReady`` before this device's keys are
    ///   loaded or without chat, ``KeyVerificationError/unavailable`` when the request could not
    ///   be sent into the room.
    public func verify(_ user: UserID, inRoom room: RoomID) async throws(KeyVerificationError) -> SASVerification {
        try await verifications.request(user: user, inRoom: room)
    }

    /// Sets how verification events go into rooms (chat's send path; the bridge sets it).
    package func setVerificationRoomSender(_ sender: @escaping VerificationRoomSender) async {
        await verifications.setRoomSender(sender)
    }

    /// Verification events chat read in rooms' timelines (decrypted), in order: a request
    /// for this account shows in ``incomingVerification``; steps go to their flow.
    package func verificationRoomEvents(_ events: [VerificationRoomEvent]) async {
        await verifications.deliver(room: events)
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
