import Foundation
import SymorvaFeatureKit
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// The REPL's state slot for the community: built from the manifest on first use and shared by
/// every feature's commands (wallet, chat, …) through ``community(in:)``.
package enum CommunitySlot: REPLStateKey {
    /// The community the REPL works with.
    package typealias Value = SymorvaCommunity

    /// The data folder variable: where accounts are kept (default: the platform's data folder).
    package static let dataDirectoryKey = "SYMORVA_DATA_DIR"

    /// The REPL's community: the one in the slot, or a new one built from the manifest
    /// (`--config` or `SYMORVA_MANIFEST`) with its data in `SYMORVA_DATA_DIR` (else the default
    /// data folder), launched (the last active account is restored) before it is returned.
    package static func community(in context: REPLContext) async throws(REPLError) -> SymorvaCommunity {
        if let community = context[CommunitySlot.self] { return community }
        guard let manifestPath = context.configuration.manifestPath, !manifestPath.isEmpty else {
            throw .commandFailed("no community manifest: start with --config PATH or set SYMORVA_MANIFEST")
        }
        let configuration: SymorvaConfiguration
        do {
            configuration = try SymorvaConfiguration.load(from: URL(fileURLWithPath: manifestPath))
        } catch {
            throw .commandFailed("cannot use the manifest: \(error)")
        }
        let environment = SymorvaEnvironment(
            dataDirectory: context.configuration.environment[dataDirectoryKey].flatMap { $0.isEmpty ? nil : $0 },
            tracer: context.tracer, logCenter: context.logCenter, deviceDisplayName: "symorva REPL")
        let community = SymorvaCommunity(configuration: configuration, environment: environment)
        context[CommunitySlot.self] = community
        context[REPLChatProviderKey.self] = FixedREPLChatProvider(community.chat)
        await community.launch()
        updateModuleSlots(in: context)
        return community
    }

    /// Restores the community at start-up when a manifest is configured, so that chat and wallet
    /// commands work at once for an account that is still signed in on this device. Without a
    /// manifest, or when it cannot be used, nothing happens here: the first session command
    /// reports the problem.
    package static func launchIfConfigured(in context: REPLContext) async {
        guard let path = context.configuration.manifestPath, !path.isEmpty else { return }
        _ = try? await community(in: context)
    }

    /// Fills the wallet commands' ``REPLWalletKey`` with the community's wallet (which always
    /// shows the active account) while someone is signed in, and empties it otherwise, so that
    /// signed-out commands say "not signed in". Session commands call it after every change.
    /// Incoming verification requests of the active account are announced from here on
    /// (``VerificationAnnouncer``).
    package static func updateModuleSlots(in context: REPLContext) {
        VerificationAnnouncer.follow(context)
        guard let community = context[CommunitySlot.self], community.session.state.value.account != nil else {
            context[REPLWalletKey.self] = nil
            context[REPLStudioKey.self] = nil
            return
        }
        context[REPLWalletKey.self] = community.wallet.map(REPLWalletAccess.available) ?? .disabled
        context[REPLStudioKey.self] = community.aiStudio.map(REPLStudioAccess.available) ?? .disabled
    }
}

