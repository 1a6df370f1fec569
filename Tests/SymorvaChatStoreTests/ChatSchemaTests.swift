import SymorvaChatStore
import SymorvaMatrix
import SymorvaStore
import SymorvaTesting
import Testing

@Suite("Chat schema")
struct ChatSchemaTests {
    @Test("A fresh database gets every table at the current version")
    func fresh() async throws {
        let store = try await makeChatStore()
        #expect(try await store.databaseForTesting.schemaVersion() == ChatSchema.currentVersion)
        let tables = try await store.databaseForTesting.queryAll(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
        ) { $0.string(0) }
        #expect(
            tables == [
                "account_data", "decrypted_events", "detached_chunks", "e2ee_inbox_device_lists",
                "e2ee_inbox_key_counts",
                "e2ee_inbox_to_device", "events", "malformed_events", "member_lists", "pending_decryption",
                "push_actions",
                "push_evaluation", "receipts", "room_state",
                "rooms", "send_queue", "server_thread_counts", "sliding_sync_state", "sync_state", "threads",
                "timeline_chunks",
                "timeline_gaps",
                "undecryptable_events",
            ])
        let indexes = try await store.databaseForTesting.queryAll(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        ) {
            $0.string(0)
        }
        #expect(indexes.contains("events_by_relation") && indexes.contains("events_by_reply"))
    }

    @Test("Upgrading from every earlier version keeps the queued messages")
    func upgradeKeepsSendQueue() async throws {
        for start in 2..<ChatSchema.currentVersion {
            let database = try await SQLiteDatabase.open(
                path: ":memory:", migrations: Array(ChatSchema.migrations.prefix(start)))
            try await database.execute(
                "INSERT INTO send_queue(room_id, txn_id, position, event_type, content, state, failure_reason, attempts, created_at) VALUES ('!r:x', 't1', 0, 'm.room.message', X'7B7D', 'failed', 'forbidden', 2, 7), ('!r:x', 't2', 1, 'm.room.message', X'7B7D', 'queued', NULL, 0, 8)"
            )
            try await database.migrate(ChatSchema.migrations)
            #expect(try await database.schemaVersion() == ChatSchema.currentVersion)
            let queued = try await ChatStore(database: database).queuedMessages()
            #expect(queued.map(\.transactionID) == ["t1", "t2"])
            #expect(queued[0].state == .failed && queued[0].failureReason == "forbidden" && queued[0].attempts == 2)
            #expect(queued.allSatisfy { $0.content == Array("{}".utf8) && $0.encryptedContent == nil })
        }
    }

    @Test(
        "Upgrading to version 8 hands what chat had stored for encryption to the crypto inbox, whether or not the crypto schema created it first"
    )
    func deviceInboxHandedOver() async throws {
        for inboxFirst in [false, true] {
            let database = try await SQLiteDatabase.open(
                path: ":memory:", migrations: Array(ChatSchema.migrations.prefix(7)))
            try await database.executeScript(
                """
                INSERT INTO to_device_events(type, sender, raw) VALUES ('m.room.encrypted', '@b:x', X'7B7D'), ('m.dummy', '@c:x', X'7B7D');
                INSERT INTO device_list_changes(user_id, change) VALUES ('@b:x', 1), ('@c:x', 2);
                INSERT INTO one_time_key_counts(algorithm, count) VALUES ('signed_curve25519', 12);
                """)
            if inboxFirst { try await database.executeScript(SyncDeviceInbox.tables) }
            try await database.migrate(ChatSchema.migrations)
            #expect(
                try await database.queryAll("SELECT type, sender FROM e2ee_inbox_to_device ORDER BY id") {
                    "\($0.string(0)) \($0.string(1))"
                } == ["m.room.encrypted @b:x", "m.dummy @c:x"])
            #expect(
                try await database.queryAll("SELECT user_id, change FROM e2ee_inbox_device_lists ORDER BY user_id") {
                    "\($0.string(0)) \($0.int(1))"
                } == ["@b:x 1", "@c:x 2"])
            #expect(
                try await database.queryOne(
                    "SELECT count FROM e2ee_inbox_key_counts WHERE algorithm = 'signed_curve25519'"
                ) {
                    $0.int(0)
                } == 12)
            #expect(
                try await database.queryOne(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('to_device_events', 'device_list_changes', 'one_time_key_counts')"
                ) { $0.int(0) } == 0)
        }
    }

    @Test("No migration drops or empties the send queue")
    func migrationsNeverDropQueue() {
        for migration in ChatSchema.migrations {
            let sql = migration.sql.uppercased()
            #expect(
                !sql.contains("DROP TABLE SEND_QUEUE") && !sql.contains("DELETE FROM SEND_QUEUE"), "\(migration.name)")
        }
    }

    @Test("A database written by a newer SDK is refused")
    func newerSchema() async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:", migrations: ChatSchema.migrations)
        try await database.executeScript("PRAGMA user_version = \(ChatSchema.currentVersion + 1)")
        await #expect(
            throws: StoreError.newerSchema(found: ChatSchema.currentVersion + 1, supported: ChatSchema.currentVersion)
        ) {
            try await database.migrate(ChatSchema.migrations)
        }
    }

    @Test("Send queue rows keep their order, state, reason and attempts")
    func sendQueue() async throws {
        let store = try await makeChatStore()
        for (index, txn) in ["a", "b", "c"].enumerated() {
            let row = try await store.enqueueMessage(
                roomID: "!r:x", transactionID: txn, eventType: "m.room.message", content: Array("{}".utf8),
                createdAt: Int64(index))
            #expect(row.position == Int64(index) && row.state == .queued)
        }
        _ = try await store.enqueueMessage(
            roomID: "!other:x", transactionID: "d", eventType: "m.room.message", content: [], createdAt: 9)
        await #expect(throws: ChatStoreError.self) {
            try await store.enqueueMessage(
                roomID: "!r:x", transactionID: "a", eventType: "m.room.message", content: [], createdAt: 0)
        }
        #expect(
            try await store.updateQueuedMessage(
                transactionID: "a", state: .failed, failureReason: "too_large", attempts: 1))
        #expect(try await store.updateQueuedMessage(transactionID: "b", state: .sent, sentEventID: "$x"))
        #expect(try await store.removeQueuedMessage(transactionID: "c"))
        #expect(!(try await store.removeQueuedMessage(transactionID: "c")))
        let rows = try await store.queuedMessages(roomID: "!r:x")
        #expect(rows.map(\.transactionID) == ["a", "b"])
        #expect(rows[0].state == .failed && rows[0].failureReason == "too_large" && rows[0].attempts == 1)
        #expect(rows[1].state == .sent && rows[1].sentEventID == "$x")
        #expect(try await store.queuedMessages().count == 3)
        #expect("\(rows[0])" == "QueuedMessage(a, failed)")
    }
}

