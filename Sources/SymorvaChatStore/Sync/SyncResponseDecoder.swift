/// Reads a `/sync` v2 (client-server `v3/sync`) response in one pass over its bytes.
///
/// Foundation's `JSONSerialization` builds a tree of every value — about 20 times the document
/// in memory, and 1.6 s for 47 MB. This decoder walks the document once with a
/// ``JSONScanner``, decodes only the fields the store indexes (IDs, type, sender, timestamp,
/// state key, transaction ID, relation, redaction target) and keeps each event and its content
/// as a byte range of the document, which is what the store writes.
///
/// An unusable event is skipped and recorded (``SyncResponseHead/malformedEvents``); only a
/// document that is not JSON, or not a `/sync` response, is an error. `/messages` pages are
/// read by the same event decoding (``decodeMessages(_:)``).
package enum SyncResponseDecoder {
    /// Decodes a whole response.
    ///
    /// - Throws: ``SyncDecodingError`` when the document is not a well-formed response.
    package static func decode(_ document: [UInt8]) throws(SyncDecodingError) -> SyncResponseBody {
        let outcome = document.withUnsafeBytes { buffer in
            var reader = Reader(scanner: JSONScanner(buffer))
            return Result { () throws(JSONScanError) in
                let head = try reader.readDocument()
                return SyncResponseBody(document: document, head: head, rooms: reader.rooms)
            }
        }
        do {
            return try outcome.get()
        } catch {
            throw SyncDecodingError(error, missingMember: .missingNextBatch)
        }
    }

    /// Decodes a `/messages` page (`{"chunk": […], "state": […], "start": …, "end": …}`): its
    /// events are read exactly as a `/sync` timeline's (relations, redactions, transaction
    /// IDs), its `state` as state events; an unusable event is skipped and recorded
    /// (``MessagesPage/malformedEvents``, section `chunk` or `state`).
    ///
    /// - Throws: ``SyncDecodingError`` when the document is not JSON (`.syntax`, `.tooDeep`),
    ///   when the top level is not an object or `chunk` is not an array
    ///   (`.unexpectedStructure`), or when it has no `chunk` (`.missingChunk`).
    package static func decodeMessages(_ document: [UInt8]) throws(SyncDecodingError) -> MessagesPage {
        let outcome = document.withUnsafeBytes { buffer in
            var reader = Reader(scanner: JSONScanner(buffer))
            return Result { () throws(JSONScanError) in try reader.readMessagesDocument() }
        }
        do {
            var page = try outcome.get()
            page.document = document
            return page
        } catch {
            throw SyncDecodingError(error, missingMember: .missingChunk)
        }
    }
}

extension SyncDecodingError {
    /// The decoding error for a scanner error; `missingMember` names what a missing required
    /// member means for the document being read.
    init(_ error: JSONScanError, missingMember: SyncDecodingError) {
        switch error.reason {
        case .tooDeep: self = .tooDeep(offset: error.offset)
        case .unexpectedStructure: self = .unexpectedStructure(offset: error.offset)
        case .missingMember: self = missingMember
        case .unexpectedEnd, .unexpectedByte, .invalidEscape, .invalidNumber, .controlCharacter:
            self = .syntax(offset: error.offset)
        }
    }
}

/// What an event must carry to be usable, by where it appears.
enum EventKind {
    /// Timeline events: `event_id`, `type`, `sender`, `origin_server_ts`, `content`.
    case timeline
    /// `state.events`: a timeline event's fields and a `state_key`.
    case state
    /// `invite_state` / `knock_state`: `type`, `state_key`, `content`.
    case stripped
    /// Account data and ephemeral events: `type` and `content`.
    case basic
    /// To-device events: `type`, `sender` and `content`.
    case toDevice
}

/// The walk over one document. Every error, syntax or structure, is a ``JSONScanError``
/// with the offset where reading stopped; the caller maps it to ``SyncDecodingError``.
struct Reader {
    var scanner: JSONScanner
    var head = SyncResponseHead()
    var rooms: [SyncRoomUpdate] = []

    init(scanner: JSONScanner) {
        self.scanner = scanner
    }

