import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// The `directory` command group: the homeserver's public rooms (signed out too), the
/// community's member directory and the homeserver's user directory.
package enum DirectoryCommands {
    /// The commands to register: the `directory` group.
    package static var commands: [REPLCommand] { [directory] }

    /// `directory rooms|people|users|resolve|join|publish`.
    package static let directory = REPLCommand.group(
        "directory", summary: "public rooms, the member directory, the user directory",
        details: "'directory rooms' works signed out; the others need a signed-in community.",
        subcommands: [rooms, people, users, resolve, join, publish])

    struct RoomsArguments: Sendable {
        var server: String?
        var since: String?
        var term: String
    }

    /// `directory rooms [--server <name>] [--since <token>] [<search>…]`.
    static let rooms = REPLCommand(
        "rooms", usage: "directory rooms [--server <name>] [--since <token>] [<search>…]",
        summary: "list or search the homeserver's public rooms (signed out too)",
        details: "Prints one page with the server's total estimate; pass the printed 'next' token as --since.",
        parse: { arguments throws(REPLError) -> RoomsArguments in
            var parsed = RoomsArguments(term: "")
            var words: [String] = []
            while let word = arguments.optional() {
                switch word {
                case "--server": parsed.server = try arguments.next()
                case "--since": parsed.since = try arguments.next()
                default: words.append(word)
                }
            }
            parsed.term = words.joined(separator: " ")
            return parsed
        },
        run: { parsed, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let page = try await perform {
                () async throws(DirectoryError) -> DirectoryPage<PublicRoom> in
                try await community.publicRooms.page(
                    term: parsed.term, server: parsed.server, since: parsed.since.map(DirectoryPageToken.init))
            }
            print(page, context)
        })

    static func print(_ page: DirectoryPage<PublicRoom>, _ context: REPLContext) {
        if page.items.isEmpty { context.output.print("no public rooms") }
        for (index, room) in page.items.enumerated() {
            let name = room.name ?? room.canonicalAlias ?? room.roomID.rawValue
            let alias = room.canonicalAlias.map { "  \($0)" } ?? ""
            context.output.print(
                "\(index + 1). \(TerminalText.escaped("\(name)\(alias)  \(room.roomID)"))  [\(room.joinedMemberCount) joined]"
            )
        }
        var footer = "total: \(page.totalEstimate.map(String.init) ?? "unknown")"
        if let next = page.nextPage { footer += "  next: \(TerminalText.escaped(next.rawValue))" }
        context.output.print(footer)
    }

    struct PeopleArguments: Sendable {
        var role: String?
        var term: String
    }

    /// `directory people [--role <role>] [<search>…]`.
    static let people = REPLCommand(
        "people", usage: "directory people [--role <role>] [<search>…]",
        summary: "list or search the community's members, with their roles",
        parse: { arguments throws(REPLError) -> PeopleArguments in
            var parsed = PeopleArguments(term: "")
            var words: [String] = []
            while let word = arguments.optional() {
                if word == "--role" { parsed.role = try arguments.next() } else { words.append(word) }
            }
            parsed.term = words.joined(separator: " ")
            return parsed
        },
        run: { parsed, context async throws(REPLError) in
            let directory = try await memberDirectory(context)
            let results = try await perform { () async throws(DirectoryError) -> DirectoryResults<DirectoryMember> in
                try await directory.members(role: parsed.role).search(parsed.term)
            }
            if results.items.isEmpty { context.output.print("no members") }
            for (index, member) in results.items.enumerated() {
                let roles = member.roles.isEmpty ? "" : "  [" + member.roles.joined(separator: ", ") + "]"
                let name = member.displayName.map { "\($0)  " } ?? ""
                context.output.print("\(index + 1). \(TerminalText.escaped("\(name)\(member.userID)\(roles)"))")
            }
            context.output.print("total: \(results.totalEstimate.map(String.init) ?? "unknown")")
        })

    /// `directory users <search>…`.
    static let users = REPLCommand(
        "users", usage: "directory users <search>…", summary: "search the homeserver's user directory",
        parse: { arguments throws(REPLError) in try arguments.rest(minimum: 1).joined(separator: " ") },
        run: { term, context async throws(REPLError) in
            let directory = try await memberDirectory(context)
            let results = try await perform { () async throws(DirectoryError) -> DirectoryResults<DirectoryUser> in
                try await directory.users().search(term)
            }
            if results.items.isEmpty { context.output.print("no users") }
            for (index, user) in results.items.enumerated() {
                let name = user.displayName.map { "\($0)  " } ?? ""
                context.output.print("\(index + 1). \(TerminalText.escaped("\(name)\(user.userID)"))")
            }
        })

    /// `directory resolve <#alias:server>`.
    static let resolve = REPLCommand(
        "resolve", usage: "directory resolve <#alias:server>", summary: "the room an alias names",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { alias, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let roomID = try await perform { () async throws(DirectoryError) -> RoomID in
                try await community.publicRooms.resolve(alias: alias)
            }
            context.output.print(TerminalText.escaped(roomID.rawValue))
        })

    /// `directory join <room ID or #alias>`.
    static let join = REPLCommand(
        "join", usage: "directory join <room ID or #alias>", summary: "join a listed room",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { room, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let roomID = try await perform { () async throws(DirectoryError) -> RoomID in
                try await community.publicRooms.join(roomIDOrAlias: room)
            }
            context.output.print("joined \(TerminalText.escaped(roomID.rawValue))")
        })

    struct PublishArguments: Sendable {
        var roomID: RoomID
        var published: Bool
    }

    /// `directory publish <room ID> on|off`.
    static let publish = REPLCommand(
        "publish", usage: "directory publish <room ID> on|off",
        summary: "publish a room in the room directory, or take it out (room admins)",
        parse: { arguments throws(REPLError) -> PublishArguments in
            let room = try arguments.next()
            guard room.hasPrefix("!") else { throw .invalidArgument("'\(room)' is not a room ID") }
            return PublishArguments(roomID: RoomID(room), published: try arguments.next(oneOf: ["on", "off"]) == "on")
        },
        run: { parsed, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            try await perform { () async throws(DirectoryError) in
                try await community.publicRooms.setPublished(parsed.published, roomID: parsed.roomID)
            }
            context.output.print(parsed.published ? "published" : "unpublished")
        })

    static func memberDirectory(_ context: REPLContext) async throws(REPLError)
        -> DirectoryClient
    {
        let community = try await CommunitySlot.community(in: context)
        guard community.session.state.value.account != nil else { throw .commandFailed("not signed in") }
        guard let directory = community.directory else {
            throw .commandFailed("the community's manifest disables the directory module")
        }
        return directory
    }

    static func perform<T: Sendable>(_ body: () async throws(DirectoryError) -> T) async throws(REPLError) -> T {
        do { return try await body() } catch { throw .commandFailed(message(for: error)) }
    }

    /// A member-facing sentence for a directory error.
    static func message(for error: DirectoryError) -> String {
        switch error {
        case .notSignedIn: "not signed in"
        case .accountEnded: "the account was switched or signed out"
        case .moduleDisabled: "the community's manifest disables the directory module"
        case .signInRequired: "the homeserver answers this only when signed in"
        case .invalidInput(let what): "invalid \(what)"
        case .notFound: "not found"
        case .forbidden(let needed?, let has?): "not allowed: needs power level \(needed), the account has \(has)"
        case .forbidden: "not allowed"
        case .rateLimited: "too many requests; try again later"
        case .server(let code, let status): "the server refused (\(code), \(status))"
        case .transport(let problem): "the server could not be reached (\(caseLabel(of: problem)))"
        case .malformedResponse: "the server's answer was not understood"
        }
    }
}
