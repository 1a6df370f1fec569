/// A simplified sliding sync response (MSC4186) decoded into the shape the `/sync` v2 ingest
/// writes: the same rooms (``SyncRoomUpdate``) and top level (``SyncResponseHead``), so that
/// both modes store through one writer, plus what only sliding sync has.
///
/// `body.head.nextBatch` is empty: `pos` is a position in one connection, not a `/sync`
/// since-token, and is kept apart (``pos``) so that it never ends up as one.
package struct SlidingSyncResponse: Sendable {
    /// The rooms, the extensions' data (to-device events, device lists, key counts, account
    /// data, receipts, typing) and the unusable events, as a v2 response would carry them.
    package var body: SyncResponseBody
    /// `pos`: the position of the connection's next request.
    package var pos: String
    /// `lists.<name>.count`: each list's size on the server.
    package var listCounts: [String: Int]
    /// `extensions.to_device.next_batch`: the `since` of the next to-device request, to be
    /// committed with the to-device events this response brought.
    package var toDeviceNextBatch: String?
}

/// Reads a simplified sliding sync response in one pass, with the `/sync` v2 decoder's event
/// reading (byte ranges of the document, unusable events skipped and recorded).
///
/// Rooms map to ``SyncRoomUpdate``: `required_state` is the state, `timeline`, `limited` and
/// `prev_batch` the timeline, `heroes` (their user IDs), `joined_count`, `invited_count`,
/// `notification_count` and `highlight_count` the summary, `invite_state` stripped state of an
/// invite. A room is joined, invited when it has `invite_state`, and left when the account's
/// own newest membership event in it (`ownUserID`) says `leave` or `ban`. The `account_data`,
/// `receipts` and `typing` extensions add to their rooms (a room only they mention becomes an
/// update of its own); `to_device` and `e2ee` fill the head as v2's top level does.
package enum SlidingSyncResponseDecoder {
    /// Decodes a whole response.
    ///
    /// - Throws: ``SyncDecodingError`` when the document is not JSON, not an object, or has no
    ///   `pos` (``SyncDecodingError/missingNextBatch``: `pos` plays `next_batch`'s part).
    package static func decode(_ document: [UInt8], ownUserID: String? = nil) throws(SyncDecodingError)
        -> SlidingSyncResponse
    {
        let outcome = document.withUnsafeBytes { buffer in
            var reader = Reader(scanner: JSONScanner(buffer))
            return Result { () throws(JSONScanError) in
                var sliding = SlidingReader()
                try reader.readSlidingDocument(&sliding)
                var rooms = sliding.order.compactMap { sliding.rooms[$0] }
                if let ownUserID {
                    for index in rooms.indices where rooms[index].membership == .joined {
                        if Self.hasLeft(rooms[index], ownUserID: ownUserID, bytes: buffer) {
                            rooms[index].membership = .left
                        } else {
                            rooms[index].timelineHasOwnJoin = Self.timelineJoins(
                                rooms[index], ownUserID: ownUserID, bytes: buffer)
                        }
                    }
                }
                return SlidingSyncResponse(
                    body: SyncResponseBody(document: document, head: reader.head, rooms: rooms), pos: sliding.pos ?? "",
                    listCounts: sliding.listCounts, toDeviceNextBatch: sliding.toDeviceNextBatch)
            }
        }
        do {
            return try outcome.get()
        } catch {
            throw SyncDecodingError(error, missingMember: .missingNextBatch)
        }
    }

    /// Whether the account's newest membership event in `room` (timeline first, then state)
    /// leaves it.
    static func hasLeft(_ room: SyncRoomUpdate, ownUserID: String, bytes: UnsafeRawBufferPointer) -> Bool {
        let own = (room.state + room.timeline).last { $0.type == "m.room.member" && $0.stateKey == ownUserID }
        guard let own else { return false }
        let membership = RawJSON.string("membership", in: UnsafeRawBufferPointer(rebasing: bytes[own.content]))
        return membership == "leave" || membership == "ban"
    }
}

extension SlidingSyncResponseDecoder {
    /// Whether one of the account's membership events in the timeline of `room` (a room it has
    /// not left since: ``hasLeft(_:ownUserID:bytes:)``) joins it: it says `join`, and the
    /// membership before it (`unsigned.prev_content`) did not. A profile change after the join
    /// hides nothing.
    static func timelineJoins(_ room: SyncRoomUpdate, ownUserID: String, bytes: UnsafeRawBufferPointer) -> Bool {
        room.timeline.contains { event in
            event.type == "m.room.member" && event.stateKey == ownUserID && joins(event, bytes: bytes)
        }
    }