@Suite("Sync response generator")
struct SyncResponseGeneratorTests {
    @Test("The same configuration gives the same bytes; another seed gives others")
    func determinism() {
        let configuration = SyncResponseGenerator.Configuration(rooms: 12, eventsPerRoom: 20, membersPerRoom: 6)
        let first = SyncResponseGenerator(configuration).generate()
        #expect(SyncResponseGenerator(configuration).generate() == first)
        var other = configuration
        other.seed += 1
        #expect(SyncResponseGenerator(other).generate() != first)
    }

    @Test("Its output decodes cleanly, with every kind of event the benchmarks rely on")
    func decodes() throws {
        let bytes = SyncResponseGenerator(.init(rooms: 60, eventsPerRoom: 50, membersPerRoom: 10)).generate()
        let body = try SyncResponseDecoder.decode(bytes)
        #expect(body.malformedEvents.isEmpty)
        #expect(body.rooms.count == 60)
        #expect(body.rooms.filter { $0.membership == .invited }.count == 1)
        #expect(body.rooms.filter { $0.membership == .left }.count == 1)
        let timeline = body.rooms.flatMap(\.timeline)
        let types = Set(timeline.map(\.type))
        #expect(
            types.isSuperset(of: [
                "m.room.message", "m.room.encrypted", "m.reaction", "m.room.redaction", "m.room.member",
            ]))
        let relations = Set(timeline.compactMap(\.relation?.type))
        #expect(relations == ["m.annotation", "m.replace", "m.thread"])
        #expect(timeline.contains { $0.relation?.inReplyTo != nil && $0.relation?.type == nil })
        #expect(timeline.contains { $0.transactionID != nil })
        let joined = body.rooms.filter { $0.membership == .joined }
        #expect(joined.allSatisfy { $0.timeline.count == 50 && $0.state.count >= 14 })
        #expect(body.head.toDevice.count == 3 && body.head.oneTimeKeyCounts["signed_curve25519"] == 50)
    }
}
