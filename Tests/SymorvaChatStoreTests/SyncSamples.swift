/// Small `/sync` responses shaped like the Matrix specification's examples, for the decoder and
/// ingest tests.
enum SyncSamples {
    static let roomID = "!726s6s6q:example.com"

    /// A joined room with state, a limited timeline (message, reply, edit, reaction, thread
    /// reply, redaction, an own echo), receipts, tags and unread counts, plus the top-level
    /// sections.
    static let spec = #"""
        {
          "next_batch": "s72595_4483_1934",
          "account_data": {"events": [{"type": "org.example.custom.config", "content": {"custom_config_key": "custom_config_value"}}]},
          "to_device": {"events": [{"type": "m.new_device", "sender": "@alice:example.com", "content": {"device_id": "XYZABCDE", "rooms": ["!726s6s6q:example.com"]}}]},
          "device_lists": {"changed": ["@alice:example.com"], "left": ["@bob:example.com"]},
          "device_one_time_keys_count": {"signed_curve25519": 20},
          "presence": {"events": [{"type": "m.presence", "sender": "@alice:example.com", "content": {"presence": "online"}}]},
          "rooms": {
            "join": {
              "!726s6s6q:example.com": {
                "summary": {"m.heroes": ["@alice:example.com", "@bob:example.com"], "m.joined_member_count": 2, "m.invited_member_count": 0},
                "state": {"events": [
                  {"type": "m.room.member", "state_key": "@alice:example.com", "event_id": "$m1", "sender": "@alice:example.com", "origin_server_ts": 1432735824653, "content": {"membership": "join", "displayname": "Al\u00efce \ud83d\ude00"}},
                  {"type": "m.room.member", "state_key": "@bob:example.com", "event_id": "$m2", "sender": "@bob:example.com", "origin_server_ts": 1432735824654, "content": {"membership": "join"}},
                  {"type": "m.room.encryption", "state_key": "", "event_id": "$enc", "sender": "@alice:example.com", "origin_server_ts": 1432735824655, "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
                ]},
                "timeline": {
                  "events": [
                    {"type": "m.room.message", "event_id": "$e1", "sender": "@alice:example.com", "origin_server_ts": 1432735824660, "content": {"msgtype": "m.text", "body": "Hello \"world\" \\ \n 你好 👨‍👩‍👧 \u05e9\u05dc\u05d5\u05dd"}, "unsigned": {"age": 1234}},
                    {"type": "m.room.message", "event_id": "$e2", "sender": "@bob:example.com", "origin_server_ts": 1432735824661, "content": {"msgtype": "m.text", "body": "reply", "m.relates_to": {"m.in_reply_to": {"event_id": "$e1"}}}},
                    {"type": "m.room.message", "event_id": "$e3", "sender": "@alice:example.com", "origin_server_ts": 1432735824662, "content": {"msgtype": "m.text", "body": "* Hello edited", "m.new_content": {"msgtype": "m.text", "body": "Hello edited"}, "m.relates_to": {"rel_type": "m.replace", "event_id": "$e1"}}},
                    {"type": "m.reaction", "event_id": "$e4", "sender": "@bob:example.com", "origin_server_ts": 1432735824663, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$e1", "key": "\ud83d\udc4d"}}},
                    {"type": "m.room.message", "event_id": "$e5", "sender": "@bob:example.com", "origin_server_ts": 1432735824664, "content": {"msgtype": "m.text", "body": "in thread", "m.relates_to": {"rel_type": "m.thread", "event_id": "$e1", "is_falling_back": true, "m.in_reply_to": {"event_id": "$e1"}}}},
                    {"type": "m.room.message", "event_id": "$e6", "sender": "@bob:example.com", "origin_server_ts": 1432735824665, "content": {"msgtype": "m.text", "body": "secret"}},
                    {"type": "m.room.redaction", "event_id": "$e7", "sender": "@bob:example.com", "origin_server_ts": 1432735824666, "redacts": "$e6", "content": {"reason": "oops"}},
                    {"type": "m.room.message", "event_id": "$e8", "sender": "@me:example.com", "origin_server_ts": 1432735824667, "content": {"msgtype": "m.text", "body": "mine"}, "unsigned": {"transaction_id": "txn-1"}}
                  ],
                  "limited": true,
                  "prev_batch": "t34-23535_0_0"
                },
                "ephemeral": {"events": [
                  {"type": "m.receipt", "content": {"$e1": {"m.read": {"@bob:example.com": {"ts": 1436451550453}}, "m.read.private": {"@self:example.org": {"ts": 1661384801651, "thread_id": "main"}}}}},
                  {"type": "m.typing", "content": {"user_ids": ["@alice:example.com"]}}
                ]},
                "account_data": {"events": [{"type": "m.tag", "content": {"tags": {"m.favourite": {"order": 0.5}, "u.pinned": {}}}}]},
                "unread_notifications": {"highlight_count": 1, "notification_count": 5}
              }
            },
            "invite": {
              "!696r7674:example.com": {"invite_state": {"events": [
                {"type": "m.room.name", "state_key": "", "sender": "@alice:example.com", "content": {"name": "My Room Name"}},
                {"type": "m.room.member", "state_key": "@me:example.com", "sender": "@alice:example.com", "content": {"membership": "invite"}}
              ]}}
            },
            "leave": {}
          }
        }
        """#

    /// `spec` as bytes.
    static var specBytes: [UInt8] { Array(spec.utf8) }

    /// A minimal response for `roomID` with `events` (JSON texts) in a timeline.
    static func response(
        nextBatch: String, events: [String], limited: Bool = false, prevBatch: String? = nil, roomID: String = roomID
    ) -> [UInt8] {
        var text = #"{"next_batch":"\#(nextBatch)","rooms":{"join":{"\#(roomID)":{"timeline":{"events":["#
        text += events.joined(separator: ",")
        text += #"],"limited":\#(limited)"#
        if let prevBatch { text += #","prev_batch":"\#(prevBatch)""# }
        text += "}}}}}"
        return Array(text.utf8)
    }

    /// A timeline message event.
    static func message(_ id: String, body: String = "hi", ts: Int64 = 1_000, sender: String = "@alice:example.com")
        -> String
    {
        #"{"type":"m.room.message","event_id":"\#(id)","sender":"\#(sender)","origin_server_ts":\#(ts),"content":{"msgtype":"m.text","body":"\#(body)"}}"#
    }
}
