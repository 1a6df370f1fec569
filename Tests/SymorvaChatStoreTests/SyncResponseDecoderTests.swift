import SymorvaChatStore
import SymorvaTesting
import Testing

@Suite("Sync response decoder")
struct SyncResponseDecoderTests {
    @Test("A spec-shaped response decodes its structure and indexed fields")
    func specSample() throws {
        let body = try SyncResponseDecoder.decode(SyncSamples.specBytes)
        #expect(body.nextBatch == "s72595_4483_1934")
        #expect(body.head.accountData.map(\.type) == ["org.example.custom.config"])
        #expect(body.head.toDevice.map(\.type) == ["m.new_device"])
        #expect(body.head.toDevice.first?.sender == "@alice:example.com")
        #expect(body.head.deviceListsChanged == ["@alice:example.com"])
        #expect(body.head.deviceListsLeft == ["@bob:example.com"])
        #expect(body.head.oneTimeKeyCounts == ["signed_curve25519": 20])
        #expect(body.malformedEvents.isEmpty)
        #expect(body.rooms.map(\.membership) == [.joined, .invited])

        let room = body.rooms[0]
        #expect(room.roomID == SyncSamples.roomID)
        #expect(room.heroes == ["@alice:example.com", "@bob:example.com"])
        #expect(room.joinedMemberCount == 2 && room.invitedMemberCount == 0)
        #expect(room.notificationCount == 5 && room.highlightCount == 1)
        #expect(room.isLimited && room.previousBatch == "t34-23535_0_0")
        #expect(room.state.map(\.stateKey) == ["@alice:example.com", "@bob:example.com", ""])
        #expect(room.timeline.map(\.eventID) == ["$e1", "$e2", "$e3", "$e4", "$e5", "$e6", "$e7", "$e8"])
        #expect(room.ephemeral.map(\.type) == ["m.receipt", "m.typing"])
        #expect(room.accountData.map(\.type) == ["m.tag"])

        let first = room.timeline[0]
        #expect(first.type == "m.room.message" && first.sender == "@alice:example.com")
        #expect(first.originServerTS == 1_432_735_824_660)
        #expect(first.stateKey == nil && first.relation == nil)
        #expect(body.text(first.content).hasPrefix(#"{"msgtype": "m.text""#))
        #expect(body.text(first.range).hasPrefix(#"{"type": "m.room.message""#))
        #expect(body.text(first.range).hasSuffix("}"))

        #expect(room.timeline[1].relation == EventRelation(inReplyTo: "$e1"))
        #expect(room.timeline[2].relation == EventRelation(type: "m.replace", eventID: "$e1"))
        #expect(room.timeline[3].relation == EventRelation(type: "m.annotation", eventID: "$e1", key: "👍"))
        #expect(room.timeline[4].relation == EventRelation(type: "m.thread", eventID: "$e1", inReplyTo: "$e1"))
        #expect(room.timeline[6].redacts == "$e6")
        #expect(room.timeline[7].transactionID == "txn-1")

        let invite = body.rooms[1]
        #expect(invite.state.map(\.type) == ["m.room.name", "m.room.member"])
        #expect(invite.state.allSatisfy { $0.eventID == nil })
    }

    @Test("Escapes decode in extracted fields: \\uXXXX, surrogate pairs, lone surrogates, short escapes")
    func escapes() throws {
        let event =
            #"{"type":"m.room.message","event_id":"$a\u0062c\/\"q\\","sender":"@\u00e9\ud83d\ude00:x","origin_server_ts":1,"content":{"m.relates_to":{"rel_type":"m.annotation","event_id":"$t","key":"\ud83d\udc4d\ud83c\udffd|\ud800|\udc00|\t\n"}}}"#
        let body = try SyncResponseDecoder.decode(SyncSamples.response(nextBatch: "n\\u00e9", events: [event]))
        let decoded = try #require(body.rooms.first?.timeline.first)
        #expect(decoded.eventID == #"$abc/"q\"#)
        #expect(decoded.sender == "@é😀:x")
        #expect(decoded.relation?.key == "👍🏽|\u{FFFD}|\u{FFFD}|\t\n")
        #expect(body.nextBatch == "né")
    }

    @Test("Unicode text passes through raw content untouched")
    func rawUnicode() throws {
        let body = try SyncResponseDecoder.decode(SyncSamples.specBytes)
        let content = body.text(body.rooms[0].timeline[0].content)
        #expect(content.contains("你好 👨‍👩‍👧"))
        #expect(content.contains(#"\u05e9"#))
    }

