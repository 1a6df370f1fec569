import SymorvaAIStudio
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// What the studio commands can reach in the signed-in community.
///
/// The session commands put this in the ``REPLStudioKey`` slot: `.available(studio)` when the
/// community enables the AI studio, `.disabled` when its manifest does not. An empty slot means
/// nobody is signed in.
package enum REPLStudioAccess: Sendable {
    /// The community's studio (`community.aiStudio`), which acts for the active account.
    case available(StudioClient)
    /// The community is signed in to, but its manifest disables the AI studio.
    case disabled
}

/// The state slot the studio commands read their studio from.
package enum REPLStudioKey: REPLStateKey {
    /// What the slot holds.
    package typealias Value = REPLStudioAccess
}

/// Shows the consent sheet in the REPL and reads the member's answer (`yes` or `no`) as the
/// next input line. Anything but `yes`/`y` is a no.
struct REPLConsentPresenter: ConsentPresenter {
    let context: REPLContext

    func present(_ sheet: ConsentSheet) async -> ConsentAnswer {
        context.output.print(TerminalText.escaped("consent: \(sheet.text)"))
        guard let answer = try? await context.readSecret(prompt: "Share? (yes/no): ") else { return .unavailable }
        switch answer.exposedValue.trimmingCharacters(in: .whitespaces).lowercased() {
        case "yes", "y": return .approved
        default: return .declined
        }
    }
}

