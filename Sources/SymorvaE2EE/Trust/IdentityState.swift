import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// The account's cross-signing identity, as this device sees it.
public enum IdentityState: Sendable, Hashable {
    /// The account has no cross-signing identity: before the automatic bootstrap at the first
    /// sign-in (``AccountCrypto/bootstrapCrossSigning()``), or with the manifest's
    /// `encryption.crossSigningBootstrap` `manual` until ``AccountCrypto/setUpRecovery(passphrase:)``
    /// or the bootstrap makes one.
    case none
    /// The account has an identity whose private keys this device does not hold: enter the
    /// recovery key (``AccountCrypto/restore(recoveryKey:isPassphrase:)``) or reset it.
    case needsRecovery
    /// This device holds the private keys of the account's identity and is cross-signed by it.
    case ready
    /// The identity of this user (another member, or this account when another device reset
    /// it) is not the one pinned: shown until acknowledged
    /// (``AccountCrypto/acknowledgeIdentityChange(of:)``).
    case identityChanged(UserID)
}

/// How a user's cross-signing identity changed since it was pinned (not acknowledged yet).
public enum UserIdentityChange: Sendable, Hashable {
    /// The server lists another master key (the user reset their identity, or the server lies).
    case replaced
    /// The server stopped listing any master key for the user.
    case removed
}

extension CryptoEngine {
    /// Computes ``identityState`` from the store: an unacknowledged change first (this account's
    /// own before others'), then whether this device holds the private keys of the identity the
    /// server last listed for the account.
    package func refreshIdentityState() async throws(CryptoStoreError) {
        let changed = try await store.changedIdentities()
        let state: IdentityState
        if changed.contains(userID) {
            state = .identityChanged(userID)
        } else if let first = changed.first {
            state = .identityChanged(first)
        } else {
            let held = try await store.crossSigningMasterKey()
            let listed = try await store.identity(of: userID).map { $0.changedMasterKey ?? $0.pinnedMasterKey }
            switch (held, listed) {
            case (nil, nil): state = .none
            // Keys kept before an upload that did not finish: the account has no identity yet.
            case (.some, nil): state = .none
            case (let held?, let listed?): state = held == listed ? .ready : .needsRecovery
            case (nil, .some): state = .needsRecovery
            }
        }
        if identityState.value != state { identityState.publish(state) }
    }
}
