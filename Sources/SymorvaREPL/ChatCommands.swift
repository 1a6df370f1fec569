import SymorvaChat
import SymorvaKit
import SymorvaMachines
import Synchronization

/// Gives chat commands their chat client.
///
/// The REPL's community (``CommunitySlot``) stores a provider under ``REPLChatProviderKey``
/// that answers with `community.chat`, which follows the active account. Without a provider,
/// or while nobody is signed in, every chat command prints `error: not signed in`.
package protocol REPLChatProvider: Sendable {
    /// The chat client, or `nil` when there is none.
    var chatClient: ChatClient? { get }
}

/// The REPL slot that holds the ``REPLChatProvider``.
package enum REPLChatProviderKey: REPLStateKey {
    /// What the slot holds.
    package typealias Value = any REPLChatProvider
}

/// A provider that always answers with one client (tools and tests that build a client themselves).
package struct FixedREPLChatProvider: REPLChatProvider {
    /// The client.
    package let chatClient: ChatClient?
    /// A provider for `client`.
    package init(_ client: ChatClient) { self.chatClient = client }
    /// A provider for one account's chat (tools and tests that build an ``/SymorvaChat/AccountChat`` themselves).
    package init(_ chat: AccountChat) { self.chatClient = ChatClient(following: chat) }
}

