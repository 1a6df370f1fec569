/// The rooms of a generated response.
extension GeneratorWriter {
    /// A room's generated members: user IDs (the own user first) and display names.
    struct Members {
        var userIDs: [String]
        var names: [String]
    }

    static let userPool = 5_000

    mutating func members(ofRoom index: Int) -> Members {
        var members = Members(userIDs: [SyncResponseGenerator.ownUserID], names: ["Me"])
        let start = random.below(Self.userPool)
        for offset in 1..<max(2, configuration.membersPerRoom) {
            let user = (start + offset * 7_919) % Self.userPool
            members.userIDs.append("@user\(user):symorva.example")
            let first = GeneratorText.firstNames[user % GeneratorText.firstNames.count]
            members.names.append(first + " " + String(UnicodeScalar(UInt8(65 + user % 26))) + ".")
        }
        return members
    }

    // MARK: Event frame

    /// Writes `{"type":…,"event_id":…,"sender":…,"origin_server_ts":…,["state_key":…,]"content":`
    /// and returns the event ID; the caller writes the content and calls ``endEvent(ownTransaction:)``.
    @discardableResult
    mutating func beginEvent(type: String, sender: String, stateKey: String? = nil) -> String {
        let id = eventID()
        raw("{\"type\":")
        string(type)
        raw(",\"event_id\":")
        string(id)
        raw(",\"sender\":")
        string(sender)
        raw(",\"origin_server_ts\":")
        number(nextTimestamp())
        if let stateKey {
            raw(",\"state_key\":")
            string(stateKey)
        }
        raw(",\"content\":")
        return id
    }

    mutating func endEvent(ownTransaction: Bool = false) {
        raw(",\"unsigned\":{\"age\":")
        number(Int64(random.below(10_000_000)))
        raw(",\"membership\":\"join\"")
        if ownTransaction {
            raw(",\"transaction_id\":")
            string("m" + token(GeneratorText.base64URL, count: 16))
        }
        raw("}}")
    }

    mutating func stateEvent(_ type: String, sender: String, stateKey: String = "", content: () -> String) {
        beginEvent(type: type, sender: sender, stateKey: stateKey)
        raw(content())
        endEvent()
    }

    // MARK: State

    mutating func writeState(room index: Int, members: Members, isEncrypted: Bool, hasName: Bool) {
        let creator = members.userIDs[1]
        raw("{\"events\":[")
        stateEvent("m.room.create", sender: creator) { "{\"room_version\":\"10\",\"creator\":\"\(creator)\"}" }
        raw(",")
        beginEvent(type: "m.room.power_levels", sender: creator, stateKey: "")
        raw("{\"users\":{")
        for (offset, user) in members.userIDs.enumerated() {
            if offset > 0 { raw(",") }
            string(user)
            raw(offset == 1 ? ":100" : offset < 6 ? ":50" : ":0")
        }
        raw("},\"users_default\":0,\"events\":{\"m.room.name\":50,\"m.room.power_levels\":100},")
        raw("\"events_default\":0,\"state_default\":50,\"ban\":50,\"kick\":50,\"redact\":50,\"invite\":0}")
        endEvent()
        raw(",")
        stateEvent("m.room.join_rules", sender: creator) { "{\"join_rule\":\"invite\"}" }
        raw(",")
        stateEvent("m.room.history_visibility", sender: creator) { "{\"history_visibility\":\"shared\"}" }
        if hasName {
            raw(",")
            beginEvent(type: "m.room.name", sender: creator, stateKey: "")
            raw("{\"name\":")
            string(sentence(words: 1 + random.below(3)))
            raw("}")
            endEvent()
            raw(",")
            beginEvent(type: "m.room.topic", sender: creator, stateKey: "")
            raw("{\"topic\":")
            string(sentence(words: 4 + random.below(12)))
            raw("}")
            endEvent()
            raw(",")
            stateEvent("m.room.avatar", sender: creator) {
                "{\"url\":\"mxc://symorva.example/avatar\(index)\",\"info\":{\"mimetype\":\"image/png\",\"size\":20480}}"
            }
            raw(",")
            stateEvent("m.room.canonical_alias", sender: creator) {
                "{\"alias\":\"#room\(index):symorva.example\",\"alt_aliases\":[]}"
            }
        }
        if isEncrypted {
            raw(",")
            stateEvent("m.room.encryption", sender: creator) {
                "{\"algorithm\":\"m.megolm.v1.aes-sha2\",\"rotation_period_ms\":604800000,\"rotation_period_msgs\":100}"
            }
        }
        for (offset, user) in members.userIDs.enumerated() {
            raw(",")
            beginEvent(type: "m.room.member", sender: user, stateKey: user)
            raw("{\"membership\":\"join\",\"displayname\":")
            string(members.names[offset], escapingNonASCII: offset % 5 == 3)
            raw(",\"avatar_url\":\"mxc://symorva.example/")
            raw(token(GeneratorText.base64URL, count: 24))
            raw("\"}")
            endEvent()
        }
        raw("]}")
    }

