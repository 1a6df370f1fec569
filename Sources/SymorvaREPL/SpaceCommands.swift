import SymorvaChat
import SymorvaKit
import SymorvaMachines

/// The REPL slot that holds the hierarchy `space` pages through.
enum SpaceREPLState: REPLStateKey {
    typealias Value = SpaceHierarchy
}

extension ChatCommands {
    /// `spaces` lists the account's joined spaces; `space <space> | community [--more]` pages a
    /// space's rooms from the server (the community's with `community`).
    static var spaceCommands: [REPLCommand] { [spaces, space] }

    static let spaces = REPLCommand(
        "spaces", summary: "list the joined spaces",
        run: { context async throws(REPLError) in
            let chat = try client(context)
            let spaces = try await failing { () async throws(ChatError) in try await chat.joinedSpaces() }
            guard !spaces.isEmpty else {
                context.output.print("no spaces")
                return
            }
            for (index, space) in spaces.enumerated() {
                context.output.print(
                    "\(index + 1). \(TerminalText.escaped("\(space.name ?? "(unnamed)")  \(space.id)"))")
            }
        })

    static let space = REPLCommand(
        "space", usage: "space <space-id> | community | --more",
        summary: "page a space's rooms from the server (the community's space with 'community'; --more: the next page)",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { target, context async throws(REPLError) in
            let chat = try client(context)
            let hierarchy: SpaceHierarchy
            if target == "--more" {
                guard let current = context[SpaceREPLState.self] else {
                    throw .commandFailed("no space listed — use 'space <space-id>' first")
                }
                hierarchy = current
            } else if target == "community" {
                hierarchy = try await failing { () async throws(ChatError) in
                    try await chat.communityRooms(pageSize: 20)
                }
            } else {
                guard target.hasPrefix("!") else { throw .invalidArgument("'\(target)' is not a room ID") }
                hierarchy = try await failing { () async throws(ChatError) in
                    try chat.hierarchy(of: RoomID(target), pageSize: 20)
                }
            }
            context[SpaceREPLState.self] = hierarchy
            let before = hierarchy.state.value.rooms.count
            try await failing { () async throws(ChatError) in try await hierarchy.loadNextPage() }
            let state = hierarchy.state.value
            for (index, room) in state.rooms.enumerated().dropFirst(before) {
                var flags: [String] = []
                if room.isSpace { flags.append("space") }
                if let rule = room.joinRule { flags.append(rule) }
                flags.append("\(room.joinedMembers) members")
                let name = room.name ?? room.canonicalAlias ?? "(unnamed)"
                context.output.print(
                    "\(index + 1). \(TerminalText.escaped("\(name)  \(room.id)"))  [\(flags.joined(separator: ", "))]")
            }
            context.output.print(
                state.isComplete
                    ? "\(state.rooms.count) rooms, all listed" : "\(state.rooms.count) rooms so far — 'space --more'")
        })
}