/// `login`, `register`, `logout`, `whoami`, `accounts` and `switch`: the session feature in the REPL.
package enum SessionCommands {
    /// Every session command.
    package static var all: [REPLCommand] { [login, register, logout, whoami, accounts, switchAccount] }

    private struct Credentials: Sendable {
        var username: String
        var promptless: Bool
    }

    private static func parseCredentials(_ arguments: inout REPLArguments) throws(REPLError) -> Credentials {
        let username = try arguments.next()
        var promptless = false
        if let flag = arguments.optional() {
            guard flag == "--password-stdin" else { throw arguments.usageError }
            promptless = true
        }
        return Credentials(username: username, promptless: promptless)
    }

    private static func readPassword(_ credentials: Credentials, _ context: REPLContext) async throws(REPLError)
        -> Secret<String>
    {
        try await context.readSecret(prompt: credentials.promptless ? "" : "Password: ")
    }

    /// `login <user> [--password-stdin]`.
    package static let login = REPLCommand(
        "login", usage: "login <user> [--password-stdin]", summary: "sign in (the password is read without echo)",
        details: """
            <user> is a localpart (alice) or a full user ID (@alice:example.org). The password is read
            without echo on a terminal, else from the next input line; --password-stdin reads it without
            a prompt. Signing in to a soft-logged-out account resumes it on the same device.
            """,
        parse: parseCredentials,
        run: { credentials, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let password = try await readPassword(credentials, context)
            do throws(SessionError) {
                if case .softLoggedOut(let account) = community.session.state.value,
                    matches(account, credentials.username)
                {
                    let resumed = try await community.session.reauthenticate(password: password)
                    CommunitySlot.updateModuleSlots(in: context)
                    context.output.print("signed in again as \(resumed)")
                    return
                }
                let account = try await community.session.signIn(username: credentials.username, password: password)
                CommunitySlot.updateModuleSlots(in: context)
                context.output.print("signed in as \(account)")
            } catch {
                throw .commandFailed(message(for: error, username: credentials.username))
            }
        })

    /// `register <user> [--password-stdin]`.
    package static let register = REPLCommand(
        "register", usage: "register <user> [--password-stdin]", summary: "create an account and sign in",
        parse: parseCredentials,
        run: { credentials, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let password = try await readPassword(credentials, context)
            do throws(SessionError) {
                let account = try await community.session.register(username: credentials.username, password: password)
                CommunitySlot.updateModuleSlots(in: context)
                context.output.print("registered and signed in as \(account)")
            } catch {
                throw .commandFailed(message(for: error, username: credentials.username))
            }
        })

    /// `logout`.
    package static let logout = REPLCommand(
        "logout", summary: "sign the active account out (its tokens are revoked, its local data wiped)",
        run: { context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            guard let account = community.session.state.value.account else {
                throw .commandFailed("not signed in")
            }
            do throws(SessionError) { try await community.session.signOut() } catch {
                throw .commandFailed(message(for: error, username: nil))
            }
            CommunitySlot.updateModuleSlots(in: context)
            context.output.print("signed out \(account.userID)")
            if let next = community.session.state.value.account { context.output.print("now active: \(next)") }
        })

    /// `whoami`.
    package static let whoami = REPLCommand(
        "whoami", summary: "show the active account",
        run: { context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            context.output.print(describe(community.session.state.value))
        })

    /// `accounts`.
    package static let accounts = REPLCommand(
        "accounts", summary: "list the accounts on this device (* marks the active one)",
        run: { context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let accounts = community.session.accounts.value
            guard !accounts.isEmpty else {
                context.output.print("no accounts")
                return
            }
            let active = community.session.state.value.account?.id
            for account in accounts {
                context.output.print("\(account.id == active ? "*" : " ") \(account)")
            }
        })

    /// `switch <user>`.
    package static let switchAccount = REPLCommand(
        "switch", usage: "switch <user>", summary: "make another account of this device the active one",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { username, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            guard let account = community.session.accounts.value.first(where: { matches($0, username) }) else {
                throw .commandFailed("no account '\(username)' on this device — see 'accounts'")
            }
            do throws(SessionError) {
                let active = try await community.session.switchAccount(to: account)
                CommunitySlot.updateModuleSlots(in: context)
                context.output.print("switched to \(active)")
            } catch {
                throw .commandFailed(message(for: error, username: username))
            }
        })

    // MARK: Text

    /// Whether `name` (a localpart or a full user ID) names `account`.
    static func matches(_ account: Account, _ name: String) -> Bool {
        account.userID.rawValue == name || account.userID.localpart == name
    }

    /// One line about the session state.
    static func describe(_ state: SessionState) -> String {
        switch state {
        case .launching: "starting"
        case .signedOut: "not signed in"
        case .signingIn: "signing in"
        case .restoring(let account): "\(account): restoring"
        case .signedIn(let account): "\(account) on \(account.homeserverURL)"
        case .softLoggedOut(let account):
            "\(account): logged out by the server — 'login \(account.userID.localpart)' resumes on this device"
        case .switching(let account): "switching to \(account)"
        case .signingOut(let account): "\(account): signing out"
        case .unavailable(let account, let error): "\(account): unavailable (\(error)) — log in again or log out"
        }
    }

    /// A plain sentence for a session error.
    static func message(for error: SessionError, username: String?) -> String {
        switch error {
        case .invalidCredentials: return "wrong user name or password"
        case .userDeactivated: return "this account was deactivated"
        case .userInUse: return "the user name '\(username ?? "")' is already taken"
        case .invalidUsername: return "'\(username ?? "")' is not an allowed user name"
        case .registrationDisabled: return "registration is disabled on this homeserver"
        case .unsupportedRegistrationFlow: return "this homeserver requires registration steps the SDK cannot complete"
        case .unreachable(let failure): return "cannot reach the homeserver (\(describe(failure)))"
        case .discoveryFailed(let reason): return "cannot find the homeserver: \(reason)"
        case .unsupportedServer: return "the homeserver's Matrix version is not supported"
        case .noHomeserver: return "no homeserver"
        case .rateLimited(let retryAfter):
            return "too many attempts; try again"
                + (retryAfter.map { " in \($0.components.seconds + 1) s" } ?? " later")
        case .tokenExpired, .softLoggedOut, .unknownToken: return "the session has ended; log in again"
        case .accountMismatch(let expected, _): return "that is not \(expected); log in as \(expected.localpart)"
        case .notSignedIn: return "not signed in"
        case .alreadySignedIn(let userID):
            return "\(userID) is already signed in on this device ('accounts' lists them, "
                + "'switch \(userID.localpart)' makes it the active one)"
        case .invalidResponse: return "the homeserver sent an answer the SDK cannot read"
        case .serverError(let status, let errcode): return "the homeserver failed (\(status) \(errcode ?? ""))"
        case .store(let failure): return "the local store failed: \(failure)"
        case .cancelled: return "cancelled"
        case .unsupportedAuthenticationFlow:
            return "this homeserver requires confirmation steps the SDK cannot complete (it can give the password)"
        case .authorizationInProgress: return "another confirmation with the password is under way; try again"
        }
    }

    private static func describe(_ failure: NetworkFailure) -> String {
        switch failure {
        case .timedOut: "timed out"
        case .cannotResolveHost: "unknown host"
        case .cannotConnect: "connection refused"
        case .secureConnectionFailed: "TLS failed"
        case .connectionLost: "connection lost"
        case .other(let summary): summary
        }
    }
}