    /// Whether the membership event `own` makes its user a member.
    private static func joins(_ own: SyncEvent, bytes: UnsafeRawBufferPointer) -> Bool {
        guard RawJSON.string("membership", in: UnsafeRawBufferPointer(rebasing: bytes[own.content])) == "join" else {
            return false
        }
        let event = UnsafeRawBufferPointer(rebasing: bytes[own.range])
        guard let unsigned = RawJSON.value("unsigned", in: event) else { return true }
        let unsignedBytes = UnsafeRawBufferPointer(rebasing: event[unsigned])
        guard let previous = RawJSON.value("prev_content", in: unsignedBytes) else { return true }
        return RawJSON.string("membership", in: UnsafeRawBufferPointer(rebasing: unsignedBytes[previous])) != "join"
    }
}

/// What the sliding walk collects beside the v2 reader's head.
struct SlidingReader {
    var pos: String?
    var listCounts: [String: Int] = [:]
    var toDeviceNextBatch: String?
    /// Rooms by ID, and their order of first mention.
    var rooms: [String: SyncRoomUpdate] = [:]
    var order: [String] = []

    /// The update of `roomID`, created (joined) on first mention.
    mutating func withRoom(_ roomID: String, _ body: (inout SyncRoomUpdate) throws(JSONScanError) -> Void)
        throws(JSONScanError)
    {
        // Taken out of the dictionary while it changes, so that its arrays are not copied.
        let existing = rooms.removeValue(forKey: roomID)
        if existing == nil { order.append(roomID) }
        var room = existing ?? SyncRoomUpdate(roomID: roomID, membership: .joined)
        defer { rooms[roomID] = room }
        try body(&room)
    }
}

