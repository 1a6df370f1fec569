import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// The chat commands' state between lines: the last `rooms` listing, the open conversation and
/// the numbers given to its messages.
final class ChatREPLState: REPLStateKey, Sendable {
    typealias Value = ChatREPLState

    private struct Storage {
        var listing: [RoomID] = []
        var conversation: Conversation?
        var printer: TimelinePrinter?
        var stop: (@Sendable () -> Void)?
        var thread: ThreadTimeline?
        var threadStop: (@Sendable () -> Void)?
    }

    private let storage = Lock(Storage())

    func listing(_ rooms: [RoomID]) -> ChatREPLState {
        storage.withLock { $0.listing = rooms }
        return self
    }

    func opening(_ conversation: Conversation, printer: TimelinePrinter, stop: @escaping @Sendable () -> Void)
        -> ChatREPLState
    {
        storage.withLock {
            $0.conversation = conversation
            $0.printer = printer
            $0.stop = stop
        }
        return self
    }

    /// Makes `thread` the open thread (its rows print with the conversation's numbering).
    func openingThread(_ thread: ThreadTimeline, stop: @escaping @Sendable () -> Void) {
        let previous = storage.withLock { storage -> (@Sendable () -> Void)? in
            defer {
                storage.thread = thread
                storage.threadStop = stop
            }
            return storage.threadStop
        }
        previous?()
    }

    var thread: ThreadTimeline? { storage.withLock { $0.thread } }

    /// Stops observing the open conversation.
    func close() {
        let threadStop = storage.withLock { storage -> (@Sendable () -> Void)? in
            defer {
                storage.threadStop = nil
                storage.thread = nil
            }
            return storage.threadStop
        }
        threadStop?()
        let stop = storage.withLock { storage -> (@Sendable () -> Void)? in
            defer {
                storage.stop = nil
                storage.conversation = nil
                storage.printer = nil
            }
            return storage.stop
        }
        stop?()
    }

    var listed: [RoomID] { storage.withLock { $0.listing } }
    var conversation: Conversation? { storage.withLock { $0.conversation } }
    var printer: TimelinePrinter? { storage.withLock { $0.printer } }
}

/// Prints a conversation's rows as they arrive: new rows once, numbered; changed rows (sent,
/// edited, reacted to, redacted) again with `~`.
final class TimelinePrinter: Sendable {
    private struct Storage {
        var numbers: [TimelineItem.ID: Int] = [:]
        var events: [Int: EventID] = [:]
        var rendered: [Int: String] = [:]
        var next = 1
    }

    private let output: any REPLOutput
    private let storage = Lock(Storage())

    init(output: any REPLOutput) { self.output = output }

    /// The event shown as number `number`.
    func event(numbered number: Int) -> EventID? { storage.withLock { $0.events[number] } }

    func show(_ items: [TimelineItem]) {
        let lines = storage.withLock { storage -> [String] in
            var lines: [String] = []
            for item in items {
                let number: Int
                var isNew = false
                if let known = storage.numbers[item.id] {
                    number = known
                } else if let transactionID = item.transactionID, let echoed = storage.numbers[.local(transactionID)] {
                    // The synced event of a local echo keeps the echo's number.
                    number = echoed
                    storage.numbers[item.id] = number
                } else {
                    number = storage.next
                    storage.next += 1
                    storage.numbers[item.id] = number
                    isNew = true
                }
                if let eventID = item.eventID { storage.events[number] = eventID }
                let text = Self.render(item)
                guard storage.rendered[number] != text else { continue }
                storage.rendered[number] = text
                lines.append("[\(number)]\(isNew ? "" : " ~") \(text)")
            }
            return lines
        }
        for line in lines { output.print(line) }
    }

    /// A membership change as a person reads it: `alice joined`, `alice invited @bob:server`,
    /// `@bob:server left`, `alice removed @bob:server`, `alice banned @bob:server`.
    static func membershipSentence(
        _ item: TimelineItem, who: String, target: UserID, _ membership: Membership?, _ displayName: String?
    ) -> String {
        let own = item.sender == target
        switch membership {
        case .join: return "\(displayName ?? target.rawValue) joined"
        case .invite: return "\(who) invited \(target)"
        case .leave: return own ? "\(who) left" : "\(who) removed \(target)"
        case .ban: return "\(who) banned \(target)"
        case .knock: return "\(displayName ?? target.rawValue) asked to join"
        case nil: return "\(who) changed the membership of \(target)"
        }
    }