/// The chat commands of the REPL: `rooms`, `create`, `join`, `leave`, `invite`, `open`,
/// `send`, `back`, `react`, `unreact`, `edit`, `redact`, `fav`, `mute`, `pin`, `read`, the
/// delivery tools `burst` and `outbox`, `spaces` / `space` (``spaceCommands``), and the media
/// commands `attach`, `download`, `profile` and `room`.
///
/// `open` makes one conversation current: its timeline is observed (so it is live) and every
/// new row is printed as it arrives, numbered; `react`, `edit` and `redact` take that number or
/// an event ID. Rooms are named by room ID, alias or their number in the last `rooms` listing.
package enum ChatCommands {
    /// Every chat command, for ``REPLProgram/run(arguments:environment:commands:output:launch:)``.
    package static var all: [REPLCommand] {
        [
            rooms, create, join, leave, invite, open, send, back, react, unreact, edit, redact,
            flag("fav", .favourite, "favourite"), flag("mute", .muted, "mute"), flag("pin", .pinned, "pin"), read,
            burst, outbox, attach, download, profile, room, sync,
        ] + spaceCommands + roomManagementCommands + conversationCommands + threadCommands
    }

    // MARK: Conversations

    // MARK: Sync

    /// `sync status`.
    static let sync = REPLCommand.group(
        "sync", summary: "the active account's sync loop", subcommands: [syncStatus])

    static let syncStatus = REPLCommand(
        "status", usage: "sync status",
        summary: "the sync mode (sliding or v2), its state, the window loaded and the position's age",
        run: { context async throws(REPLError) in
            let chat = try client(context)
            guard let status = chat.syncStatus else { throw .commandFailed("not signed in") }
            context.output.print("mode: \(status.mode.rawValue)")
            context.output.print("state: \(chat.syncState.value.caseName)")
            if let window = status.window {
                let known = window.roomCount.map { " of \($0) rooms" } ?? " (list size not known yet)"
                context.output.print("window: rows 0-\(window.rangeEnd)\(known)")
            } else if status.mode == .sliding {
                context.output.print("window: none")
            } else {
                context.output.print("window: every room (v2)")
            }
            if let lastCommit = status.lastCommit {
                let age = max(0, SystemWallClock().now.millisecondsSince1970 - lastCommit.millisecondsSince1970)
                context.output.print("position age: \(Double(age) / 1000)s")
            } else {
                context.output.print("position age: nothing committed in this run")
            }
        })

    /// What `rooms` lists.
    enum RoomsRequest: Sendable {
        case firstWindow, all
        case space(String)
    }

    /// Rows the `rooms` command shows at once: the first window.
    static let firstWindow = 20

    static let rooms = REPLCommand(
        "rooms", usage: "rooms [--all | --space <space>]",
        summary:
            "list conversations (pinned first, then by latest activity): the first 20 at once, all, or a space's",
        details: "Shows the first window of the list as soon as the store has it and says how many are known.",
        parse: { arguments throws(REPLError) -> RoomsRequest in
            guard let flag = arguments.optional() else { return .firstWindow }
            switch flag {
            case "--all": return .all
            case "--space": return .space(try arguments.next())
            default: throw arguments.usageError
            }
        },
        run: { request, context async throws(REPLError) in
            let chat = try client(context)
            let items: [ConversationListItem]
            let total: Int
            switch request {
            case .all:
                items = chat.conversations.value.items
                total = items.count
            case .space(let space):
                let spaceID = try resolveRoom(space, context)
                items = try await failing { () async throws(ChatError) in
                    try await chat.conversations(inSpace: spaceID)
                }.items
                total = items.count
            case .firstWindow:
                let window = try await firstWindow(of: chat)
                items = window.items
                total = window.total
            }
            context[ChatREPLState.self] = state(context).listing(items.map(\.id))
            guard !items.isEmpty else {
                context.output.print("no conversations")
                return
            }
            for (index, item) in items.enumerated() {
                var flags: [String] = []
                if item.membership == .invited { flags.append("invited") }
                if item.isPinned { flags.append("pinned") }
                if item.isFavourite { flags.append("fav") }
                if item.isMuted { flags.append("muted") }
                if item.unreadCount > 0 { flags.append("\(item.unreadCount) unread") }
                let suffix = flags.isEmpty ? "" : "  [" + flags.joined(separator: ", ") + "]"
                context.output.print("\(index + 1). \(TerminalText.escaped("\(item.name)  \(item.id)"))\(suffix)")
            }
            if total > items.count {
                context.output.print("\(items.count) of \(total) conversations known ('rooms --all' lists them all)")
            } else {
                context.output.print("\(total) conversation\(total == 1 ? "" : "s") known")
            }
        })

    /// The first rows of the active account's list, once the store has been read.
    static func firstWindow(of chat: ChatClient) async throws(REPLError) -> ConversationWindow {
        let window = chat.conversations.window(0..<firstWindow)
        for await value in window.values where value.status != .loading { return value }
        throw .commandFailed("the conversation list could not be read")
    }

    static let create = REPLCommand(
        "create", usage: "create <name> [--encrypted] [<@user> …]",
        summary: "create a room (end-to-end encrypted with --encrypted) and invite users",
        parse: { arguments throws(REPLError) in
            let name = try arguments.next()
            var isEncrypted = false
            var invitees: [UserID] = []
            for word in try arguments.rest() {
                if word == "--encrypted" {
                    isEncrypted = true
                    continue
                }
                guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
                invitees.append(userID)
            }
            return (name, invitees, isEncrypted)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try await failing { () async throws(ChatError) in
                try await chat.createRoom(name: arguments.0, invitees: arguments.1, isEncrypted: arguments.2)
            }
            context.output.print("created \(roomID)\(arguments.2 ? " (encrypted)" : "")")
        })

    static let join = REPLCommand(
        "join", usage: "join <room-id-or-alias>", summary: "join a room",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { target, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try await failing { () async throws(ChatError) in
                try await chat.join(roomIDOrAlias: target)
            }
            context.output.print("joined \(roomID)")
        })

    static let leave = REPLCommand(
        "leave", usage: "leave <room>", summary: "leave a room (or decline an invite)",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { reference, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try resolveRoom(reference, context)
            try await failing { () async throws(ChatError) in try await chat.leave(roomID) }
            context.output.print("left \(roomID)")
        })

    static let invite = REPLCommand(
        "invite", usage: "invite <room> <@user>", summary: "invite a user (checks power levels)",
        parse: { arguments throws(REPLError) in
            let room = try arguments.next()
            let word = try arguments.next()
            guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
            return (room, userID)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try resolveRoom(arguments.0, context)
            try await failing { () async throws(ChatError) in
                try await chat.invite(arguments.1, to: roomID)
            }
            context.output.print("invited \(arguments.1) to \(roomID)")
        })

    static let open = REPLCommand(
        "open", usage: "open <room>", summary: "make a conversation current and print its messages live",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { reference, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try resolveRoom(reference, context)
            let conversation = try await failing { () async throws(ChatError) in
                try await chat.conversation(id: roomID)
            }
            state(context).close()
            let printer = TimelinePrinter(output: context.output)
            let stop = conversation.timeline.subscribe { printer.show($0) }
            context[ChatREPLState.self] = state(context).opening(conversation, printer: printer, stop: stop)
            context.output.print("opened \(roomID)")
        })

    // MARK: The open conversation

    static let send = REPLCommand(
        "send", usage: "send [--thread <message>] <text> …",
        summary:
            "send a message to the open conversation, or in the thread of <message> (@user:server and @room in it are mentions)",
        parse: { arguments throws(REPLError) in
            var words = try arguments.rest(minimum: 1)
            var thread: String?
            if words.first == "--thread" {
                guard words.count >= 3 else { throw .usage("send [--thread <message>] <text> …") }
                thread = words[1]
                words.removeFirst(2)
            }
            return (thread, words.joined(separator: " "))
        },
        run: { arguments, context async throws(REPLError) in
            let (thread, text) = arguments
            let conversation = try current(context)
            let root = try thread.map { reference throws(REPLError) in try resolveEvent(reference, context) }
            let mentions = Mentions(parsing: text)
            let receipt = try await failing { () async throws(ChatError) in
                if let root {
                    let mentioning = mentions.userIDs.isEmpty && !mentions.room ? nil : mentions
                    return try await conversation.send(.text(text), inThread: root, mentioning: mentioning)
                }
                if mentions.userIDs.isEmpty && !mentions.room { return try await conversation.send(.text(text)) }
                return try await conversation.send(.text(text), mentioning: mentions)
            }
            context.output.print("queued \(receipt.transactionIDs.map(\.rawValue).joined(separator: ", "))")
        })

    static let back = REPLCommand(
        "back", usage: "back <count>", summary: "load older messages of the open conversation",
        parse: { arguments throws(REPLError) in try arguments.nextInteger(in: 1...1000) },
        run: { count, context async throws(REPLError) in
            let pagination = await (try current(context)).paginateBackwards(count)
            if let error = pagination.lastError { throw .commandFailed("pagination failed: \(error)") }
            if pagination.hasReachedStart { context.output.print("(start of conversation)") }
        })

    static let react = REPLCommand(
        "react", usage: "react <message> <key>", summary: "react to a message (shown at once)",
        parse: { arguments throws(REPLError) in (try arguments.next(), try arguments.next()) },
        run: { arguments, context async throws(REPLError) in
            let conversation = try current(context)
            let eventID = try resolveEvent(arguments.0, context)
            try await failing { () async throws(ChatError) in
                try await conversation.react(to: eventID, key: arguments.1)
            }
        })

    static let unreact = REPLCommand(
        "unreact", usage: "unreact <message> <key>", summary: "remove your reaction",
        parse: { arguments throws(REPLError) in (try arguments.next(), try arguments.next()) },
        run: { arguments, context async throws(REPLError) in
            let conversation = try current(context)
            let eventID = try resolveEvent(arguments.0, context)
            try await failing { () async throws(ChatError) in
                try await conversation.unreact(to: eventID, key: arguments.1)
            }
        })

    static let edit = REPLCommand(
        "edit", usage: "edit <message> <text> …", summary: "replace the text of one of your messages",
        parse: { arguments throws(REPLError) in
            (try arguments.next(), try arguments.rest(minimum: 1).joined(separator: " "))
        },
        run: { arguments, context async throws(REPLError) in
            let conversation = try current(context)
            let eventID = try resolveEvent(arguments.0, context)
            _ = try await failing { () async throws(ChatError) in
                try await conversation.edit(eventID, newText: arguments.1)
            }
        })

    static let redact = REPLCommand(
        "redact", usage: "redact <message>", summary: "redact a message (waits for the server)",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { reference, context async throws(REPLError) in
            let conversation = try current(context)
            let eventID = try resolveEvent(reference, context)
            try await failing { () async throws(ChatError) in try await conversation.redact(eventID) }
            context.output.print("redacted \(eventID)")
        })

    static func flag(_ name: String, _ flag: ConversationFlag, _ label: String) -> REPLCommand {
        REPLCommand(
            name, usage: "\(name) on|off", summary: "\(label) the open conversation (applies at once)",
            parse: { arguments throws(REPLError) in try arguments.next(oneOf: ["on", "off"]) == "on" },
            run: { isOn, context async throws(REPLError) in
                let conversation = try current(context)
                try await failing { () async throws(ChatError) in
                    try await conversation.setFlag(flag, isOn)
                }
                context.output.print("\(label) \(isOn ? "on" : "off")")
            })
    }

    static let read = REPLCommand(
        "read", summary: "mark the open conversation read: receipt and fully-read marker at its newest message",
        run: { context async throws(REPLError) in
            let conversation = try current(context)
            try await failing { () async throws(ChatError) in try await conversation.markRead() }
            context.output.print("marked read (receipt and fully-read marker)")
        })
}