    mutating func readDocument() throws(JSONScanError) -> SyncResponseHead {
        var nextBatch: String?
        guard let first = scanner.peek() else { throw scanner.error(.unexpectedEnd) }
        guard first == UInt8(ascii: "{") else { throw structureError() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "next_batch") {
                nextBatch = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "rooms") {
                try readRooms()
            } else if scanner.key(key, is: "account_data") {
                var events = head.accountData
                try readEventList(.basic, section: "account_data", roomID: nil, into: &events)
                head.accountData = events
            } else if scanner.key(key, is: "to_device") {
                var events = head.toDevice
                try readEventList(.toDevice, section: "to_device", roomID: nil, into: &events)
                head.toDevice = events
            } else if scanner.key(key, is: "device_lists") {
                try readDeviceLists()
            } else if scanner.key(key, is: "device_one_time_keys_count") {
                try readKeyCounts()
            } else if scanner.key(key, is: "device_unused_fallback_key_types")
                || scanner.key(key, is: "org.matrix.msc2732.device_unused_fallback_key_types")
            {
                head.unusedFallbackKeyTypes = try readStringArray()
            } else {
                try scanner.skipValue()
            }
        }
        guard scanner.isAtEnd() else { throw scanner.error(.unexpectedByte) }
        guard let nextBatch else { throw scanner.error(.missingMember) }
        head.nextBatch = nextBatch
        return head
    }

    /// A section that must be an object is not.
    func structureError() -> JSONScanError { scanner.error(.unexpectedStructure) }

    /// The top level of a `/messages` page. `chunk` is required and must be an array; `state`
    /// is read when it is an array; `start` and `end` when they are strings.
    mutating func readMessagesDocument() throws(JSONScanError) -> MessagesPage {
        var page = MessagesPage()
        var hasChunk = false
        guard let first = scanner.peek() else { throw scanner.error(.unexpectedEnd) }
        guard first == UInt8(ascii: "{") else { throw structureError() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "chunk") {
                guard scanner.peek() == UInt8(ascii: "[") else { throw structureError() }
                try readEvents(.timeline, section: "chunk", roomID: nil, into: &page.chunk)
                hasChunk = true
            } else if scanner.key(key, is: "state") {
                try readEvents(.state, section: "state", roomID: nil, into: &page.state)
            } else if scanner.key(key, is: "start") {
                page.start = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "end") {
                page.end = try scanner.readStringOrSkip()
            } else {
                try scanner.skipValue()
            }
        }
        guard scanner.isAtEnd() else { throw scanner.error(.unexpectedByte) }
        guard hasChunk else { throw scanner.error(.missingMember) }
        page.malformedEvents = head.malformedEvents
        return page
    }

    // MARK: Rooms

    mutating func readRooms() throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { throw structureError() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            let membership: RoomMembership
            if scanner.key(key, is: "join") {
                membership = .joined
            } else if scanner.key(key, is: "invite") {
                membership = .invited
            } else if scanner.key(key, is: "leave") {
                membership = .left
            } else if scanner.key(key, is: "knock") {
                membership = .knocked
            } else {
                try scanner.skipValue()
                continue
            }
            guard scanner.peek() == UInt8(ascii: "{") else { throw structureError() }
            var rooms = try scanner.beginObject()
            while let roomKey = try scanner.nextKey(&rooms) {
                var room = SyncRoomUpdate(roomID: scanner.string(of: roomKey), membership: membership)
                guard scanner.peek() == UInt8(ascii: "{") else { throw structureError() }
                try readRoom(&room)
                self.rooms.append(room)
            }
        }
    }

    mutating func readRoom(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        var cursor = try scanner.beginObject()
        let roomID = room.roomID
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "timeline") {
                try readTimeline(&room)
            } else if scanner.key(key, is: "state") || scanner.key(key, is: "state_after") {
                try readEventList(.state, section: "state", roomID: roomID, into: &room.state)
            } else if scanner.key(key, is: "invite_state") || scanner.key(key, is: "knock_state") {
                try readEventList(.stripped, section: "invite_state", roomID: roomID, into: &room.state)
            } else if scanner.key(key, is: "ephemeral") {
                try readEventList(.basic, section: "ephemeral", roomID: roomID, into: &room.ephemeral)
            } else if scanner.key(key, is: "account_data") {
                try readEventList(.basic, section: "account_data", roomID: roomID, into: &room.accountData)
            } else if scanner.key(key, is: "summary") {
                try readSummary(&room)
            } else if scanner.key(key, is: "unread_notifications") {
                try readUnread(&room)
            } else if scanner.key(key, is: "unread_thread_notifications") {
                try readThreadUnread(&room)
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readTimeline(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "events") {
                try readEvents(.timeline, section: "timeline", roomID: room.roomID, into: &room.timeline)
            } else if scanner.key(key, is: "limited") {
                room.isLimited = try scanner.readBoolOrSkip() ?? false
            } else if scanner.key(key, is: "prev_batch") {
                room.previousBatch = try scanner.readStringOrSkip()
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readSummary(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "m.heroes") {
                room.heroes = try readStringArray()
            } else if scanner.key(key, is: "m.joined_member_count") {
                room.joinedMemberCount = try scanner.readIntegerOrSkip()
            } else if scanner.key(key, is: "m.invited_member_count") {
                room.invitedMemberCount = try scanner.readIntegerOrSkip()
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readUnread(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "notification_count") {
                room.notificationCount = try scanner.readIntegerOrSkip()
            } else if scanner.key(key, is: "highlight_count") {
                room.highlightCount = try scanner.readIntegerOrSkip()
            } else {
                try scanner.skipValue()
            }
        }
    }

    /// `unread_thread_notifications`: root → `{notification_count, highlight_count}`.
    mutating func readThreadUnread(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var threads = try scanner.beginObject()
        while let thread = try scanner.nextKey(&threads) {
            let root = scanner.string(of: thread)
            guard scanner.peek() == UInt8(ascii: "{") else {
                try scanner.skipValue()
                continue
            }
            var counts = DeviceCounts.Counts(notifications: 0, highlights: 0)
            var cursor = try scanner.beginObject()
            while let key = try scanner.nextKey(&cursor) {
                if scanner.key(key, is: "notification_count") {
                    counts.notifications = Int(try scanner.readIntegerOrSkip() ?? 0)
                } else if scanner.key(key, is: "highlight_count") {
                    counts.highlights = Int(try scanner.readIntegerOrSkip() ?? 0)
                } else {
                    try scanner.skipValue()
                }
            }
            room.threadCounts[root] = counts
        }
    }

    // MARK: Top-level sections

    mutating func readDeviceLists() throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "changed") {
                head.deviceListsChanged += try readStringArray() ?? []
            } else if scanner.key(key, is: "left") {
                head.deviceListsLeft += try readStringArray() ?? []
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readKeyCounts() throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            let algorithm = scanner.string(of: key)
            if let count = try scanner.readIntegerOrSkip() { head.oneTimeKeyCounts[algorithm] = count }
        }
    }

    /// An array of strings; non-string elements are skipped, a non-array is `nil`.
    mutating func readStringArray() throws(JSONScanError) -> [String]? {
        guard scanner.peek() == UInt8(ascii: "[") else {
            try scanner.skipValue()
            return nil
        }
        var values: [String] = []
        var cursor = try scanner.beginArray()
        while try scanner.nextElement(&cursor) {
            if let value = try scanner.readStringOrSkip() { values.append(value) }
        }
        return values
    }

    // MARK: Events

    /// `{"events": [...]}`.
    mutating func readEventList(
        _ kind: EventKind, section: String, roomID: String?, into events: inout [SyncEvent]
    ) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "events") {
                try readEvents(kind, section: section, roomID: roomID, into: &events)
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readEvents(
        _ kind: EventKind, section: String, roomID: String?, into events: inout [SyncEvent]
    ) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "[") else { return try scanner.skipValue() }
        var cursor = try scanner.beginArray()
        while try scanner.nextElement(&cursor) {
            let start = scanner.index
            switch try readEvent(kind) {
            case .success(let event):
                events.append(event)
            case .failure(let problem):
                head.malformedEvents.append(
                    MalformedSyncEvent(
                        section: section, roomID: roomID, range: start..<scanner.index, reason: problem.reason))
            }
        }
    }
}

