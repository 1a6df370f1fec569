import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaWallet

/// What the wallet commands can reach in the signed-in community.
///
/// The sign-in commands put this in the session's ``REPLWalletKey`` slot: `.available(wallet)`
/// when the community enables the wallet module, `.disabled` when its manifest does not. An
/// empty slot means nobody is signed in.
package enum REPLWalletAccess: Sendable {
    /// The community's wallet (`community.wallet`), which acts for the active account.
    case available(WalletClient)
    /// The community is signed in to, but its manifest disables the wallet module.
    case disabled
}

/// The state slot the wallet commands read their wallet from.
///
/// ```swift
/// // in `login`, once the community is signed in:
/// context[REPLWalletKey.self] = community.wallet.map(REPLWalletAccess.available) ?? .disabled
/// // in `logout`:
/// context[REPLWalletKey.self] = nil
/// ```
package enum REPLWalletKey: REPLStateKey {
    /// What the slot holds.
    package typealias Value = REPLWalletAccess
}

/// The `wallet` command group: balances, pin, send, pending, query, history.
package enum WalletCommands {
    /// The commands to register: the `wallet` group.
    package static var commands: [REPLCommand] { [wallet] }

    /// `wallet balances|pin|send|pending|query|history`.
    package static let wallet = REPLCommand.group(
        "wallet", summary: "the signed-in member's wallet",
        details: "Needs a signed-in community whose manifest enables the wallet module.",
        subcommands: [balances, pin, send, pending, query, history])

    /// `wallet balances`: fetches and prints the member's balances.
    package static let balances = REPLCommand(
        "balances", usage: "wallet balances", summary: "show the member's balances",
        run: { context async throws(REPLError) in
            let wallet = try walletClient(in: context)
            let balances = try await perform { () async throws(TransferError) in try await wallet.refreshBalances() }
            if balances.isEmpty { context.output.print("no balances") }
            context.output.printColumns(balances.map { ($0.asset.code, $0.amount.formatted) })
        })

    /// `wallet pin [--change]`: sets the member's first wallet PIN, or changes it.
    ///
    /// Every PIN is read without echo; the new one is asked twice and must match. The PINs go
    /// only to ``/SymorvaWallet/WalletClient/setPIN(_:replacing:)``, which seals them to the
    /// service: they never reach the output, the log or a trace.
    package static let pin = REPLCommand(
        "pin", usage: "wallet pin [--change]", summary: "set the wallet PIN, or change it (--change)",
        details: """
            Asks for the new PIN twice (4 to 12 digits, never echoed or logged); with --change it first
            asks for the current PIN. A wallet needs a PIN before it can send.
            """,
        parse: { arguments throws(REPLError) in
            guard let flag = arguments.optional() else { return false }
            guard flag == "--change" else { throw arguments.usageError }
            return true
        },
        run: { changing, context async throws(REPLError) in
            let wallet = try walletClient(in: context)
            let current = changing ? try await context.readSecret(prompt: "Current PIN: ") : nil
            let new = try await context.readSecret(prompt: "New PIN: ")
            let repeated = try await context.readSecret(prompt: "New PIN again: ")
            guard new.exposedValue == repeated.exposedValue else {
                throw .commandFailed("the two PINs differ; the PIN was not changed")
            }
            do throws(TransferError) {
                try await wallet.setPIN(new, replacing: current)
            } catch {
                throw .commandFailed(pinMessage(for: error))
            }
            context.output.print(changing ? "wallet PIN changed" : "wallet PIN set")
        })

    /// `wallet send <member> <amount> <asset>`: prepares, shows the draft, reads the PIN, confirms.
    package static let send = REPLCommand(
        "send", usage: "wallet send <member> <amount> <asset>", summary: "send money to a member (asks for the PIN)",
        details: """
            Shows the draft (amount, fee, total) and asks for the wallet PIN, which is never echoed or logged.
            Prints settled, failed (with the reason) or unknown: an unknown transfer is queried in the
            background and listed by 'wallet pending' until it resolves; it is never sent again.
            """,
        parse: { arguments throws(REPLError) in
            (member: try arguments.next(), amount: try arguments.next(), asset: try arguments.next())
        },
        run: { request, context async throws(REPLError) in
            let wallet = try walletClient(in: context)
            guard let recipient = UserID(request.member) else {
                throw .invalidArgument("'\(request.member)' is not a Matrix user ID like @bob:example.org")
            }
            let asset = try asset(named: request.asset, in: wallet)
            let amount: Amount
            do throws(AmountError) { amount = try asset.amount(request.amount) } catch {
                throw .invalidArgument("'\(request.amount)' is not an amount of \(asset.code): \(error)")
            }
            let draft = try await perform { () async throws(TransferError) in
                try await wallet.prepareTransfer(to: recipient, asset: asset, amount: amount)
            }
            // The draft's ID comes from the service: one line, so nothing can draw a prompt.
            context.output.print(
                TerminalText.escaped(
                    "draft \(draft.id): \(draft.amount) \(asset.code) to \(draft.recipient), fee \(draft.fee), "
                        + "total \(draft.total)"))
            let pin = try await context.readSecret(prompt: "PIN: ")
            let outcome = try await perform { () async throws(TransferError) in
                try await draft.confirm(with: .pin(pin))
            }
            try report(outcome, context)
        })

    /// `wallet pending`: lists the commands whose outcome is not known yet.
    package static let pending = REPLCommand(
        "pending", usage: "wallet pending", summary: "list transfers whose outcome is not known yet",
        run: { context async throws(REPLError) in
            let pending = try walletClient(in: context).pendingCommands.value
            if pending.isEmpty { context.output.print("no pending transfers") }
            context.output.printColumns(
                pending.map { transfer in
                    let summary = transfer.summary
                    return (
                        transfer.commandID.rawValue,
                        "\(summary.total) \(summary.asset.code) to \(summary.recipient) (\(transfer.states.value.caseName))"
                    )
                })
        })

    /// `wallet query <commandID>`: asks the service about a pending command now.
    package static let query = REPLCommand(
        "query", usage: "wallet query <commandID>", summary: "ask the service about a pending transfer now",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { word, context async throws(REPLError) in
            let wallet = try walletClient(in: context)
            guard let commandID = CommandID(uuidString: word) else {
                throw .invalidArgument("'\(word)' is not a command ID (a UUID)")
            }
            guard let pending = wallet.pendingCommands.value.first(where: { $0.commandID == commandID }) else {
                throw .commandFailed("no pending transfer \(commandID) — see 'wallet pending'")
            }
            let outcome = try await perform { () async throws(TransferError) in try await pending.query() }
            try report(outcome, context)
        })

    /// `wallet history`: the member's recent transfers and credits.
    package static let history = REPLCommand(
        "history", usage: "wallet history", summary: "show recent transfers and credits, newest first",
        run: { context async throws(REPLError) in
            let wallet = try walletClient(in: context)
            let entries = try await perform { () async throws(TransferError) in try await wallet.history() }
            if entries.isEmpty { context.output.print("no transfers yet") }
            context.output.printColumns(
                entries.map { entry in
                    let counterpart =
                        switch (entry.kind, entry.direction) {
                        case (.credit, _): "credit"
                        case (.transfer, .outgoing): "to \(entry.recipient)"
                        case (.transfer, .incoming): "from \(entry.sender?.rawValue ?? "?")"
                        }
                    let sign = entry.direction == .outgoing ? "-" : "+"
                    return (
                        "\(sign)\(entry.direction == .outgoing ? entry.total : entry.amount) \(entry.asset.code)",
                        "\(counterpart)  \(entry.transferID)"
                    )
                })
        })

    // MARK: Helpers

    /// The wallet in the session's slot, or the error a member should see.
    static func walletClient(in context: REPLContext) throws(REPLError) -> WalletClient {
        switch context[REPLWalletKey.self] {
        case .available(let wallet) where wallet.member == nil: throw .commandFailed("not signed in")
        case .available(let wallet): wallet
        case .disabled: throw .commandFailed("the wallet module is disabled in this community")
        case nil: throw .commandFailed("not signed in")
        }
    }

    private static func asset(named code: String, in wallet: WalletClient) throws(REPLError) -> Asset {
        if let asset = wallet.configuration.asset(code: code) { return asset }
        let known = wallet.configuration.assets.map(\.code)
        guard known.isEmpty else {
            throw .invalidArgument("unknown asset '\(code)' (this community has: \(known.joined(separator: ", ")))")
        }
        // No asset list configured: let the service decide, at its usual precision of 2.
        return Asset(code: code, precision: 2)
    }

    private static func perform<T>(_ body: () async throws(TransferError) -> T) async throws(REPLError) -> T {
        do throws(TransferError) {
            return try await body()
        } catch {
            throw .commandFailed(message(for: error))
        }
    }

    private static func report(_ outcome: TransferOutcome, _ context: REPLContext) throws(REPLError) {
        switch outcome {
        case .settled(let transfer):
            let summary = transfer.summary
            context.output.print(
                TerminalText.escaped(
                    "settled: \(summary.amount) \(summary.asset.code) to \(summary.recipient) (transfer \(transfer.id))"
                ))
        case .failed(let failure):
            throw .commandFailed("transfer failed: \(message(for: failure))")
        case .unknown(let pending):
            context.output.print(
                "unknown: command \(pending.commandID) may or may not have executed; it is being queried "
                    + "('wallet pending', 'wallet query \(pending.commandID)')")
        }
    }

    /// A member-facing sentence for a failed `wallet pin`. Never contains a PIN: errors carry none.
    static func pinMessage(for error: TransferError) -> String {
        switch error {
        case .failure(.verification(.malformedPIN)): "a PIN is 4 to 12 digits; the PIN was not changed"
        case .failure(.rejected(code: "SY_INVALID_PIN")): "a PIN is 4 to 12 digits; the PIN was not changed"
        case .failure(.rejected(code: "SY_PIN_ALREADY_SET")):
            "the wallet already has a PIN; change it with 'wallet pin --change'"
        case .failure(.rejected(code: "SY_PIN_NOT_SET")): "the wallet has no PIN yet; set one with 'wallet pin'"
        case .failure(.rejected(code: "SY_WRONG_PIN")): "wrong current PIN; the PIN was not changed"
        case .failure(.lockedOut): "the wallet is locked after too many wrong PINs"
        default: message(for: error)
        }
    }

    /// A member-facing sentence for an error. Never contains a PIN: errors carry none.
    static func message(for error: TransferError) -> String {
        switch error {
        case .amount(let error): "invalid amount: \(error)"
        case .failure(let failure): message(for: failure)
        case .transport(let problem): "the wallet service could not be reached (\(caseLabel(of: problem)))"
        case .store(let failure): "the account's store failed: \(failure)"
        case .invalidTransition(let state, let event): "cannot \(event) while \(state)"
        case .cancelled: "cancelled"
        case .notSignedIn: "not signed in"
        case .accountEnded: "the account was switched or signed out; nothing more was done for it"
        }
    }

    /// A member-facing sentence for a failure.
    static func message(for failure: TransferFailure) -> String {
        switch failure {
        case .wrongPIN(let attemptsLeft): "wrong PIN (\(attemptsLeft) attempts left)"
        case .lockedOut: "the wallet is locked after too many wrong PINs"
        case .insufficientFunds: "insufficient balance"
        case .draftExpired: "the draft expired; send again"
        case .recipientUnknown: "the recipient has no wallet in this community"
        case .invalidAmount: "the service refused the amount"
        case .assetUnknown: "unknown asset"
        case .invalidDraft: "the service's draft did not match the request"
        case .notReceived: "the service never received the confirmation; send again"
        case .verification(let error): "could not verify: \(caseLabel(of: error))"
        case .commandIDReused: "command ID already used"
        case .storeUnavailable: "the account's store is unavailable; nothing was sent"
        case .serviceUnreachable(let problem): "the wallet service could not be reached (\(caseLabel(of: problem)))"
        case .rateLimited(let retryAfter):
            "too many requests; nothing was done, try again\(retryAfter.map { " in \(secondsText($0))" } ?? " later")"
        case .rejected(code: "SY_PIN_NOT_SET"): "the wallet has no PIN yet; set one with 'wallet pin'"
        case .rejected(let code): "refused by the service (\(code))"
        }
    }

    /// `3 s`: a wait as the member reads it, rounded up to the second.
    static func secondsText(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return "\(seconds + (attoseconds > 0 ? 1 : 0)) s"
    }
}
