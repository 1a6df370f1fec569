import SymorvaChat
import SymorvaKit
import SymorvaMachines

extension ChatCommands {
    /// `knock`, `knocks`, `power`, `join-rule`, `history`: room management (power levels are
    /// checked before anything is sent).
    static var roomManagementCommands: [REPLCommand] { [knock, knocks, power, joinRule, history] }

    static let knock = REPLCommand(
        "knock", usage: "knock <room-id-or-alias> [<reason>…]", summary: "ask to join a room that takes knocks",
        parse: { arguments throws(REPLError) in
            let target = try arguments.next()
            let reason = try arguments.rest().joined(separator: " ")
            return (target, reason.isEmpty ? nil : reason)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try await failing { () async throws(ChatError) in
                try await chat.knock(arguments.0, reason: arguments.1)
            }
            context.output.print("knocked on \(roomID)")
        })

    static let knocks = REPLCommand(
        "knocks", usage: "knocks [<room>] [accept|deny <@user>]",
        summary: "list who knocks on a room (the open one by default), or let one in or turn them down",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            let chat = try client(context)
            var words = words[...]
            let roomID: RoomID
            if let first = words.first, first != "accept", first != "deny" {
                roomID = try resolveRoom(first, context)
                words = words.dropFirst()
            } else {
                roomID = try current(context).id
            }
            if let action = words.first {
                guard words.count == 2, let user = UserID(words[words.startIndex + 1]) else {
                    throw .invalidArgument("usage: knocks [<room>] accept|deny <@user>")
                }
                try await failing { () async throws(ChatError) in
                    if action == "accept" {
                        try await chat.acceptKnock(from: user, roomID: roomID)
                    } else {
                        try await chat.denyKnock(from: user, roomID: roomID)
                    }
                }
                context.output.print(action == "accept" ? "invited \(user)" : "turned down \(user)")
                return
            }
            let knocking = try await failing { () async throws(ChatError) in try await chat.knocks(roomID: roomID) }
            context.output.print(knocking.isEmpty ? "no knocks" : knocking.map(\.rawValue).joined(separator: "\n"))
        })

    static let power = REPLCommand(
        "power", usage: "power <@user> <level>", summary: "set a member's power level in the open conversation",
        parse: { arguments throws(REPLError) in
            let user = try arguments.next()
            guard let userID = UserID(user) else { throw .invalidArgument("'\(user)' is not a user ID") }
            let text = try arguments.next()
            guard let level = Int(text) else { throw .invalidArgument("'\(text)' is not a power level") }
            return (userID, level)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try current(context).id
            try await failing { () async throws(ChatError) in
                try await chat.setPowerLevel(arguments.1, for: arguments.0, roomID: roomID)
            }
            context.output.print("\(arguments.0) is at \(arguments.1)")
        })

    static let joinRule = REPLCommand(
        "join-rule", usage: "join-rule public|invite|knock|restricted <space-id>…",
        summary: "set who may join the open conversation",
        parse: { arguments throws(REPLError) -> JoinRule in
            let rule = try arguments.next()
            let rooms = try arguments.rest().map { RoomID($0) }
            switch rule {
            case "public": return JoinRule.public
            case "invite": return JoinRule.invite
            case "knock": return JoinRule.knock
            case "restricted": return JoinRule.restricted(allowedRooms: rooms)
            default: throw .invalidArgument("'\(rule)' is not public, invite, knock or restricted")
            }
        },
        run: { rule, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try current(context).id
            try await failing { () async throws(ChatError) in try await chat.setJoinRule(rule, roomID: roomID) }
            context.output.print("join rule set")
        })

    static let history = REPLCommand(
        "history", usage: "history world_readable|shared|invited|joined",
        summary: "set who may read the open conversation's history",
        parse: { arguments throws(REPLError) -> HistoryVisibility in
            let text = try arguments.next()
            guard let visibility = HistoryVisibility(rawValue: text) else {
                throw .invalidArgument("'\(text)' is not world_readable, shared, invited or joined")
            }
            return visibility
        },
        run: { visibility, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try current(context).id
            try await failing { () async throws(ChatError) in
                try await chat.setHistoryVisibility(visibility, roomID: roomID)
            }
            context.output.print("history visibility set to \(visibility.rawValue)")
        })
}
