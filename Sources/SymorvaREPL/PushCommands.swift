import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// The push commands: `pusher set|list|remove` and `notifications`.
package enum PushCommands {
    /// The commands to register: the `pusher` group and `notifications`.
    package static var commands: [REPLCommand] { [pusher, notifications] }

    /// `pusher set|list|remove|tag`.
    package static let pusher = REPLCommand.group(
        "pusher", summary: "the signed-in account's push notification pushers",
        details: """
            'pusher set' registers a pushkey with the community's reference Push Gateway and sets an
            HTTP pusher to it, with this installation's profile tag.
            """,
        subcommands: [set, list, remove, tag])

    struct SetArguments: Sendable {
        var pushkey: String?
        var appID = "org.symorva.repl.dev"
        var gatewayURL: String?
    }

    /// `pusher set [--pushkey <key>] [--app-id <id>] [--gateway <url>]`.
    static let set = REPLCommand(
        "set", usage: "pusher set [--pushkey <key>] [--app-id <id>] [--gateway <url>]",
        summary: "set an HTTP pusher (default: the community's reference gateway)",
        parse: { arguments throws(REPLError) -> SetArguments in
            var parsed = SetArguments()
            while let word = arguments.optional() {
                switch word {
                case "--pushkey": parsed.pushkey = try arguments.next()
                case "--app-id": parsed.appID = try arguments.next()
                case "--gateway": parsed.gatewayURL = try arguments.next()
                default: throw arguments.usageError
                }
            }
            return parsed
        },
        run: { parsed, context async throws(REPLError) in
            let push = try await signedIn(context)
            let pushkey = parsed.pushkey ?? "repl-\(UInt64.random(in: 0...UInt64.max))"
            let gateway = parsed.gatewayURL ?? push.communityGatewayURL
            try await perform { () async throws(PushError) in
                if parsed.gatewayURL == nil {
                    try await push.registerWithCommunityGateway(pushkey: pushkey, appID: parsed.appID)
                }
                try await push.setPusher(
                    pushkey: pushkey, appID: parsed.appID, appDisplayName: "symorva REPL",
                    deviceDisplayName: "symorva REPL", gatewayURL: gateway)
            }
            context.output.print(
                "pusher set: \(TerminalText.escaped(parsed.appID)) pushkey \(TerminalText.escaped(pushkey))")
        })

    /// `pusher list`.
    static let list = REPLCommand(
        "list", usage: "pusher list", summary: "list the account's pushers",
        run: { context async throws(REPLError) in
            let push = try await signedIn(context)
            let pushers = try await perform { () async throws(PushError) -> [Pusher] in try await push.pushers() }
            let mine = try? push.profileTag()
            if pushers.isEmpty { context.output.print("no pushers") }
            for (index, pusher) in pushers.enumerated() {
                let marker = pusher.profileTag == mine ? "  (this installation)" : ""
                context.output.print(
                    "\(index + 1). \(TerminalText.escaped("\(pusher.appID)  \(pusher.pushkey)  \(pusher.gatewayURL)"))\(marker)"
                )
            }
        })

    /// `pusher remove`.
    static let remove = REPLCommand(
        "remove", usage: "pusher remove", summary: "remove this installation's pusher",
        run: { context async throws(REPLError) in
            let push = try await signedIn(context)
            try await perform { () async throws(PushError) in try await push.removePusher() }
            context.output.print("pusher removed")
        })

    /// `pusher tag`.
    static let tag = REPLCommand(
        "tag", usage: "pusher tag", summary: "show this installation's profile tag",
        run: { context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let tag = try await perform { () async throws(PushError) -> String in try community.push.profileTag() }
            context.output.print(tag)
        })

    /// `notifications`: the counts per room and in total.
    package static let notifications = REPLCommand(
        "notifications", summary: "unread notification and highlight counts, per room and in total",
        run: { context async throws(REPLError) in
            let push = try await signedIn(context)
            let counts = push.counts.value
            for (roomID, room) in counts.rooms.sorted(by: { $0.key < $1.key }) {
                context.output.print(
                    "\(TerminalText.escaped(roomID.rawValue))  \(room.notifications) notifications, \(room.highlights) highlights"
                )
            }
            context.output.print("total: \(counts.notifications) notifications, \(counts.highlights) highlights")
        })

    static func signedIn(_ context: REPLContext) async throws(REPLError) -> PushClient {
        let community = try await CommunitySlot.community(in: context)
        guard community.session.state.value.account != nil else { throw .commandFailed("not signed in") }
        return community.push
    }

    static func perform<T: Sendable>(_ body: () async throws(PushError) -> T) async throws(REPLError) -> T {
        do { return try await body() } catch { throw .commandFailed(message(for: error)) }
    }

    /// A member-facing sentence for a push error.
    static func message(for error: PushError) -> String {
        switch error {
        case .notSignedIn: "not signed in"
        case .accountEnded: "the account was switched or signed out"
        case .invalidInput(let what): "invalid \(what)"
        case .notFound: "not found"
        case .forbidden: "not allowed"
        case .rateLimited: "too many requests; try again later"
        case .server(let code, let status): "the server refused (\(code), \(status))"
        case .transport(let problem): "the server could not be reached (\(caseLabel(of: problem)))"
        case .malformedResponse: "the server's answer was not understood"
        case .storage(let problem): "the profile tag could not be kept (\(problem))"
        }
    }
}
