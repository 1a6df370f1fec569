import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// What the automatic cross-signing bootstrap of a run did (``AccountCrypto/automaticBootstrap``).
package enum AutomaticBootstrap: Sendable, Hashable {
    /// Not done yet (the device keys are not published, or the attempt runs).
    case pending
    /// The manifest says `manual`: nothing is done without the app.
    case off
    /// Done: `created` when this run made the account's identity, else the account had one
    /// (this device's, or another's: then it waits for recovery or verification).
    case finished(created: Bool)
    /// The attempt failed (the error by name); it is tried again when the crypto machine is
    /// next ready after a failure, at most once a minute.
    case failed(String)
}

extension AccountCrypto {
    /// Creates the account's cross-signing identity when the server lists none: master,
    /// self-signing and user-signing keys, kept sealed on this device, uploaded with
    /// `keys/device_signing/upload` (the first identity of an account needs no password), this
    /// device signed with the self-signing key, and the identity pinned. No secret storage and
    /// no recovery key: ``setUpRecovery(passphrase:)`` adds them later on this device.
    ///
    /// When this device holds the identity the server lists and is not cross-signed by it, it is
    /// signed. When the account has an identity this device does not hold, nothing is done
    /// (``identityState`` is ``IdentityState/needsRecovery``: restore with the recovery key, or
    /// have another device verify this one).
    ///
    /// - Returns: whether a new identity was made.
    /// - Throws: a request's or the store's error (``RecoveryError/unavailable``: try again).
    @discardableResult
    public func bootstrapCrossSigning() async throws(RecoveryError) -> Bool {
        try await recoveryLock.withLock { () async throws(RecoveryError) -> Bool in
            let answer = try await queryOwnKeys()
            let listed = CrossSigningChain.identities(
                in: answer, ownUser: userID, ownMasterKey: nil, driver: engine.driver)[userID]
            let held = try await heldKeys()
            if let listed {
                guard let held, held.master.publicKey == listed.masterKey else {
                    // Another device's identity: recovery or verification makes it ours.
                    try await refreshIdentity()
                    return false
                }
                if let keys = CrossSigningChain.deviceKeys(in: answer, user: userID, deviceID: deviceID.rawValue),
                    CrossSigningChain.trust(ofDevice: keys, owner: listed, driver: engine.driver) == .unverified
                {
                    try await signThisDevice(with: held, answer: answer)
                }
                try await pinOwnIdentity(held)
                return false
            }
            // Keys kept before an upload that did not finish are uploaded again (the same ones).
            let keys: CrossSigningKeys
            if let held {
                keys = held
            } else {
                keys = try Self.recovery { () throws(CrossSigningError) in
                    try CrossSigningKeys(newFor: userID, driver: engine.driver)
                }
                try await keep(keys)
            }
            do throws(RecoveryError) {
                try await uploadIdentity(keys, authorize: nil)
            } catch .identityExists {
                // Another device of the account made one in the meantime.
                logger.info("cross-signing identity made by another device meanwhile")
                try await refreshIdentity()
                return false
            }
            try await signThisDevice(with: keys)
            try await pinOwnIdentity(keys)
            logger.info("cross-signing identity created")
            return true
        }
    }

    private func refreshIdentity() async throws(RecoveryError) {
        do { try await engine.refreshIdentityState() } catch { throw .store }
    }

    /// Runs ``bootstrapCrossSigning()`` once the device keys are published (manifest
    /// `encryption.crossSigningBootstrap` `automatic`), and again after a failure the next time
    /// the machine is ready, at most once a minute. Ends with the run (``stop()`` cancels it).
    func runAutomaticBootstrap() async {
        var lastAttempt: ContinuousClock.Instant?
        for await state in host.states.values {
            guard case .ready = state, !Task.isCancelled else {
                if Task.isCancelled { return }
                continue
            }
            if let lastAttempt, ContinuousClock.now - lastAttempt < .seconds(60) { continue }
            lastAttempt = .now
            do throws(RecoveryError) {
                let created = try await bootstrapCrossSigning()
                automaticBootstrap.publish(.finished(created: created))
                return
            } catch {
                logger.warning("cross-signing bootstrap failed error=\(error)")
                automaticBootstrap.publish(.failed(error.description))
                switch error {
                case .unavailable, .notReady: continue
                default: return
                }
            }
        }
    }
}