// MARK: Delivery

extension ChatCommands {
    static let burst = REPLCommand(
        "burst", usage: "burst <room> <count> [<text> …]",
        summary: "queue <count> numbered messages ('<text> 1' …) and print 'queued <i>' for each",
        details: """
            Sends '<text> 1' to '<text> <count>' (text 'burst' when omitted) one after the other without
            waiting for the server. 'queued <i> <transaction>' is printed once message i is in the room's
            persisted queue: a process killed after that line still delivers it on its next run.
            'outbox <room> --wait' waits until the server has them all.
            """,
        parse: { arguments throws(REPLError) in
            let room = try arguments.next()
            let count = try arguments.nextInteger(in: 1...10_000)
            let text = try arguments.rest().joined(separator: " ")
            return (room: room, count: count, text: text.isEmpty ? "burst" : text)
        },
        run: { burst, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try resolveRoom(burst.room, context)
            let conversation = try await failing { () async throws(ChatError) in
                try await chat.conversation(id: roomID)
            }
            for number in 1...burst.count {
                let receipt = try await failing { () async throws(ChatError) in
                    try await conversation.send(.text("\(burst.text) \(number)"))
                }
                context.output.print(
                    "queued \(number) \(receipt.transactionIDs.map(\.rawValue).joined(separator: ","))")
            }
        })

