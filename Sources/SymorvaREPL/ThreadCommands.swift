import SymorvaChat
import SymorvaKit
import SymorvaMachines

extension ChatCommands {
    /// `thread <message>`: open a message's thread; `threads`: the room's thread list;
    /// `thread-back <count>`: older replies of the open thread; `thread-read`: a threaded receipt.
    static var threadCommands: [REPLCommand] { [thread, threads, threadBack, threadRead] }

    static let thread = REPLCommand(
        "thread", usage: "thread <message>",
        summary:
            "open the thread of a message of the open conversation: its replies print as they arrive, '[in thread]'",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { reference, context async throws(REPLError) in
            let conversation = try current(context)
            let root = try resolveEvent(reference, context)
            guard let printer = state(context).printer else { throw .commandFailed("no open conversation") }
            let thread = conversation.thread(root)
            let stop = thread.timeline.subscribe { printer.show($0) }
            state(context).openingThread(thread, stop: stop)
            context.output.print("opened thread \(root)")
        })

    static let threads = REPLCommand(
        "threads", usage: "threads",
        summary: "list the open conversation's threads (fetched from the server), most recently active first",
        run: { context async throws(REPLError) in
            let conversation = try current(context)
            let list = try await failing { () async throws(ChatError) in
                var list = try await conversation.loadThreads()
                while try await conversation.loadMoreThreads() { list = try await conversation.threads() }
                return list
            }
            if list.isEmpty { context.output.print("no threads") }
            for (index, thread) in list.enumerated() {
                var line =
                    "\(index + 1). \(thread.rootEventID) — \(thread.replyCount) \(thread.replyCount == 1 ? "reply" : "replies")"
                if let sender = thread.latestReplySender { line += ", latest by \(sender)" }
                if thread.unreadCount > 0 { line += ", \(thread.unreadCount) unread" }
                if thread.hasParticipated { line += ", you replied" }
                context.output.print(line)
            }
        })

    static let threadBack = REPLCommand(
        "thread-back", usage: "thread-back <count>", summary: "load older replies of the open thread",
        parse: { arguments throws(REPLError) in try arguments.nextInteger(in: 1...1000) },
        run: { count, context async throws(REPLError) in
            guard let thread = state(context).thread else {
                throw .commandFailed("no open thread — use 'thread <message>'")
            }
            let pagination = await thread.paginateBackwards(count)
            if let error = pagination.lastError { throw .commandFailed("pagination failed: \(error)") }
            if pagination.hasReachedStart { context.output.print("(start of thread)") }
        })

    static let threadRead = REPLCommand(
        "thread-read", usage: "thread-read",
        summary: "mark the open thread read: a threaded receipt at its newest reply",
        run: { context async throws(REPLError) in
            guard let thread = state(context).thread else {
                throw .commandFailed("no open thread — use 'thread <message>'")
            }
            try await failing { () async throws(ChatError) in try await thread.markRead() }
            context.output.print("marked thread read")
        })
}
