/// The timelines of a generated response: messages and their relations.
extension GeneratorWriter {
    /// A message written so far, which later events may react to, edit, reply to or redact.
    struct Written {
        var eventID: String
        var sender: String
    }

    /// Writes `{"events":[…]` (left open for `limited` and `prev_batch`) and returns the last
    /// event's ID.
    mutating func writeTimeline(members: Members, isEncrypted: Bool) -> String {
        raw("{\"events\":[")
        var messages: [Written] = []
        var last = ""
        for offset in 0..<configuration.eventsPerRoom {
            if offset > 0 { raw(",") }
            let sender = random.chance(20) ? members.userIDs[0] : random.pick(members.userIDs)
            let roll = random.below(100)
            if roll < 55 || messages.isEmpty {
                last = writeMessage(sender: sender, isEncrypted: isEncrypted, messages: messages)
                messages.append(Written(eventID: last, sender: sender))
            } else if roll < 70 {
                last = writeReaction(sender: sender, to: recent(messages), isEncrypted: isEncrypted)
            } else if roll < 78 {
                let target = recent(messages)
                last = writeEdit(of: target, isEncrypted: isEncrypted)
            } else if roll < 82 {
                let target = messages.remove(at: recentIndex(messages.count))
                last = beginEvent(type: "m.room.redaction", sender: target.sender)
                raw("{\"redacts\":")
                string(target.eventID)
                raw(random.chance(50) ? ",\"reason\":\"spam\"}" : "}")
                raw(",\"redacts\":")
                string(target.eventID)
                endEvent()
                if messages.isEmpty { messages.append(target) }
            } else if roll < 86 {
                last = writeMedia(sender: sender)
                messages.append(Written(eventID: last, sender: sender))
            } else if roll < 88 {
                let index = random.below(members.userIDs.count)
                let user = members.userIDs[index]
                last = beginEvent(type: "m.room.member", sender: user, stateKey: user)
                raw("{\"membership\":\"join\",\"displayname\":")
                string(members.names[index] + " " + random.pick(GeneratorText.emojiKeys))
                raw("}")
                endEvent()
            } else {
                last = writeMessage(sender: sender, isEncrypted: isEncrypted, messages: messages, long: true)
                messages.append(Written(eventID: last, sender: sender))
            }
        }
        raw("]")
        return last
    }

    /// A target for a relation: like people, events mostly react to, edit and answer recent
    /// messages (four times in five among the last twenty).
    mutating func recent(_ messages: [Written]) -> Written { messages[recentIndex(messages.count)] }

    mutating func recentIndex(_ count: Int) -> Int {
        random.chance(80) ? max(0, count - 20) + random.below(min(20, count)) : random.below(count)
    }

    /// A text message (a reply or thread reply some of the time), or its encrypted form.
    mutating func writeMessage(sender: String, isEncrypted: Bool, messages: [Written], long: Bool = false) -> String {
        let body = sentence(words: long ? 60 + random.below(60) : 7 + random.below(40))
        let relationRoll = messages.isEmpty ? 100 : random.below(100)
        let own = sender == SyncResponseGenerator.ownUserID
        if isEncrypted {
            let id = beginEvent(type: "m.room.encrypted", sender: sender)
            writeCiphertext(plaintextLength: body.utf8.count + 120)
            if relationRoll < 15 { writeReplyRelation(to: recent(messages).eventID, thread: relationRoll < 5) }
            raw("}")
            endEvent(ownTransaction: own)
            return id
        }
        let id = beginEvent(type: "m.room.message", sender: sender)
        raw(random.chance(10) ? "{\"msgtype\":\"m.notice\",\"body\":" : "{\"msgtype\":\"m.text\",\"body\":")
        string(body)
        if long {
            raw(",\"format\":\"org.matrix.custom.html\",\"formatted_body\":")
            string("<p>" + body + "</p>")
        }
        if relationRoll < 15 { writeReplyRelation(to: recent(messages).eventID, thread: relationRoll < 5) }
        raw(",\"m.mentions\":{}}")
        endEvent(ownTransaction: own)
        return id
    }

    /// `,"m.relates_to":{…}` for a reply, or a thread reply falling back to a reply.
    mutating func writeReplyRelation(to target: String, thread: Bool) {
        raw(",\"m.relates_to\":{")
        if thread {
            raw("\"rel_type\":\"m.thread\",\"event_id\":")
            string(target)
            raw(",\"is_falling_back\":true,")
        }
        raw("\"m.in_reply_to\":{\"event_id\":")
        string(target)
        raw("}}")
    }

    /// The fields of a Megolm `m.room.encrypted` content, without the closing brace.
    mutating func writeCiphertext(plaintextLength: Int) {
        raw("{\"algorithm\":\"m.megolm.v1.aes-sha2\",\"ciphertext\":")
        string(token(GeneratorText.base64, count: (plaintextLength * 4 / 3 + 140) & ~3))
        raw(",\"device_id\":\"SYMORVADEV\",\"sender_key\":")
        string(token(GeneratorText.base64, count: 43))
        raw(",\"session_id\":")
        string(token(GeneratorText.base64, count: 43))
    }

    mutating func writeReaction(sender: String, to target: Written, isEncrypted: Bool) -> String {
        let id = beginEvent(type: isEncrypted ? "m.room.encrypted" : "m.reaction", sender: sender)
        if isEncrypted {
            writeCiphertext(plaintextLength: 60)
            raw(",")
        } else {
            raw("{")
        }
        raw("\"m.relates_to\":{\"rel_type\":\"m.annotation\",\"event_id\":")
        string(target.eventID)
        if !isEncrypted {
            raw(",\"key\":")
            string(random.pick(GeneratorText.emojiKeys))
        }
        raw("}}")
        endEvent(ownTransaction: sender == SyncResponseGenerator.ownUserID)
        return id
    }

    mutating func writeEdit(of target: Written, isEncrypted: Bool) -> String {
        let body = sentence(words: 3 + random.below(15))
        let id = beginEvent(type: isEncrypted ? "m.room.encrypted" : "m.room.message", sender: target.sender)
        if isEncrypted {
            writeCiphertext(plaintextLength: body.utf8.count * 2 + 160)
            raw(",")
        } else {
            raw("{\"msgtype\":\"m.text\",\"body\":")
            string("* " + body)
            raw(",\"m.new_content\":{\"msgtype\":\"m.text\",\"body\":")
            string(body)
            raw("},")
        }
        raw("\"m.relates_to\":{\"rel_type\":\"m.replace\",\"event_id\":")
        string(target.eventID)
        raw("}}")
        endEvent(ownTransaction: target.sender == SyncResponseGenerator.ownUserID)
        return id
    }

    mutating func writeMedia(sender: String) -> String {
        let id = beginEvent(type: "m.room.message", sender: sender)
        let name = "IMG_\(random.below(10_000)).jpg"
        raw("{\"msgtype\":\"m.image\",\"body\":")
        string(name)
        raw(",\"url\":\"mxc://symorva.example/")
        raw(token(GeneratorText.base64URL, count: 24))
        raw("\",\"info\":{\"mimetype\":\"image/jpeg\",\"size\":")
        number(Int64(50_000 + random.below(2_000_000)))
        raw(",\"w\":1024,\"h\":768,\"thumbnail_url\":\"mxc://symorva.example/thumb\",")
        raw("\"thumbnail_info\":{\"mimetype\":\"image/jpeg\",\"size\":12000,\"w\":320,\"h\":240},")
        raw("\"xyz.amorgan.blurhash\":\"LKO2?U%2Tw=w]~RBVZRi};RPxuwH\"}}")
        endEvent()
        return id
    }
}