    @Test("Unusable events are skipped, counted and kept raw; the rest of the room is read")
    func malformedEvents() throws {
        let events = [
            SyncSamples.message("$ok1"),
            #"{"type":"m.room.message","sender":"@a:x","origin_server_ts":1,"content":{}}"#,
            #"{"type":"m.room.message","event_id":42,"sender":"@a:x","origin_server_ts":1,"content":{}}"#,
            #"{"type":"m.room.message","event_id":"$c","sender":"@a:x","origin_server_ts":1,"content":"text"}"#,
            #"{"event_id":"$d","sender":"@a:x","origin_server_ts":1,"content":{}}"#,
            #"[1, 2, 3]"#,
            #"{"type":"m.room.message","event_id":"$e","sender":"@a:x","content":{}}"#,
            SyncSamples.message("$ok2"),
        ]
        let body = try SyncResponseDecoder.decode(SyncSamples.response(nextBatch: "n", events: events))
        #expect(body.rooms[0].timeline.map(\.eventID) == ["$ok1", "$ok2"])
        #expect(
            body.malformedEvents.map(\.reason) == [
                "missing event_id", "mistyped event_id", "missing content", "missing type", "not an object",
                "missing origin_server_ts",
            ])
        #expect(body.malformedEvents.allSatisfy { $0.section == "timeline" && $0.roomID == SyncSamples.roomID })
        #expect(body.text(body.malformedEvents[4].range) == "[1, 2, 3]")
    }

    @Test("A malformed document is a typed error, with the offset where reading stopped")
    func malformedDocuments() {
        let cases: [(String, SyncDecodingError)] = [
            ("", .syntax(offset: 0)),
            ("[]", .unexpectedStructure(offset: 0)),
            (#"{"next_batch":"a"} x"#, .syntax(offset: 19)),
            (#"{"next_batch":"a","rooms":[]}"#, .unexpectedStructure(offset: 26)),
            (#"{"rooms":{}}"#, .missingNextBatch),
            (#"{"next_batch":"a""#, .syntax(offset: 17)),
            (#"{"next_batch":"a" "x":1}"#, .syntax(offset: 18)),
            (#"{"next_batch":"a","x":tru}"#, .syntax(offset: 22)),
            (#"{"next_batch":"a","x":01}"#, .syntax(offset: 23)),
            (#"{"next_batch":"a","x":"\q"}"#, .syntax(offset: 23)),
            ("{\"next_batch\":\"a\u{1}\"}", .syntax(offset: 16)),
            (String(repeating: "[", count: 300), .unexpectedStructure(offset: 0)),
            (#"{"next_batch":"a","x":"# + String(repeating: "[", count: 300), .tooDeep(offset: 222)),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text.prefix(40))") { try SyncResponseDecoder.decode(Array(text.utf8)) }
        }
    }

    @Test("A response truncated inside a room is an error, not a partial result")
    func truncated() {
        let bytes = SyncSamples.specBytes
        for cut in stride(from: 10, to: bytes.count - 2, by: 97) {
            #expect(throws: SyncDecodingError.self) { try SyncResponseDecoder.decode(Array(bytes[0..<cut])) }
        }
    }

    @Test("Large and fractional timestamps read as integers")
    func numbers() throws {
        let events = [
            #"{"type":"t","event_id":"$1","sender":"@a:x","origin_server_ts":1.5e3,"content":{}}"#,
            #"{"type":"t","event_id":"$2","sender":"@a:x","origin_server_ts":-12,"content":{"n":[1e-7,0.5,-0]}}"#,
        ]
        let body = try SyncResponseDecoder.decode(SyncSamples.response(nextBatch: "n", events: events))
        #expect(body.rooms[0].timeline.map(\.originServerTS) == [1500, -12])
    }

    @Test("RawJSON reads single fields and redacts content per the spec's rules")
    func rawJSON() {
        let member = Array(
            #"{"membership":"join","displayname":"A\"b","avatar_url":"mxc://x","third_party_invite":{"signed":{"k":1},"display_name":"x"}}"#
                .utf8)
        member.withUnsafeBytes { content in
            #expect(RawJSON.string("displayname", in: content) == #"A"b"#)
            #expect(RawJSON.string("missing", in: content) == nil)
            let redacted = RawJSON.redactedContent(type: "m.room.member", content: content)
            #expect(
                String(decoding: redacted, as: UTF8.self)
                    == #"{"membership":"join","third_party_invite":{"signed":{"k":1}}}"#)
        }
        let message = Array(#"{"body":"secret","msgtype":"m.text"}"#.utf8)
        message.withUnsafeBytes { content in
            #expect(RawJSON.redactedContent(type: "m.room.message", content: content) == Array("{}".utf8))
        }
    }
}
