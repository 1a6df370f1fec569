import SymorvaChatStore
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

@Suite("Sliding sync response decoder")
struct SlidingSyncResponseDecoderTests {
    /// A response in MSC4186's shape: two rooms, an invite, extensions for a room outside
    /// `rooms`, and one unusable timeline event.
    static let response = #"""
        {
          "pos": "p42",
          "lists": {"all": {"count": 1234, "ops": []}},
          "rooms": {
            "!a:x": {
              "name": "ignored: computed from state",
              "initial": true,
              "required_state": [
                {"type": "m.room.name", "state_key": "", "event_id": "$n", "sender": "@bob:x",
                 "origin_server_ts": 5, "content": {"name": "Room A"}},
                {"type": "m.room.member", "state_key": "@me:x", "event_id": "$m", "sender": "@me:x",
                 "origin_server_ts": 6, "content": {"membership": "join"}}
              ],
              "timeline": [
                {"type": "m.room.message", "event_id": "$1", "sender": "@bob:x", "origin_server_ts": 10,
                 "content": {"msgtype": "m.text", "body": "hello"}},
                {"type": "m.room.message", "sender": "@bob:x", "origin_server_ts": 11, "content": {}}
              ],
              "limited": true,
              "prev_batch": "t1",
              "heroes": [{"user_id": "@bob:x", "displayname": "Bob"}, {"user_id": "@carol:x"}],
              "joined_count": 3,
              "invited_count": 1,
              "notification_count": 2,
              "highlight_count": 1,
              "bump_stamp": 99
            },
            "!b:x": {
              "timeline": [
                {"type": "m.room.member", "state_key": "@me:x", "event_id": "$left", "sender": "@me:x",
                 "origin_server_ts": 20, "content": {"membership": "leave"}}
              ]
            },
            "!i:x": {
              "invite_state": [
                {"type": "m.room.member", "state_key": "@me:x", "sender": "@bob:x", "content": {"membership": "invite"}}
              ]
            }
          },
          "extensions": {
            "to_device": {"next_batch": "td7", "events": [
              {"type": "m.room_key", "sender": "@bob:x", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
            ]},
            "e2ee": {
              "device_lists": {"changed": ["@bob:x"], "left": ["@dan:x"]},
              "device_one_time_keys_count": {"signed_curve25519": 17},
              "device_unused_fallback_key_types": ["signed_curve25519"]
            },
            "account_data": {
              "global": [{"type": "m.push_rules", "content": {}}],
              "rooms": {"!a:x": [{"type": "m.tag", "content": {"tags": {"m.favourite": {}}}}]}
            },
            "receipts": {"rooms": {"!a:x": {"type": "m.receipt", "content": {
              "$1": {"m.read": {"@bob:x": {"ts": 12}}}}}}},
            "typing": {"rooms": {"!z:x": {"type": "m.typing", "content": {"user_ids": ["@bob:x"]}}}}
          }
        }
        """#

    @Test("Rooms, lists, position and every extension map onto the v2 ingest's shape")
    func decodesEverything() throws {
        let decoded = try SlidingSyncResponseDecoder.decode(Array(Self.response.utf8), ownUserID: "@me:x")
        #expect(decoded.pos == "p42")
        #expect(decoded.listCounts == ["all": 1234])
        #expect(decoded.toDeviceNextBatch == "td7")
        let body = decoded.body
        // pos is not a since-token.
        #expect(body.head.nextBatch == "")
        #expect(body.rooms.map(\.roomID) == ["!a:x", "!b:x", "!i:x", "!z:x"])
        #expect(body.rooms.map(\.membership) == [.joined, .left, .invited, .joined])
        let a = body.rooms[0]
        #expect(a.state.map(\.type) == ["m.room.name", "m.room.member"])
        #expect(a.timeline.map(\.eventID) == ["$1"])
        #expect(a.isLimited && a.previousBatch == "t1")
        #expect(a.heroes == ["@bob:x", "@carol:x"])
        #expect(a.heroNames == ["@bob:x": "Bob"])
        #expect(a.joinedMemberCount == 3 && a.invitedMemberCount == 1)
        #expect(a.notificationCount == 2 && a.highlightCount == 1)
        #expect(a.accountData.map(\.type) == ["m.tag"])
        #expect(a.ephemeral.map(\.type) == ["m.receipt"])
        #expect(body.rooms[2].state.map(\.stateKey) == ["@me:x"])
        #expect(body.rooms[3].ephemeral.map(\.type) == ["m.typing"])
        #expect(body.head.toDevice.map(\.type) == ["m.room_key"])
        #expect(body.head.deviceListsChanged == ["@bob:x"] && body.head.deviceListsLeft == ["@dan:x"])
        #expect(body.head.oneTimeKeyCounts == ["signed_curve25519": 17])
        #expect(body.head.unusedFallbackKeyTypes == ["signed_curve25519"])
        #expect(body.head.accountData.map(\.type) == ["m.push_rules"])
        #expect(body.malformedEvents.map(\.reason) == ["missing event_id"])
        #expect(body.malformedEvents.first?.roomID == "!a:x")
    }

    @Test("Without the account's user ID a room is never taken as left")
    func leftNeedsOwnUserID() throws {
        let decoded = try SlidingSyncResponseDecoder.decode(Array(Self.response.utf8))
        #expect(decoded.body.rooms[1].membership == .joined)
    }

    @Test("A response without pos, or not an object, or not JSON, is a typed error")
    func errors() {
        #expect(throws: SyncDecodingError.missingNextBatch) {
            try SlidingSyncResponseDecoder.decode(Array(#"{"lists": {}}"#.utf8))
        }
        #expect(throws: SyncDecodingError.unexpectedStructure(offset: 0)) {
            try SlidingSyncResponseDecoder.decode(Array("[]".utf8))
        }
        #expect(throws: SyncDecodingError.self) { try SlidingSyncResponseDecoder.decode(Array(#"{"pos": "#.utf8)) }
        #expect(throws: SyncDecodingError.self) {
            try SlidingSyncResponseDecoder.decode(Array(#"{"pos": "p", "rooms": []}"#.utf8))
        }
    }

    @Test("A decoded window is stored by the v2 writer: rooms, state, timeline, receipts, tags; pos apart")
    func storesThroughTheIngest() async throws {
        let store = try await makeChatStore()
        let handed = Lock<[SyncDeviceInbox]>([])
        let ingestor = SyncIngestor(store: store, inbox: { inbox, _ in handed.withLock { $0.append(inbox) } })
        let decoded = try SlidingSyncResponseDecoder.decode(Array(Self.response.utf8), ownUserID: "@me:x")
        let report = try await ingestor.ingest(sliding: decoded)
        #expect(report.rooms == 4 && report.timelineEvents == 2 && report.malformedEvents == 1)
        #expect(report.nextBatch == "p42")
        #expect(try await count("rooms", in: store) == 4)
        #expect(try await count("rooms", in: store, where: "room_id = '!a:x' AND is_favourite = 1") == 1)
        #expect(try await count("receipts", in: store) == 1)
        let list = try await store.loadConversationList()
        #expect(list.contains { $0.roomID == "!a:x" && $0.name == "Room A" })
        // pos and the to-device since are committed together; v2's since-token is not touched.
        let position = try await store.slidingSyncPosition()
        #expect(position.pos == "p42" && position.toDeviceSince == "td7")
        #expect(try await store.sinceToken() == nil)
        // The crypto module's share went to its inbox in the same transaction, as v2's does.
        let inbox = try #require(handed.withLock { $0 }.first)
        #expect(inbox.toDevice.map(\.type) == ["m.room_key"] && inbox.oneTimeKeyCounts == ["signed_curve25519": 17])
        #expect(inbox.deviceListsChanged == ["@bob:x"] && inbox.deviceListsLeft == ["@dan:x"])
        // The same window again (a reset connection sends it anew) merges without duplicates.
        _ = try await ingestor.ingest(sliding: decoded)
        #expect(try await count("events", in: store) == 2)
        #expect(try await count("rooms", in: store) == 4)
    }

    @Test("A response without the to-device extension moves pos and keeps the to-device since")
    func toDeviceSinceKept() async throws {
        let store = try await makeChatStore()
        _ = try await SyncIngestor(store: store).ingest(
            sliding: try SlidingSyncResponseDecoder.decode(Array(Self.response.utf8)))
        _ = try await SyncIngestor(store: store).ingest(
            sliding: try SlidingSyncResponseDecoder.decode(
                Array(#"{"pos": "p43", "lists": {"all": {"count": 1234}}}"#.utf8)))
        let position = try await store.slidingSyncPosition()
        #expect(position.pos == "p43" && position.toDeviceSince == "td7")
    }

    @Test("When the crypto inbox fails nothing is stored and neither position moves")
    func atomicWithTheInbox() async throws {
        let store = try await makeChatStore()
        let ingestor = SyncIngestor(store: store, inbox: { _, _ throws(StoreError) in throw StoreError.full })
        let decoded = try SlidingSyncResponseDecoder.decode(Array(Self.response.utf8))
        await #expect(throws: ChatStoreError.store(.full)) { try await ingestor.ingest(sliding: decoded) }
        let position = try await store.slidingSyncPosition()
        #expect(position.pos == nil && position.toDeviceSince == nil)
        #expect(try await count("rooms", in: store) == 0)
    }
}