    static let outbox = REPLCommand(
        "outbox", usage: "outbox <room> [--wait]",
        summary: "show our messages the server does not have yet; --wait waits until it has them all",
        details: """
            Lists each unsent message of the room by transaction: 'sending' (queued, in flight or waiting
            to retry) or 'failed' (refused; the later ones wait behind it). Messages an earlier run left
            queued are included: they are sent again as soon as the account is restored (any session
            command, e.g. 'whoami', restores it). --wait prints 'all sent' once the outbox is empty and
            fails if a message is refused.
            """,
        parse: { arguments throws(REPLError) in
            let room = try arguments.next()
            guard let flag = arguments.optional() else { return (room: room, waits: false) }
            guard flag == "--wait" else { throw arguments.usageError }
            return (room: room, waits: true)
        },
        run: { request, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try resolveRoom(request.room, context)
            let conversation = try await failing { () async throws(ChatError) in
                try await chat.conversation(id: roomID)
            }
            let entries = conversation.outbox.value
            context.output.print(entries.isEmpty ? "outbox empty" : "\(entries.count) unsent")
            for entry in entries { context.output.print("  \(entry.transactionID)  \(describe(entry.state))") }
            guard request.waits, !entries.isEmpty else { return }
            for await current in conversation.outbox.values {
                if let failed = current.first(where: { if case .failed = $0.state { true } else { false } }) {
                    throw .commandFailed(
                        "\(failed.transactionID) \(describe(failed.state)); the messages after it wait — "
                            + "resend or cancel it")
                }
                if current.isEmpty {
                    context.output.print("all sent")
                    return
                }
            }
            throw .commandFailed("cancelled")
        })

    private static func describe(_ state: SendState) -> String {
        switch state {
        case .sending: "sending"
        case .sent(let eventID): "sent as \(eventID)"
        case .failed(let reason): "failed (\(reason.storageCode))"
        }
    }
}