/// Why one event was skipped.
struct EventProblem: Error {
    var reason: String
}

extension Reader {
    /// Reads one event; a grammatically valid but unusable event is a `.failure`.
    mutating func readEvent(_ kind: EventKind) throws(JSONScanError) -> Result<SyncEvent, EventProblem> {
        let start = scanner.index
        guard scanner.peek() == UInt8(ascii: "{") else {
            try scanner.skipValue()
            return .failure(EventProblem(reason: "not an object"))
        }
        var event = SyncEvent(range: start..<start, content: start..<start, type: "", originServerTS: 0)
        var type: String?
        var hasContent = false
        var hasTimestamp = false
        var mistyped: String?
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "type") {
                type = try scanner.readStringOrSkip()
                if type == nil { mistyped = "type" }
            } else if scanner.key(key, is: "event_id") {
                event.eventID = try scanner.readStringOrSkip()
                if event.eventID == nil { mistyped = "event_id" }
            } else if scanner.key(key, is: "sender") {
                event.sender = try scanner.readStringOrSkip()
                if event.sender == nil { mistyped = "sender" }
            } else if scanner.key(key, is: "state_key") {
                event.stateKey = try scanner.readStringOrSkip()
                if event.stateKey == nil { mistyped = "state_key" }
            } else if scanner.key(key, is: "origin_server_ts") {
                let timestamp = try scanner.readIntegerOrSkip()
                event.originServerTS = timestamp ?? 0
                hasTimestamp = timestamp != nil
            } else if scanner.key(key, is: "content") {
                hasContent = try readContent(&event)
            } else if scanner.key(key, is: "unsigned") {
                try readUnsigned(&event)
            } else if scanner.key(key, is: "redacts") {
                event.redacts = try scanner.readStringOrSkip() ?? event.redacts
            } else {
                try scanner.skipValue()
            }
        }
        event.range = start..<scanner.index
        if let mistyped { return .failure(EventProblem(reason: "mistyped \(mistyped)")) }
        guard let type else { return .failure(EventProblem(reason: "missing type")) }
        guard hasContent else { return .failure(EventProblem(reason: "missing content")) }
        event.type = type
        switch kind {
        case .timeline, .state:
            guard event.eventID != nil else { return .failure(EventProblem(reason: "missing event_id")) }
            guard event.sender != nil else { return .failure(EventProblem(reason: "missing sender")) }
            guard hasTimestamp else { return .failure(EventProblem(reason: "missing origin_server_ts")) }
            if kind == .state, event.stateKey == nil { return .failure(EventProblem(reason: "missing state_key")) }
        case .stripped:
            guard event.stateKey != nil else { return .failure(EventProblem(reason: "missing state_key")) }
        case .toDevice:
            guard event.sender != nil else { return .failure(EventProblem(reason: "missing sender")) }
        case .basic:
            break
        }
        return .success(event)
    }

    /// Records the content's range and reads `m.relates_to` and `redacts` from its top level.
    mutating func readContent(_ event: inout SyncEvent) throws(JSONScanError) -> Bool {
        scanner.skipWhitespace()
        let start = scanner.index
        guard scanner.peek() == UInt8(ascii: "{") else {
            try scanner.skipValue()
            return false
        }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "m.relates_to") {
                event.relation = try readRelation()
            } else if scanner.key(key, is: "redacts") {
                event.redacts = try scanner.readStringOrSkip()
            } else {
                try scanner.skipValue(depth: 1)
            }
        }
        event.content = start..<scanner.index
        return true
    }

    mutating func readRelation() throws(JSONScanError) -> EventRelation? {
        guard scanner.peek() == UInt8(ascii: "{") else {
            try scanner.skipValue()
            return nil
        }
        var relation = EventRelation()
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "rel_type") {
                relation.type = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "event_id") {
                relation.eventID = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "key") {
                relation.key = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "m.in_reply_to"), scanner.peek() == UInt8(ascii: "{") {
                var reply = try scanner.beginObject()
                while let replyKey = try scanner.nextKey(&reply) {
                    if scanner.key(replyKey, is: "event_id") {
                        relation.inReplyTo = try scanner.readStringOrSkip()
                    } else {
                        try scanner.skipValue()
                    }
                }
            } else {
                try scanner.skipValue(depth: 2)
            }
        }
        return relation
    }

    mutating func readUnsigned(_ event: inout SyncEvent) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "transaction_id") {
                event.transactionID = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "m.relations") {
                event.hasBundledRelations = true
                try scanner.skipValue(depth: 1)
            } else {
                try scanner.skipValue(depth: 1)
            }
        }
    }
}
