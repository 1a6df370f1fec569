import SymorvaChat
import SymorvaKit
import SymorvaMachines

extension ChatCommands {
    /// `typing`: typing notifications of the open conversation.
    static var conversationCommands: [REPLCommand] { [typing] }

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
