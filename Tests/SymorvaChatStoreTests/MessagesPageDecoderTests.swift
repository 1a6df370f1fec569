import SymorvaChatStore
import Testing

@Suite("Messages page decoder")
struct MessagesPageDecoderTests {
    /// A `/messages?dir=b` page as the spec shows it: newest first, a member in `state`.
    static let page = #"""
        {"start": "t47-1", "end": "t46-0", "chunk": [
          {"type": "m.room.redaction", "event_id": "$p4", "sender": "@bob:example.com",
           "origin_server_ts": 4, "redacts": "$p1", "content": {}},
          {"type": "m.reaction", "event_id": "$p3", "sender": "@bob:example.com", "origin_server_ts": 3,
           "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$p1", "key": "👍"}}},
          {"type": "m.room.message", "event_id": "$p2", "sender": "@alice:example.com", "origin_server_ts": 2,
           "unsigned": {"transaction_id": "txn-9"},
           "content": {"msgtype": "m.text", "body": "reply", "m.relates_to": {"m.in_reply_to": {"event_id": "$p1"}}}},
          {"type": "m.room.message", "event_id": "$p1", "origin_server_ts": 1, "content": {"body": "no sender"}},
          {"type": "m.room.message", "event_id": "$p0", "sender": "@alice:example.com", "origin_server_ts": 0,
           "content": {"msgtype": "m.text", "body": "first"}}
        ], "state": [
          {"type": "m.room.member", "event_id": "$m1", "sender": "@bob:example.com", "origin_server_ts": 0,
           "state_key": "@bob:example.com", "content": {"membership": "join", "displayname": "Bob"}}
        ]}
        """#

    @Test("A page decodes chunk, state and tokens with the timeline's fields; unusable events are recorded")
    func decodesPage() throws {
        let page = try SyncResponseDecoder.decodeMessages(Array(Self.page.utf8))
        #expect(page.start == "t47-1" && page.end == "t46-0")
        #expect(page.chunk.map(\.eventID) == ["$p4", "$p3", "$p2", "$p0"])
        #expect(page.chunk[0].type == "m.room.redaction" && page.chunk[0].redacts == "$p1")
        #expect(page.chunk[1].relation == EventRelation(type: "m.annotation", eventID: "$p1", key: "👍"))
        #expect(page.chunk[2].relation == EventRelation(inReplyTo: "$p1") && page.chunk[2].transactionID == "txn-9")
        #expect(page.text(page.chunk[3].content) == #"{"msgtype": "m.text", "body": "first"}"#)
        #expect(page.state.map(\.stateKey) == ["@bob:example.com"])
        #expect(page.malformedEvents.map(\.reason) == ["missing sender"])
        #expect(page.malformedEvents.map(\.section) == ["chunk"])
        #expect(page.text(page.malformedEvents[0].range).contains(#""body": "no sender""#))
    }

    @Test("The last page has no end; an empty chunk is a page")
    func lastPage() throws {
        let page = try SyncResponseDecoder.decodeMessages(Array(#"{"start":"t1","chunk":[]}"#.utf8))
        #expect(page.chunk.isEmpty && page.state.isEmpty && page.end == nil && page.start == "t1")
    }

    @Test("A malformed page is a typed error, with the offset where reading stopped")
    func malformedPages() {
        let cases: [(String, SyncDecodingError)] = [
            ("", .syntax(offset: 0)),
            ("[]", .unexpectedStructure(offset: 0)),
            (#"{"end":"t1"}"#, .missingChunk),
            (#"{"chunk":{}}"#, .unexpectedStructure(offset: 9)),
            (#"{"chunk":[{"type":"m.room.message"}"#, .syntax(offset: 35)),
            (#"{"chunk":[]} x"#, .syntax(offset: 13)),
            (#"{"chunk":[],"end":tru}"#, .syntax(offset: 18)),
            (#"{"chunk":["# + String(repeating: "[", count: 300), .tooDeep(offset: 210)),
        ]
        for (text, expected) in cases {
            #expect(throws: expected, "\(text.prefix(40))") { try SyncResponseDecoder.decodeMessages(Array(text.utf8)) }
        }
    }

    @Test("A page truncated anywhere is an error, not a partial page")
    func truncated() {
        let bytes = Array(Self.page.utf8)
        for cut in stride(from: 1, to: bytes.count - 2, by: 37) {
            #expect(throws: SyncDecodingError.self) { try SyncResponseDecoder.decodeMessages(Array(bytes[0..<cut])) }
        }
    }
}