extension Reader {
    mutating func readSlidingDocument(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard let first = scanner.peek() else { throw scanner.error(.unexpectedEnd) }
        guard first == UInt8(ascii: "{") else { throw structureError() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "pos") {
                sliding.pos = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "lists") {
                try readSlidingLists(&sliding)
            } else if scanner.key(key, is: "rooms") {
                try readSlidingRooms(&sliding)
            } else if scanner.key(key, is: "extensions") {
                try readExtensions(&sliding)
            } else {
                try scanner.skipValue()
            }
        }
        guard scanner.isAtEnd() else { throw scanner.error(.unexpectedByte) }
        guard sliding.pos != nil else { throw scanner.error(.missingMember) }
    }

    mutating func readSlidingLists(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var lists = try scanner.beginObject()
        while let name = try scanner.nextKey(&lists) {
            let listName = scanner.string(of: name)
            guard scanner.peek() == UInt8(ascii: "{") else {
                try scanner.skipValue()
                continue
            }
            var cursor = try scanner.beginObject()
            while let key = try scanner.nextKey(&cursor) {
                if scanner.key(key, is: "count"), let count = try scanner.readIntegerOrSkip() {
                    sliding.listCounts[listName] = Int(clamping: count)
                } else {
                    try scanner.skipValue()
                }
            }
        }
    }

    mutating func readSlidingRooms(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { throw structureError() }
        var rooms = try scanner.beginObject()
        while let roomKey = try scanner.nextKey(&rooms) {
            guard scanner.peek() == UInt8(ascii: "{") else { throw structureError() }
            try sliding.withRoom(scanner.string(of: roomKey)) { room throws(JSONScanError) in
                try readSlidingRoom(&room)
            }
        }
    }

    mutating func readSlidingRoom(_ room: inout SyncRoomUpdate) throws(JSONScanError) {
        var cursor = try scanner.beginObject()
        let roomID = room.roomID
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "required_state") {
                try readEvents(.state, section: "state", roomID: roomID, into: &room.state)
            } else if scanner.key(key, is: "timeline") {
                try readEvents(.timeline, section: "timeline", roomID: roomID, into: &room.timeline)
            } else if scanner.key(key, is: "limited") {
                room.isLimited = try scanner.readBoolOrSkip() ?? false
            } else if scanner.key(key, is: "prev_batch") {
                room.previousBatch = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "invite_state") {
                room.membership = .invited
                try readEvents(.stripped, section: "invite_state", roomID: roomID, into: &room.state)
            } else if scanner.key(key, is: "heroes") {
                if let heroes = try readHeroes() {
                    room.heroes = heroes.map(\.userID)
                    for hero in heroes { room.heroNames[hero.userID] = hero.displayName }
                }
            } else if scanner.key(key, is: "joined_count") {
                room.joinedMemberCount = try scanner.readIntegerOrSkip()
            } else if scanner.key(key, is: "invited_count") {
                room.invitedMemberCount = try scanner.readIntegerOrSkip()
            } else if scanner.key(key, is: "notification_count") {
                room.notificationCount = try scanner.readIntegerOrSkip()
            } else if scanner.key(key, is: "highlight_count") {
                room.highlightCount = try scanner.readIntegerOrSkip()
            } else {
                try scanner.skipValue()
            }
        }
    }

    /// `heroes: [{"user_id": …, "displayname": …}, …]`: their user IDs and display names (the
    /// members' state, when the room has it, wins, as in v2).
    mutating func readHeroes() throws(JSONScanError) -> [(userID: String, displayName: String?)]? {
        guard scanner.peek() == UInt8(ascii: "[") else {
            try scanner.skipValue()
            return nil
        }
        var heroes: [(userID: String, displayName: String?)] = []
        var list = try scanner.beginArray()
        while try scanner.nextElement(&list) {
            guard scanner.peek() == UInt8(ascii: "{") else {
                try scanner.skipValue()
                continue
            }
            var hero = try scanner.beginObject()
            var userID: String?
            var displayName: String?
            while let key = try scanner.nextKey(&hero) {
                if scanner.key(key, is: "user_id") {
                    userID = try scanner.readStringOrSkip()
                } else if scanner.key(key, is: "displayname") {
                    displayName = try scanner.readStringOrSkip()
                } else {
                    try scanner.skipValue()
                }
            }
            if let userID { heroes.append((userID, displayName)) }
        }
        return heroes
    }

    // MARK: Extensions

    mutating func readExtensions(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "to_device") {
                try readToDeviceExtension(&sliding)
            } else if scanner.key(key, is: "e2ee") {
                try readE2EEExtension()
            } else if scanner.key(key, is: "account_data") {
                try readAccountDataExtension(&sliding)
            } else if scanner.key(key, is: "receipts") {
                try readEphemeralExtension(&sliding, section: "receipts")
            } else if scanner.key(key, is: "typing") {
                try readEphemeralExtension(&sliding, section: "typing")
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readToDeviceExtension(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "next_batch") {
                sliding.toDeviceNextBatch = try scanner.readStringOrSkip()
            } else if scanner.key(key, is: "events") {
                var events = head.toDevice
                try readEvents(.toDevice, section: "to_device", roomID: nil, into: &events)
                head.toDevice = events
            } else {
                try scanner.skipValue()
            }
        }
    }

    mutating func readE2EEExtension() throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "device_lists") {
                try readDeviceLists()
            } else if scanner.key(key, is: "device_one_time_keys_count") {
                try readKeyCounts()
            } else if scanner.key(key, is: "device_unused_fallback_key_types") {
                head.unusedFallbackKeyTypes = try readStringArray()
            } else {
                try scanner.skipValue()
            }
        }
    }

    /// `{"global": [events], "rooms": {"!room": [events]}}`.
    mutating func readAccountDataExtension(_ sliding: inout SlidingReader) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            if scanner.key(key, is: "global") {
                var events = head.accountData
                try readEvents(.basic, section: "account_data", roomID: nil, into: &events)
                head.accountData = events
            } else if scanner.key(key, is: "rooms"), scanner.peek() == UInt8(ascii: "{") {
                var rooms = try scanner.beginObject()
                while let roomKey = try scanner.nextKey(&rooms) {
                    let roomID = scanner.string(of: roomKey)
                    try sliding.withRoom(roomID) { room throws(JSONScanError) in
                        try readEvents(.basic, section: "account_data", roomID: roomID, into: &room.accountData)
                    }
                }
            } else {
                try scanner.skipValue()
            }
        }
    }

    /// `{"rooms": {"!room": event}}`: one `m.receipt` or `m.typing` event per room, an
    /// ephemeral event of that room.
    mutating func readEphemeralExtension(_ sliding: inout SlidingReader, section: String) throws(JSONScanError) {
        guard scanner.peek() == UInt8(ascii: "{") else { return try scanner.skipValue() }
        var cursor = try scanner.beginObject()
        while let key = try scanner.nextKey(&cursor) {
            guard scanner.key(key, is: "rooms"), scanner.peek() == UInt8(ascii: "{") else {
                try scanner.skipValue()
                continue
            }
            var rooms = try scanner.beginObject()
            while let roomKey = try scanner.nextKey(&rooms) {
                let roomID = scanner.string(of: roomKey)
                let start = scanner.index
                switch try readEvent(.basic) {
                case .success(let event):
                    try sliding.withRoom(roomID) { room throws(JSONScanError) in room.ephemeral.append(event) }
                case .failure(let problem):
                    head.malformedEvents.append(
                        MalformedSyncEvent(
                            section: section, roomID: roomID, range: start..<scanner.index, reason: problem.reason))
                }
            }
        }
    }
}