/// The `studio` command group: grant, summarize, revoke, grants.
package enum StudioCommands {
    /// The commands to register: the `studio` group.
    package static var commands: [REPLCommand] { [studio] }

    /// `studio grant|summarize|revoke|grants`.
    package static let studio = REPLCommand.group(
        "studio", summary: "the AI studio: consent-first grants and summaries",
        details: """
            Needs a signed-in community whose manifest enables the aiStudio module. Every grant shows
            the consent sheet first and asks yes/no; nothing is sent to the studio before a yes.
            """,
        subcommands: [grant, summarize, revoke, grants])

    private struct GrantArguments: Sendable {
        var room: String
        var scope: GrantScope
    }

    /// `studio grant <room> --messages <id>… | --since <id>`.
    package static let grant = REPLCommand(
        "grant", usage: "studio grant <room> --messages <id>… | --since <id>",
        summary: "ask for a grant (shows the consent sheet, asks yes/no)",
        details: """
            --messages: exactly these messages; --since: the conversation from this message on.
            The grant lives for the community's grant lifetime (one hour by default).
            """,
        parse: { arguments throws(REPLError) in
            let room = try arguments.next()
            switch try arguments.next(oneOf: ["--messages", "--since"]) {
            case "--messages":
                let ids = try arguments.rest(minimum: 1)
                return GrantArguments(room: room, scope: .selectedMessages(ids.map { EventID($0) }))
            default:
                let since = try arguments.next()
                return GrantArguments(room: room, scope: .conversation(since: EventID(since)))
            }
        },
        run: { request, context async throws(REPLError) in
            let studio = try studioClient(in: context)
            guard request.room.hasPrefix("!") else {
                throw .invalidArgument("'\(request.room)' is not a room ID like !abc:example.org")
            }
            studio.consentPresenter = REPLConsentPresenter(context: context)
            let grant = try await perform { () async throws(StudioError) in
                try await studio.requestGrant(for: RoomID(request.room), scope: request.scope)
            }
            context.output.print(TerminalText.escaped("grant \(grant.id): \(describe(grant.scope)), \(grant.status)"))
        })

    /// `studio summarize [<grant>]`.
    package static let summarize = REPLCommand(
        "summarize", usage: "studio summarize [<grant>]", summary: "summarize a grant's messages (default: the newest)",
        parse: { arguments throws(REPLError) in arguments.optional() },
        run: { id, context async throws(REPLError) in
            let studio = try studioClient(in: context)
            let grant = try handle(id, in: studio)
            let summary = try await perform { () async throws(StudioError) in try await studio.summarize(using: grant) }
            context.output.print("summary of \(summary.itemCount) message(s) (\(summary.backend)):")
            for point in summary.points {
                let cited = point.eventIDs.map(\.rawValue).joined(separator: ", ")
                context.output.print(TerminalText.escaped("  - \(point.text) [\(cited)]"))
            }
        })

    /// `studio revoke <grant>`.
    package static let revoke = REPLCommand(
        "revoke", usage: "studio revoke <grant>", summary: "revoke a grant at once",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { id, context async throws(REPLError) in
            let studio = try studioClient(in: context)
            let grant = try handle(id, in: studio)
            try await perform { () async throws(StudioError) in try await studio.revoke(grant) }
            context.output.print(TerminalText.escaped("grant \(grant.id) revoked"))
        })

    /// `studio grants`.
    package static let grants = REPLCommand(
        "grants", usage: "studio grants", summary: "list this run's grants and their status",
        run: { context async throws(REPLError) in
            let grants = try studioClient(in: context).grants.value
            if grants.isEmpty { context.output.print("no grants") }
            context.output.printColumns(
                grants.map {
                    (TerminalText.escaped($0.id.rawValue), TerminalText.escaped("\($0.status)  \(describe($0.scope))"))
                })
        })

    // MARK: Helpers

    static func describe(_ scope: GrantScope) -> String {
        switch scope {
        case .selectedMessages(let ids): ids.count == 1 ? "1 selected message" : "\(ids.count) selected messages"
        case .conversation(let since): "messages from \(since.rawValue) on"
        }
    }

    /// The studio in the session's slot, or the error a member should see.
    static func studioClient(in context: REPLContext) throws(REPLError) -> StudioClient {
        switch context[REPLStudioKey.self] {
        case .available(let studio) where studio.member == nil: throw .commandFailed("not signed in")
        case .available(let studio): studio
        case .disabled: throw .commandFailed("the AI studio is disabled in this community")
        case nil: throw .commandFailed("not signed in")
        }
    }

    private static func handle(_ id: String?, in studio: StudioClient) throws(REPLError) -> ConversationGrant {
        if let id {
            guard let grant = studio.grant(GrantID(id)) else { throw .invalidArgument("no grant '\(id)' in this run") }
            return grant
        }
        guard let newest = studio.grants.value.last(where: { $0.status == .active }),
            let grant = studio.grant(newest.id)
        else { throw .commandFailed("no active grant; ask for one with 'studio grant'") }
        return grant
    }

    private static func perform<T>(_ body: () async throws(StudioError) -> T) async throws(REPLError) -> T {
        do throws(StudioError) {
            return try await body()
        } catch {
            throw .commandFailed(message(for: error))
        }
    }

    /// What the member reads for a studio error.
    static func message(for error: StudioError) -> String {
        switch error {
        case .declined: "declined: nothing was shared"
        case .consentUnavailable: "no consent sheet could be shown: nothing was shared"
        case .grantNotLive(let status): "the grant is \(status): nothing was sent"
        case .contentUnavailable(let id): "message \(id.rawValue) cannot be read on this device: nothing was sent"
        case .busy: "a summary of this grant is already being made"
        case .notSignedIn: "not signed in"
        case .accountEnded: "the grant belongs to an account that is no longer active"
        case .cancelled: "cancelled"
        case .store(let failure): "the account's store failed (\(failure))"
        case .failure(let failure): failureMessage(failure)
        }
    }

    static func failureMessage(_ failure: StudioFailure) -> String {
        switch failure {
        case .notRoomMember: "you are not in that room"
        case .grantRevoked: "the grant was revoked"
        case .grantExpired: "the grant has expired"
        case .grantForbidden: "the grant belongs to another member"
        case .grantUnknown: "the studio does not know that grant"
        case .outOfScope(let mismatch): "the content does not match the grant (\(mismatch)): nothing was sent"
        case .summarizerUnavailable: "the studio's summarizer failed"
        case .serviceUnreachable(let problem): "the studio could not be reached (\(problem))"
        case .rateLimited: "the studio asks to slow down; try again in a moment"
        case .declined: "declined: nothing was shared"
        case .consentUnavailable: "no consent sheet could be shown"
        case .rejected(let code): "the studio refused (\(code))"
        }
    }
}
