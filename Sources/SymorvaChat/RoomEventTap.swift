import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

/// A room event another module asked chat for (``AccountChat/tapRoomEvents(_:)``): its plaintext
/// type and content (decrypted when the room is encrypted).
package struct TappedRoomEvent: Sendable, Hashable {
    package var roomID: RoomID
    package var eventID: EventID
    package var sender: UserID
    package var type: String
    /// The content's JSON (plaintext: it lives in memory only, never stored in the clear).
    package var content: [UInt8]
    /// `origin_server_ts`, in milliseconds.
    package var originServerTS: Int64
}

/// Which room events a module wants from chat's timelines, and where they go: events of
/// `types`, and `m.room.message` events whose `msgtype` is in `messageTypes`. New timeline
/// events of each committed sync are handed over after the commit; events of encrypted rooms
/// once decrypted (including older ones decrypted later, so a tap checks dates itself).
package struct RoomEventTap: Sendable {
    package var types: Set<String>
    package var messageTypes: Set<String>
    package var handler: @Sendable ([TappedRoomEvent]) async -> Void

    package init(
        types: Set<String>, messageTypes: Set<String>, handler: @escaping @Sendable ([TappedRoomEvent]) async -> Void
    ) {
        self.types = types
        self.messageTypes = messageTypes
        self.handler = handler
    }

    /// Whether an event of `type` is tapped; `messageType` reads an `m.room.message`'s `msgtype`
    /// (only asked for those, and only when message types are tapped).
    func matches(type: String, messageType: () -> String?) -> Bool {
        if types.contains(type) { return true }
        guard type == "m.room.message", !messageTypes.isEmpty, let messageType = messageType() else { return false }
        return messageTypes.contains(messageType)
    }

    /// The tapped events of a committed sync's timelines, in order (encrypted ones come later,
    /// decrypted).
    func events(in body: SyncResponseBody) -> [TappedRoomEvent] {
        var tapped: [TappedRoomEvent] = []
        for room in body.rooms {
            for event in room.timeline {
                guard let eventID = event.eventID, let sender = event.sender.flatMap({ UserID($0) }),
                    matches(
                        type: event.type,
                        messageType: { RawJSON.string("msgtype", in: Array(body.document[event.content])) })
                else { continue }
                tapped.append(
                    TappedRoomEvent(
                        roomID: RoomID(room.roomID), eventID: EventID(eventID), sender: sender, type: event.type,
                        content: Array(body.document[event.content]), originServerTS: event.originServerTS))
            }
        }
        return tapped
    }
}

extension AccountChat {
    /// Hands the room events `tap` names to its handler: plain ones after each committed sync,
    /// encrypted ones once decrypted. One tap per client (the crypto module's verification).
    package func tapRoomEvents(_ tap: RoomEventTap) {
        roomEventTap.withLock { $0 = tap }
    }

    /// A committed sync's tapped events go to the tap.
    func tapCommitted(_ body: SyncResponseBody) async {
        guard let tap = roomEventTap.withLock({ $0 }) else { return }
        let events = tap.events(in: body)
        if !events.isEmpty { await tap.handler(events) }
    }

    /// Decrypted events the tap names go to it, opened in memory.
    func tapDecrypted(_ outcomes: [(event: UndecryptedEvent, outcome: DecryptionOutcome)], decryptor: any RoomDecryptor)
        async
    {
        guard let tap = roomEventTap.withLock({ $0 }) else { return }
        var events: [TappedRoomEvent] = []
        // Oldest first (a pass reads newest first).
        for (event, outcome) in outcomes.sorted(by: { $0.event.eventNID < $1.event.eventNID }) {
            guard case .decrypted(let type, let sealed, _, _, _, _) = outcome else { continue }
            var opened: [UInt8]?
            let eventID = EventID(event.eventID)
            func open() -> [UInt8]? {
                if opened == nil { opened = decryptor.open(sealed, eventID: eventID) }
                return opened
            }
            guard
                tap.matches(
                    type: type, messageType: { open().flatMap { RawJSON.string("msgtype", in: $0) } }),
                let content = open()
            else { continue }
            events.append(
                TappedRoomEvent(
                    roomID: RoomID(event.roomID), eventID: eventID, sender: UserID(stored: event.sender), type: type,
                    content: content, originServerTS: event.originServerTS))
        }
        if !events.isEmpty { await tap.handler(events) }
    }
}
