import SymorvaMachines
import SymorvaRuntime
import Synchronization

/// What to send: the kinds of message a member writes.
///
/// Text over ``MessageSplitter/limit`` UTF-16 code units is split into several messages by
/// the SDK's one documented rule, in order.
public enum OutgoingMessage: Sendable, Hashable, CustomStringConvertible {
    /// `m.text`.
    case text(String)
    /// `m.notice`.
    case notice(String)
    /// `m.emote`.
    case emote(String)

    var kind: MessageKind {
        switch self {
        case .text: .text
        case .notice: .notice
        case .emote: .emote
        }
    }

    var body: String {
        switch self {
        case .text(let body), .notice(let body), .emote(let body): body
        }
    }

    /// The kind only: the body is user content.
    public var description: String { "OutgoingMessage.\(kind.rawValue)(<private>)" }

    /// The `m.room.message` contents, one per part, replying to `inReplyTo` (the first part only).
    func contents(inReplyTo: EventID?) -> [MessageContent] {
        MessageSplitter.split(body).enumerated().map { index, part in
            var content = JSONObjectWriter()
            content.string("msgtype", "m.\(kind.rawValue)")
            content.string("body", part)
            if index == 0, let inReplyTo {
                var reply = JSONObjectWriter()
                reply.string("event_id", inReplyTo.rawValue)
                content.raw("m.relates_to", #"{"m.in_reply_to":"# + reply.text + "}")
            }
            return MessageContent(eventType: "m.room.message", json: content.text)
        }
    }
}

/// The outcome of a send, observable while it is on its way.
///
/// A long text split into several messages has one transaction per part; the receipt is
/// `.sent` when every part is (with the last part's event ID), `.failed` as soon as one part
/// fails, else `.sending`.
public final class SendReceipt: Sendable, CustomStringConvertible {
    /// The room.
    public let roomID: RoomID
    /// One transaction per part, in order.
    public let transactionIDs: [TransactionID]
    /// Sending, sent or failed.
    public var state: ObservableValue<SendState> { publisher.observable }

    private let publisher = ObservableValue<SendState>.Publisher(.sending)
    private let parts: Mutex<[TransactionID: SendState]>

    init(roomID: RoomID, transactionIDs: [TransactionID]) {
        self.roomID = roomID
        self.transactionIDs = transactionIDs
        self.parts = Mutex(Dictionary(uniqueKeysWithValues: transactionIDs.map { ($0, SendState.sending) }))
    }

    /// The event IDs of the parts the server has, in order.
    public var eventIDs: [EventID] {
        let parts = self.parts.withLock { $0 }
        return transactionIDs.compactMap {
            if case .sent(let eventID) = parts[$0] { return eventID }
            return nil
        }
    }

    /// The transactions only.
    public var description: String { "SendReceipt(\(transactionIDs.map(\.rawValue).joined(separator: ",")))" }

    func update(_ transactionID: TransactionID, _ state: SendState) {
        let overall = parts.withLock { parts -> SendState in
            parts[transactionID] = state
            var last: EventID?
            for id in transactionIDs {
                switch parts[id] ?? .sending {
                case .failed(let reason): return .failed(reason)
                case .sending: return .sending
                case .sent(let eventID): last = eventID
                }
            }
            return last.map(SendState.sent) ?? .sending
        }
        if publisher.value != overall { publisher.publish(overall) }
    }
}

/// The receipts handed out and not yet settled, by transaction.
final class SendReceiptRegistry: Sendable {
    private let receipts = Mutex<[TransactionID: SendReceipt]>([:])
    /// Event IDs of messages this client sent (recent ones), for edits before the sync echo.
    private let sent = Mutex<Set<EventID>>([])

    func isOwn(_ eventID: EventID) -> Bool { sent.withLock { $0.contains(eventID) } }

    func register(_ receipt: SendReceipt) {
        receipts.withLock { receipts in
            for id in receipt.transactionIDs { receipts[id] = receipt }
        }
    }

    func update(_ transactionID: TransactionID, _ state: SendState) {
        if case .sent(let eventID) = state { sent.withLock { _ = $0.insert(eventID) } }
        let receipt = receipts.withLock { receipts -> SendReceipt? in
            let receipt = receipts[transactionID]
            if case .sent = state { receipts[transactionID] = nil }
            return receipt
        }
        receipt?.update(transactionID, state)
    }
}