    // MARK: Rooms

    mutating func writeJoinedRoom(_ index: Int) {
        let members = members(ofRoom: index)
        let isEncrypted = random.chance(30)
        let hasName = random.chance(70)
        raw("{\"summary\":{")
        if !hasName {
            raw("\"m.heroes\":[")
            for (offset, user) in members.userIDs.dropFirst().prefix(5).enumerated() {
                if offset > 0 { raw(",") }
                string(user)
            }
            raw("],")
        }
        raw("\"m.joined_member_count\":")
        number(Int64(members.userIDs.count))
        raw(",\"m.invited_member_count\":0},")
        key("state")
        writeState(room: index, members: members, isEncrypted: isEncrypted, hasName: hasName)
        raw(",")
        key("timeline")
        let lastEventID = writeTimeline(members: members, isEncrypted: isEncrypted)
        raw(",\"limited\":")
        raw(random.chance(70) ? "true" : "false")
        raw(",\"prev_batch\":")
        string("t\(index)-" + token(GeneratorText.base64URL, count: 12))
        raw("},")
        key("ephemeral")
        raw("{\"events\":[{\"type\":\"m.receipt\",\"content\":{")
        string(lastEventID)
        raw(":{\"m.read\":{")
        for (offset, user) in members.userIDs.prefix(3).enumerated() {
            if offset > 0 { raw(",") }
            string(user)
            raw(":{\"ts\":")
            number(timestamp)
            raw(offset == 2 ? ",\"thread_id\":\"main\"}" : "}")
        }
        raw("}}}},{\"type\":\"m.typing\",\"content\":{\"user_ids\":[]}}]},")
        key("account_data")
        raw("{\"events\":[{\"type\":\"m.fully_read\",\"content\":{\"event_id\":")
        string(lastEventID)
        raw("}}")
        if random.chance(15) {
            raw(
                random.chance(50)
                    ? ",{\"type\":\"m.tag\",\"content\":{\"tags\":{\"m.favourite\":{\"order\":0.5}}}}"
                    : ",{\"type\":\"m.tag\",\"content\":{\"tags\":{\"m.lowpriority\":{},\"u.pinned\":{}}}}")
        }
        raw("]},")
        key("unread_notifications")
        raw("{\"highlight_count\":")
        number(Int64(random.below(3)))
        raw(",\"notification_count\":")
        number(Int64(random.below(40)))
        raw("},\"unread_thread_notifications\":{}}")
    }

    mutating func writeInvitedRoom(_ index: Int) {
        let inviter = "@user\(index % Self.userPool):symorva.example"
        raw("{\"invite_state\":{\"events\":[")
        raw("{\"type\":\"m.room.name\",\"state_key\":\"\",\"sender\":\"\(inviter)\",\"content\":{\"name\":")
        string(sentence(words: 2))
        raw("}},{\"type\":\"m.room.member\",\"state_key\":\"\(SyncResponseGenerator.ownUserID)\",")
        raw("\"sender\":\"\(inviter)\",\"origin_server_ts\":")
        number(nextTimestamp())
        raw(",\"content\":{\"membership\":\"invite\"}}]}}")
    }

    mutating func writeLeftRoom(_ index: Int) {
        let members = members(ofRoom: index)
        raw("{\"state\":{\"events\":[]},\"timeline\":{\"events\":[")
        beginEvent(type: "m.room.message", sender: members.userIDs[1])
        raw("{\"msgtype\":\"m.text\",\"body\":")
        string(sentence(words: 5))
        raw("}")
        endEvent()
        raw(",")
        let own = SyncResponseGenerator.ownUserID
        beginEvent(type: "m.room.member", sender: own, stateKey: own)
        raw("{\"membership\":\"leave\"}")
        endEvent()
        raw("],\"limited\":true,\"prev_batch\":\"t-left-\(index)\"},\"account_data\":{\"events\":[]}}")
    }
}