    static func render(_ item: TimelineItem) -> String {
        let who = item.senderProfile.displayName ?? item.sender.rawValue
        var text: String
        switch item.content {
        case .message(.emote, let body): text = "* \(who) \(body)"
        case .message(_, let body): text = "\(who): \(body)"
        case .image(let media): text = "\(who) sent an image: \(media.body)"
        case .file(let media): text = "\(who) sent a file: \(media.body)"
        case .audio(let media): text = "\(who) sent audio: \(media.body)"
        case .video(let media): text = "\(who) sent a video: \(media.body)"
        case .membership(let userID, let membership, let displayName):
            text = "— " + membershipSentence(item, who: who, target: userID, membership, displayName)
        case .stateChange(let change): text = "— \(who) \(change.sentence)"
        case .redacted: text = "\(who): (redacted)"
        case .unableToDecrypt(let reason): text = "\(who): (unable to decrypt: \(reason.rawValue))"
        case .unsupported(let type): text = "\(who): (\(type))"
        }
        if let encryption = item.encryption {
            if !encryption.isDeviceKnown {
                text += "  [encrypted, unknown device]"
            } else if encryption.isFromDeviceNotCrossSigned {
                text += "  [encrypted, not cross-signed]"
            } else {
                text += "  [encrypted]"
            }
        }
        if item.isEdited { text += " (edited)" }
        if item.mentionsMe { text += "  [mentions you]" }
        if item.threadRootID != nil { text += "  [in thread]" }
        if let thread = item.thread {
            text += "  [thread: \(thread.replyCount) \(thread.replyCount == 1 ? "reply" : "replies")]"
        }
        if !item.reactions.isEmpty {
            text +=
                "  " + item.reactions.map { "\($0.key) \($0.count)\($0.includesOwn ? "*" : "")" }.joined(separator: " ")
        }
        switch item.sendState {
        case .sending: text += "  (sending)"
        case .failed(let reason): text += "  (failed: \(reason.storageCode))"
        case .sent, nil: break
        }
        // Bodies, names, types and reaction keys are remote text: one line, nothing the
        // terminal would act on.
        return TerminalText.escaped(text)
    }
}

extension ChatCommands {
    static func client(_ context: REPLContext) throws(REPLError) -> ChatClient {
        guard let client = context[REPLChatProviderKey.self]?.chatClient, client.userID != nil else {
            throw .commandFailed("not signed in")
        }
        return client
    }

    static func state(_ context: REPLContext) -> ChatREPLState {
        if let existing = context[ChatREPLState.self] { return existing }
        let created = ChatREPLState()
        context[ChatREPLState.self] = created
        return created
    }

    static func current(_ context: REPLContext) throws(REPLError) -> Conversation {
        _ = try client(context)
        guard let conversation = state(context).conversation else {
            throw .commandFailed("no open conversation — use 'open <room>'")
        }
        return conversation
    }

    /// A room ID (`!…`), an alias known to the list, or a number from the last `rooms` listing.
    static func resolveRoom(_ reference: String, _ context: REPLContext) throws(REPLError) -> RoomID {
        let chat = try client(context)
        if reference.hasPrefix("!") { return RoomID(reference) }
        if let number = Int(reference) {
            let listed = state(context).listed
            guard number >= 1, number <= listed.count else {
                throw .invalidArgument("no room \(number) in the last 'rooms' listing")
            }
            return listed[number - 1]
        }
        if let item = chat.conversations.value.items.first(where: { $0.name == reference }) { return item.id }
        throw .invalidArgument("no conversation '\(reference)' — use a room ID or a number from 'rooms'")
    }

    /// An event ID (`$…`) or a message number printed by `open`.
    static func resolveEvent(_ reference: String, _ context: REPLContext) throws(REPLError) -> EventID {
        if reference.hasPrefix("$") { return EventID(reference) }
        guard let number = Int(reference.hasPrefix("#") ? String(reference.dropFirst()) : reference),
            let eventID = state(context).printer?.event(numbered: number)
        else {
            throw .invalidArgument("no message '\(reference)' — use an event ID or a number printed by 'open'")
        }
        return eventID
    }

    /// Runs a chat operation, turning its error into the REPL's.
    static func failing<T: Sendable>(_ body: () async throws(ChatError) -> T) async throws(REPLError) -> T {
        do {
            return try await body()
        } catch {
            throw .failure(error)
        }
    }
}
