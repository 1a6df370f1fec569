import SymorvaChat
import SymorvaKit
import SymorvaMachines

extension ChatCommands {
    /// `typing`: typing notifications of the open conversation; `ignore`: ignoring users.
    static var conversationCommands: [REPLCommand] { [typing, ignore] }

    static let ignore = REPLCommand(
        "ignore", usage: "ignore [<@user> | --undo <@user>]",
        summary: "ignore a user (their messages hidden, their invites dropped); alone: who is ignored",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            let chat = try client(context)
            switch words.count {
            case 0:
                let users: [UserID]
                do throws(ChatError) { users = try chat.ignoredUsers() } catch { throw .failure(error) }
                context.output.print(
                    users.isEmpty ? "nobody is ignored" : "ignored: " + users.map(\.rawValue).joined(separator: ", "))
            case 1, 2:
                let undo = words.count == 2
                guard !undo || words[0] == "--undo", let user = UserID(words[words.count - 1]) else {
                    throw .usage("ignore [<@user> | --undo <@user>]")
                }
                try await failing { () async throws(ChatError) in
                    if undo { try await chat.unignore(user) } else { try await chat.ignore(user) }
                }
                context.output.print(undo ? "no longer ignoring \(user)" : "ignoring \(user)")
            default:
                throw .usage("ignore [<@user> | --undo <@user>]")
            }
        })

    static let typing = REPLCommand(
        "typing", usage: "typing [on|off]",
        summary: "tell the open conversation you are typing (30 s) or stopped; alone: who is typing",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            let conversation = try current(context)
            switch words.first {
            case nil:
                let users = conversation.typing.value
                context.output.print(
                    users.isEmpty ? "nobody is typing" : "typing: " + users.map(\.rawValue).joined(separator: ", "))
            case "on", "off":
                let isTyping = words.first == "on"
                try await failing { () async throws(ChatError) in try await conversation.setTyping(isTyping) }
                context.output.print(isTyping ? "typing" : "stopped typing")
            default:
                throw .usage("typing [on|off]")
            }
        })
}
