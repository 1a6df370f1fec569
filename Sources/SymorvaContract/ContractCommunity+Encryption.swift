import Foundation
import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// Encryption management of the active account (`encryption.*`): the cross-signing
    /// identity and recovery, the server-side key backup, the devices and identities of users
    /// with their trust; and a conversation's encryption (`chat.conversation.enableEncryption`,
    /// the path `conversation.encryption`). Errors are in the domain `encryption` (the Swift
    /// `RecoveryError`, `KeyBackupError` and `CryptoError` case names); `encryption.notReady`
    /// when no account with encryption is active.
    ///
    /// Secrets: the recovery key, passphrase, password and backup key go from the parameters
    /// straight into `Secret`s; the recovery key a setup or reset makes is in the answer (the
    /// host shows it once) and never in a log.
    ///
    /// Device verification is `verification.*` (``verificationMethods``).
    var encryptionMethods: ContractMethods {
        let community = community
        let session = community.session
        let crypto: @Sendable () throws(ContractError) -> AccountCrypto = { () throws(ContractError) in
            guard let crypto = community.module(AccountCrypto.self) else {
                throw ContractError(
                    domain: "encryption", code: "notReady",
                    message: "No signed-in account with end-to-end encryption is active.")
            }
            return crypto
        }
        var methods = ContractMethods()
        methods.asynchronous["encryption.identityState"] = { _ in
            Self.identityState(try crypto().identityState.value)
        }
        methods.asynchronous["encryption.recovery.setUp"] = { call in
            let passphrase = try call.params.optionalSecret("passphrase")
            let crypto = try crypto()
            let key = try await mapping("encryption") { try await crypto.setUpRecovery(passphrase: passphrase) }
            return .object(["recoveryKey": .string(key.exposedValue)])
        }
        methods.asynchronous["encryption.recovery.restore"] = { call in
            let key = try call.params.secret("recoveryKey")
            let isPassphrase = try call.params.optionalBool("isPassphrase") ?? false
            let crypto = try crypto()
            let restored = try await mapping("encryption") {
                try await crypto.restore(recoveryKey: key, isPassphrase: isPassphrase)
            }
            return .object(["backup": restored.map(Self.restoredKeys) ?? .null])
        }
        methods.asynchronous["encryption.recovery.reset"] = { call in
            let password = try call.params.secret("password")
            let passphrase = try call.params.optionalSecret("passphrase")
            let key = try await mapping("encryption") {
                try await session.resetRecovery(password: password, passphrase: passphrase)
            }
            return .object(["recoveryKey": .string(key.exposedValue)])
        }
        methods.asynchronous["encryption.backup.status"] = { _ in
            let crypto = try crypto()
            return Self.backupStatus(try await mapping("encryption") { try await crypto.backupStatus() })
        }
        methods.asynchronous["encryption.backup.check"] = { _ in
            let crypto = try crypto()
            return Self.backupStatus(try await mapping("encryption") { try await crypto.checkBackup() })
        }
        methods.asynchronous["encryption.backup.create"] = { _ in
            let crypto = try crypto()
            let version = try await mapping("encryption") { try await crypto.createBackup() }
            return .object(["version": .string(version)])
        }
        // The backup's private key as Matrix writes it in secret storage (base64, 32 bytes).
        methods.asynchronous["encryption.backup.enable"] = { call in
            let text = try call.params.secret("privateKey")
            var padded = text.exposedValue
            while padded.count % 4 != 0 { padded += "=" }
            guard let bytes = Data(base64Encoded: padded) else {
                throw ContractError.invalidParams("privateKey", "the backup key in base64")
            }
            let crypto = try crypto()
            let version = try await mapping("encryption") {
                try await crypto.enableBackup(privateKey: Secret(Array(bytes)))
            }
            return .object(["version": .string(version)])
        }
        methods.asynchronous["encryption.backup.restore"] = { _ in
            let crypto = try crypto()
            return Self.restoredKeys(try await mapping("encryption") { try await crypto.restoreBackup() })
        }
        methods.asynchronous["encryption.backup.delete"] = { _ in
            let crypto = try crypto()
            try await mapping("encryption") { try await crypto.deleteBackup() }
            return .object([:])
        }
        methods.asynchronous["encryption.devices"] = { call in
            let userID = try call.params.userID("userID")
            let crypto = try crypto()
            return .array(
                try await mapping("encryption") { try await crypto.devices(of: userID) }.map(Self.cryptoDevice))
        }
        methods.asynchronous["encryption.identityChanged"] = { call in
            let userID = try call.params.userID("userID")
            let crypto = try crypto()
            return .object([
                "changed": .bool(try await mapping("encryption") { try await crypto.identityChanged(of: userID) })
            ])
        }
        methods.asynchronous["encryption.acknowledgeIdentityChange"] = { call in
            let userID = try call.params.userID("userID")
            let crypto = try crypto()
            let acknowledged = try await mapping("encryption") {
                try await crypto.acknowledgeIdentityChange(of: userID)
            }
            return .object(["acknowledged": .bool(acknowledged)])
        }
        // The observables of the account active when subscribed.
        methods.subscriptions["encryption.identity"] = { _ in
            ContractSource(try crypto().identityState, encode: Self.identityState)
        }
        methods.subscriptions["encryption.backup"] = { _ in
            ContractSource(try crypto().backupState, encode: Self.backupState)
        }
        methods.asynchronous["chat.conversation.enableEncryption"] = { call in
            let target = try call.handles.resolve(
                call.params, "conversation", kind: "conversation", as: Conversation.self, domain: "chat")
            try await mapping("chat") { try await target.enableEncryption() }
            return .object([:])
        }
        methods.subscriptions["conversation.encryption"] = { call in
            let target = try call.handles.resolve(
                call.params, "conversation", kind: "conversation", as: Conversation.self, domain: "chat")
            return ContractSource(target.encryption) { .object(["kind": .string($0.description)]) }
        }
        return methods
    }

    static func identityState(_ state: IdentityState) -> JSONValue {
        switch state {
        case .none: .object(["kind": "none"])
        case .needsRecovery: .object(["kind": "needsRecovery"])
        case .ready: .object(["kind": "ready"])
        case .identityChanged(let user): .object(["kind": "identityChanged", "userID": .string(user.rawValue)])
        }
    }

    static func backupState(_ state: KeyBackupState) -> JSONValue {
        switch state {
        case .disabled: .object(["kind": "disabled"])
        case .uploading(let remaining): .object(["kind": "uploading", "remaining": .int(remaining)])
        case .upToDate: .object(["kind": "upToDate"])
        case .restoring(let imported, let total):
            .object(["kind": "restoring", "imported": .int(imported), "total": .int(total)])
        }
    }

    static func backupStatus(_ status: KeyBackupStatus) -> JSONValue {
        .object([
            "version": status.version.map(JSONValue.string) ?? .null, "waiting": .int(status.waiting),
            "stopReason": status.stopReason.map { .string($0.rawValue) } ?? .null,
        ])
    }

    static func restoredKeys(_ restored: (imported: Int, total: Int)) -> JSONValue {
        .object(["imported": .int(restored.imported), "total": .int(restored.total)])
    }

    static func cryptoDevice(_ device: CryptoDevice) -> JSONValue {
        .object([
            "userID": .string(device.userID.rawValue), "deviceID": .string(device.deviceID),
            "ed25519Key": .string(device.ed25519), "displayName": device.displayName.map(JSONValue.string) ?? .null,
            "keysChanged": .bool(device.keysChanged), "trust": .string(device.trust.rawValue),
        ])
    }
}
