import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaRuntime

/// The REPL's end-to-end encryption commands.
package enum CryptoCommands {
    /// Every command of this group.
    package static var commands: [REPLCommand] { [devices, encryption, recovery, trust, backup, verify] }

    /// The active account's crypto module.
    static func crypto(_ context: REPLContext) async throws(REPLError) -> AccountCrypto {
        let community = try await CommunitySlot.community(in: context)
        guard let crypto = community.module(AccountCrypto.self) else { throw .commandFailed("not signed in") }
        return crypto
    }

    /// `recovery setup|restore|reset`.
    package static let recovery = REPLCommand(
        "recovery", usage: "recovery setup|restore|reset",
        summary:
            "setup: cross-signing, key backup and secret storage, prints the recovery key once; restore: reads the recovery key or passphrase (no echo), cross-signs this device and restores the key backup; reset: asks for the password, new identity, key backup and recovery key",
        parse: { arguments throws(REPLError) -> String in
            let action = try arguments.next()
            guard ["setup", "restore", "reset"].contains(action), try arguments.rest().isEmpty else {
                throw .invalidArgument("expected setup, restore or reset")
            }
            return action
        },
        run: { action, context async throws(REPLError) in
            let crypto = try await crypto(context)
            let community = try await CommunitySlot.community(in: context)
            var input: Secret<String>?
            switch action {
            case "restore": input = try await context.readSecret(prompt: "Recovery key or passphrase: ")
            case "reset": input = try await context.readSecret(prompt: "Password: ")
            default: break
            }
            do throws(RecoveryError) {
                switch (action, input) {
                case ("restore", let text?):
                    // The backup's progress while its keys are restored.
                    let output = context.output
                    let stopProgress = crypto.backupState.subscribe { state in
                        if case .restoring(let imported, let total) = state, total > 0 {
                            output.print("backup: restoring \(imported) of \(total)")
                        }
                    }
                    defer { stopProgress() }
                    let restored: (imported: Int, total: Int)?
                    do throws(RecoveryError) {
                        restored = try await crypto.restore(recoveryKey: text)
                    } catch .malformedRecoveryKey {
                        // Not a recovery key: the passphrase it was made from, then.
                        restored = try await crypto.restore(recoveryKey: text, isPassphrase: true)
                    }
                    context.output.print("device cross-signed")
                    if let restored {
                        context.output.print("backup restored: \(restored.imported) new key(s) of \(restored.total)")
                    }
                case ("reset", let password?):
                    let key = try await community.session.resetRecovery(password: password)
                    context.output.print(
                        "identity reset (other devices must restore, contacts see a changed identity); recovery key: \(key.exposedValue)"
                    )
                default:
                    let key = try await crypto.setUpRecovery()
                    context.output.print("recovery key: \(key.exposedValue)")
                }
            } catch {
                throw .commandFailed("recovery \(action): \(error)")
            }
        })

    /// `trust <@user> ok`.
    package static let trust = REPLCommand(
        "trust", usage: "trust <@user> ok",
        summary: "acknowledges a change of the user's cross-signing identity",
        parse: { arguments throws(REPLError) -> UserID in
            let word = try arguments.next()
            guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
            guard try arguments.rest() == ["ok"] else { throw .invalidArgument("expected 'ok'") }
            return userID
        },
        run: { user, context async throws(REPLError) in
            let crypto = try await crypto(context)
            let acknowledged: Bool
            do throws(CryptoError) {
                acknowledged = try await crypto.acknowledgeIdentityChange(of: user)
            } catch {
                throw .commandFailed("identity not acknowledged: \(error)")
            }
            context.output.print(acknowledged ? "\(user): identity change acknowledged" : "\(user): no identity change")
        })

    /// What `verify` was asked: a user (and device) to verify, or an answer to an incoming request.
    package enum VerifyAction: Sendable, Equatable {
        case start(UserID, DeviceID?)
        case accept
        case cancel
        /// Show a QR code to the user's device (its payload printed as base64).
        case showQR(UserID, DeviceID?)
        /// Accept the incoming request by scanning the other device's code (base64 payload).
        case scan([UInt8])
    }

    /// `verify <@user> [<device>] | verify accept | verify cancel`.
    package static let verify = REPLCommand(
        "verify",
        usage:
            "verify <@user> [<device>] | verify accept | verify cancel | verify qr <@user> [<device>] | verify scan <payload>",
        summary:
            "interactive verification (emoji and decimals, or a QR code): starts one with the user (one of our own devices when the user is us), or accepts or cancels the request another device sent; prints the emoji and decimals, asks match? (y/n), then prints verified or cancelled. 'qr' asks the user's device and prints this device's QR payload (base64) for it to scan, then asks scanned? (y/n); 'scan' accepts the incoming request by scanning the other device's payload",
        parse: { arguments throws(REPLError) -> VerifyAction in
            let word = try arguments.next()
            let rest = try arguments.rest()
            switch word {
            case "accept" where rest.isEmpty: return .accept
            case "cancel" where rest.isEmpty: return .cancel
            case "qr":
                guard let first = rest.first, let userID = UserID(first) else {
                    throw .invalidArgument("expected a user ID after 'qr'")
                }
                guard rest.count <= 2 else { throw .invalidArgument("expected at most one device") }
                return .showQR(userID, rest.count == 2 ? DeviceID(rest[1]) : nil)
            case "scan":
                guard rest.count == 1, let bytes = Data(base64Encoded: CryptoCommands.padded(rest[0])) else {
                    throw .invalidArgument("expected one QR payload in base64")
                }
                return .scan(Array(bytes))
            default:
                guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
                guard rest.count <= 1 else { throw .invalidArgument("expected at most one device") }
                return .start(userID, rest.first.map(DeviceID.init))
            }
        },
        run: { action, context async throws(REPLError) in
            let crypto = try await crypto(context)
            let verification: SASVerification
            switch action {
            case .showQR(let user, let device):
                try await showQR(crypto, user: user, device: device, context)
                return
            case .scan(let bytes):
                try await scan(crypto, bytes, context)
                return
            case .start(let user, let device):
                do throws(KeyVerificationError) {
                    verification = try await crypto.verify(user, device: device)
                } catch {
                    throw .commandFailed("verification not started: \(error)")
                }
                let answered = await awaitState(verification.state, seconds: 120) {
                    if case .cancelled = $0 { return true }
                    return $0 == .ready
                }
                if answered == .ready { await verification.startSAS() }
            case .accept, .cancel:
                guard
                    let incoming = await awaitState(crypto.incomingVerification, seconds: 60, { $0 != nil }) ?? nil,
                    incoming.state.value == .incoming
                else { throw .commandFailed("no verification request") }
                verification = incoming
                if action == .cancel {
                    await incoming.cancel()
                    context.output.print("cancelled: m.user")
                    return
                }
                context.output.print("verification request from \(incoming.otherUserID)")
                await incoming.accept()
            }
            try await compare(verification, context)
        })

    /// `verify qr`: a request to the device, this device's QR payload printed (at once for one
    /// device, after the answer for every device), then the person confirms the other scanned.
    static func showQR(_ crypto: AccountCrypto, user: UserID, device: DeviceID?, _ context: REPLContext)
        async throws(REPLError)
    {
        let verification: SASVerification
        do throws(KeyVerificationError) {
            verification = try await crypto.verify(user, device: device)
        } catch {
            throw .commandFailed("verification not started: \(error)")
        }
        if device == nil {
            _ = await awaitState(verification.state, seconds: 120) {
                if case .cancelled = $0 { return true }
                return $0 == .ready
            }
        }
        guard let code = await verification.qrCode() else {
            await verification.cancel()
            throw .commandFailed("no QR code for this flow (a cross-signing identity is missing)")
        }
        context.output.print("qr: " + Data(code).base64EncodedString())
        let scanned = await awaitState(verification.state, seconds: 120) {
            if case .cancelled = $0 { return true }
            return $0 == .otherDeviceScanned
        }
        if scanned == .otherDeviceScanned {
            context.output.print("the other device scanned this code")
            let answer = try await context.readSecret(prompt: "scanned? (y/n) ").exposedValue
            if answer.lowercased().hasPrefix("y") {
                await verification.confirm()
            } else {
                await verification.mismatch()
            }
        }
        try await finish(verification, context)
    }

    /// `verify scan <payload>`: accepts the incoming request, scans the other device's payload.
    static func scan(_ crypto: AccountCrypto, _ bytes: [UInt8], _ context: REPLContext) async throws(REPLError) {
        guard
            let incoming = await awaitState(crypto.incomingVerification, seconds: 60, { $0 != nil }) ?? nil,
            incoming.state.value == .incoming
        else { throw .commandFailed("no verification request") }
        await incoming.accept()
        _ = await awaitState(incoming.state, seconds: 60) {
            if case .cancelled = $0 { return true }
            return $0 == .ready
        }
        do throws(KeyVerificationError) {
            try await incoming.scanned(bytes)
        } catch {
            throw .commandFailed("not a verification QR code")
        }
        try await finish(incoming, context)
    }

    /// Base64 with its `=` padding restored (a payload may be pasted without it).
    static func padded(_ text: String) -> String {
        text + String(repeating: "=", count: (4 - text.count % 4) % 4)
    }

    /// Shows the code, asks the person, and prints how the flow ended.
    static func compare(_ verification: SASVerification, _ context: REPLContext) async throws(REPLError) {
        let shown = await awaitState(verification.state, seconds: 120) {
            if case .showingCode = $0 { return true }
            if case .cancelled = $0 { return true }
            return false
        }
        if case .showingCode(let emoji, let decimals) = shown {
            context.output.print("emoji: " + emoji.map { "\($0.character) \($0.description)" }.joined(separator: ", "))
            context.output.print("decimals: " + decimals.map(String.init).joined(separator: " "))
            let answer = try await context.readSecret(prompt: "match? (y/n) ").exposedValue
            if answer.lowercased().hasPrefix("y") {
                await verification.confirm()
            } else {
                await verification.mismatch()
            }
        }
        try await finish(verification, context)
    }

    /// Waits for the flow's end and prints it.
    static func finish(_ verification: SASVerification, _ context: REPLContext) async throws(REPLError) {
        let end = await awaitState(verification.state, seconds: 120) {
            if case .cancelled = $0 { return true }
            return $0 == .verified
        }
        switch end {
        case .verified?:
            context.output.print(
                "verified \(verification.otherUserID) \(verification.otherDeviceID?.rawValue ?? "")")
        case .cancelled(let code, _)?: context.output.print("cancelled: \(code)")
        default:
            await verification.cancel()
            context.output.print("cancelled: m.timeout")
        }
    }

    /// The first value of `observable` that `done` accepts, or `nil` after `seconds`.
    static func awaitState<Value: Sendable>(
        _ observable: ObservableValue<Value>, seconds: Int, _ done: @escaping @Sendable (Value) -> Bool
    ) async -> Value? {
        await withTaskGroup(of: Value?.self) { group in
            group.addTask {
                for await value in observable.values where done(value) { return value }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }

    /// How the REPL names an identity state.
    static func describe(_ state: IdentityState) -> String {
        switch state {
        case .none: "none"
        case .needsRecovery: "needs recovery"
        case .ready: "ready"
        case .identityChanged(let user): "identity changed: \(user)"
        }
    }

    /// `encryption <room> [on|keys]`.
    package static let encryption = REPLCommand(
        "encryption", usage: "encryption <room> [on|keys]",
        summary:
            "whether a room is end-to-end encrypted; 'on' turns encryption on for good, 'keys' asks the account's other devices again for missing keys",
        parse: { arguments throws(REPLError) -> (String, String?) in
            let room = try arguments.next()
            let rest = try arguments.rest()
            guard rest.isEmpty || rest == ["on"] || rest == ["keys"] else {
                throw .invalidArgument("expected 'on', 'keys' or nothing")
            }
            return (room, rest.first)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try ChatCommands.client(context)
            let roomID = try ChatCommands.resolveRoom(arguments.0, context)
            let conversation = try await ChatCommands.failing { () async throws(ChatError) in
                try await chat.conversation(id: roomID)
            }
            switch arguments.1 {
            case "on":
                try await ChatCommands.failing { () async throws(ChatError) in try await conversation.enableEncryption()
                }
            case "keys":
                let count = try await ChatCommands.failing { () async throws(ChatError) in
                    try await conversation.requestMissingKeys()
                }
                context.output.print("\(roomID): \(count) key request(s) sent again")
                return
            default:
                break
            }
            context.output.print("\(roomID): \(conversation.encryption.value)")
        })

    /// `devices [<@user>]`.
    package static let devices = REPLCommand(
        "devices", usage: "devices [<@user>] | devices rename <device> <name>… | devices remove <device>",
        summary:
            "the account's own devices, or a user's, with their keys and trust (verified, cross-signed, unverified), and the identity state (* marks this device, ! a changed key)",
        parse: { arguments throws(REPLError) -> [String] in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            // `rename` and `remove` live in AccountCommands.swift.
            if let first = words.first, DeviceManagementCommands.subcommands.contains(first) {
                try await DeviceManagementCommands.run(words, context)
                return
            }
            var user: UserID?
            if let word = words.first {
                guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
                user = userID
            }
            let community = try await CommunitySlot.community(in: context)
            guard let crypto = community.module(AccountCrypto.self) else {
                throw .commandFailed("not signed in")
            }
            guard let user, user != crypto.userID else {
                // The account's own: every device the homeserver lists, with the keys verified here.
                let own: [AccountDevice]
                do throws(SessionError) { own = try await community.session.devices() } catch {
                    throw .commandFailed("devices not read: \(error)")
                }
                for device in own {
                    let name = device.displayName.map { " \"\(TerminalText.escaped($0))\"" } ?? ""
                    let key = device.ed25519Key.map { " ed25519:\($0)" } ?? " (no verified keys)"
                    let flag = device.keysChanged ? " !keys changed" : ""
                    let trust = device.trust.map { " \($0.rawValue)" } ?? ""
                    context.output.print(
                        "\(device.isCurrent ? "*" : " ") \(device.deviceID)\(name)\(key)\(trust)\(flag)")
                }
                context.output.print("identity: \(describe(crypto.identityState.value))")
                return
            }
            let listed: [CryptoDevice]
            do throws(CryptoError) {
                listed = try await crypto.devices(of: user)
            } catch {
                throw .commandFailed("devices not read: \(error)")
            }
            // Replaced (another master key) or removed (none listed any more).
            let change = (try? await crypto.identityChange(of: user)) ?? nil
            defer {
                let described = change.map {
                    "changed (\($0 == .removed ? "removed" : "replaced"); trust \(user) ok to acknowledge)"
                }
                context.output.print("\(user) identity: \(described ?? "unchanged")")
            }
            guard !listed.isEmpty else {
                context.output.print("no devices known for \(user)")
                return
            }
            for device in listed {
                let flag = device.keysChanged ? " !keys changed" : ""
                let name = device.displayName.map { " \"\(TerminalText.escaped($0))\"" } ?? ""
                context.output.print(
                    "  \(device.deviceID)\(name) ed25519:\(device.ed25519) \(device.trust.rawValue)\(flag)")
            }
        })

    /// `backup [status|create|restore|delete]`.
    package static let backup = REPLCommand(
        "backup", usage: "backup [status|create|restore|delete]",
        summary:
            "the server-side key backup: its version and how many keys wait ('status', after checking the server's current version); 'create' makes a new one with a new key (kept sealed here, nothing printed), 'restore' reads every key of the backup in use, 'delete' removes it",
        parse: { arguments throws(REPLError) -> String in
            let rest = try arguments.rest()
            guard rest.count <= 1, ["status", "create", "restore", "delete"].contains(rest.first ?? "status") else {
                throw .invalidArgument("expected status, create, restore or delete")
            }
            return rest.first ?? "status"
        },
        run: { action, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            guard let crypto = community.module(AccountCrypto.self) else { throw .commandFailed("not signed in") }
            do throws(KeyBackupError) {
                switch action {
                case "create":
                    let version = try await crypto.createBackup()
                    context.output.print("backup created: version \(version)")
                case "restore":
                    let (imported, total) = try await crypto.restoreBackup()
                    context.output.print("backup restored: \(imported) new key(s) of \(total)")
                case "delete":
                    try await crypto.deleteBackup()
                    context.output.print("backup deleted")
                default:
                    let status: KeyBackupStatus
                    do throws(KeyBackupError) { status = try await crypto.checkBackup() } catch {
                        // Offline: what this device knows.
                        status = try await crypto.backupStatus()
                    }
                    guard let version = status.version else {
                        context.output.print("backup: none")
                        return
                    }
                    let stopped = status.stopReason.map { " (stopped: \($0.rawValue) on the server)" } ?? ""
                    context.output.print("backup: version \(version), \(status.waiting) session(s) waiting\(stopped)")
                }
            } catch {
                throw .commandFailed("backup \(action) failed: \(error.caseName)")
            }
        })
}
