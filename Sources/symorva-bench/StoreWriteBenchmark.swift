import CSQLite
import SymorvaChatStore
import SymorvaKit
import SymorvaStore
import SymorvaTesting

/// `symorva-bench store [--rooms 1000] [--events 50] [--members 20] [--runs 3]`
///
/// Write throughput of the ingest path (an already decoded response → committed rows) against
/// a plain SQLite C-API loop that writes the same rooms, state rows, chunks, gaps and events
/// into the same schema in one transaction, with prepared statements and nothing else. The
/// ingest path additionally writes receipts and account data and computes room summaries, so
/// the ratio is a lower bound.
enum StoreWriteBenchmark: StaticBenchmark {
    static let name = "store"
    static let argumentsSynopsis = "[--rooms 1000] [--events 50] [--members 20] [--runs 3]"
    static let summary = "ingest write throughput vs a plain SQLite insert loop of the same rows"

    static func run(arguments: [String]) async -> Int32 {
        do throws(ChatBench.Failure) {
            let (_, values) = try ChatBench.options(arguments, known: ["rooms", "events", "members", "runs"])
            let configuration = SyncResponseGenerator.Configuration(
                rooms: try ChatBench.integer(values, "rooms", 1000),
                eventsPerRoom: try ChatBench.integer(values, "events", 50),
                membersPerRoom: try ChatBench.integer(values, "members", 20))
            let runs = try ChatBench.integer(values, "runs", 3)
            let body: SyncResponseBody
            do {
                body = try SyncResponseDecoder.decode(SyncResponseGenerator(configuration).generate())
            } catch {
                throw ChatBench.Failure(message: "decode failed: \(error)")
            }
            let folder = try ChatBench.temporaryDirectory()
            defer { ChatBench.removeDirectory(folder) }
            var ours: [Double] = []
            var plain: [Double] = []
            var oursCPU: [Double] = []
            var plainCPU: [Double] = []
            var rows = 0
            for run in 0..<runs {
                let path = folder + "/ours-\(run).sqlite"
                let store = try await ColdStartBenchmark.open(path)
                let start = ChatBench.now()
                let startCPU = ChatBench.cpuTime()
                do {
                    _ = try await SyncIngestor(store: store).ingest(body)
                } catch {
                    throw ChatBench.Failure(message: "ingest failed: \(error)")
                }
                ours.append(ChatBench.now() - start)
                oursCPU.append(ChatBench.cpuTime() - startCPU)
                ChatBench.removeDatabase(path)

                let plainPath = folder + "/plain-\(run).sqlite"
                _ = try await ColdStartBenchmark.open(plainPath)  // same schema, created by the migrations
                let plainStart = ChatBench.now()
                let plainStartCPU = ChatBench.cpuTime()
                rows = try PlainLoop(path: plainPath).write(body)
                plain.append(ChatBench.now() - plainStart)
                plainCPU.append(ChatBench.cpuTime() - plainStartCPU)
                ChatBench.removeDatabase(plainPath)
            }
            let oursMedian = ChatBench.median(ours)
            let plainMedian = ChatBench.median(plain)
            print(
                "store: \(body.rooms.count) rooms, \(ChatBench.megabytes(body.document.count)) response, \(rows) rows in the plain loop"
            )
            print(
                "  ingest (decoded response → committed): median \(ChatBench.format(oursMedian)) s wall, "
                    + "\(ChatBench.format(ChatBench.median(oursCPU))) s CPU")
            print(
                "  plain SQLite loop, same rows:           median \(ChatBench.format(plainMedian)) s wall, "
                    + "\(ChatBench.format(ChatBench.median(plainCPU))) s CPU")
            print(
                "  throughput ratio (plain / ingest): \(ChatBench.format(plainMedian / oursMedian * 100, 1))% wall, "
                    + "\(ChatBench.format(ChatBench.median(plainCPU) / ChatBench.median(oursCPU) * 100, 1))% CPU (goal ≥ 80%)"
            )
            return 0
        } catch {
            print("store: \(error.message)")
            return 1
        }
    }
}

/// The baseline: sqlite3 calls, prepared statements, one transaction, no summaries.
private struct PlainLoop {
    let path: String

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func write(_ body: SyncResponseBody) throws(ChatBench.Failure) -> Int {
        var connection: OpaquePointer?
        guard sqlite3_open(path, &connection) == SQLITE_OK, let connection else {
            throw ChatBench.Failure(message: "plain loop: cannot open")
        }
        defer { sqlite3_close(connection) }
        sqlite3_exec(
            connection,
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=\(ChatBench.synchronousFull ? "FULL" : "NORMAL"); PRAGMA foreign_keys=ON;",
            nil, nil, nil)
        // The account database's own connection settings, for a fair race.
        sqlite3_exec(connection, SQLiteDatabase.Configuration.account.connectionPragmas, nil, nil, nil)
        func prepare(_ sql: String) -> OpaquePointer? {
            var statement: OpaquePointer?
            sqlite3_prepare_v2(connection, sql, -1, &statement, nil)
            return statement
        }
        let room = prepare("INSERT INTO rooms(room_id, membership) VALUES (?, ?)")
        let state = prepare(
            "INSERT INTO room_state(room_nid, type, state_key, event_id, sender, origin_server_ts, content) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET event_id = excluded.event_id, sender = excluded.sender, origin_server_ts = excluded.origin_server_ts, content = excluded.content"
        )
        let chunk = prepare("INSERT INTO timeline_chunks(room_nid, prev_chunk_id) VALUES (?, ?)")
        let gap = prepare("INSERT INTO timeline_gaps(chunk_id, prev_batch) VALUES (?, ?)")
        let event = prepare(
            // The ingest's statement shape (`OR IGNORE`: no statement journal), so that the two
            // paths write the same way.
            "INSERT OR IGNORE INTO events(room_nid, chunk_id, position, event_id, type, sender, origin_server_ts, state_key, txn_id, content, relates_to_event_id, rel_type, relation_key, in_reply_to) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        let live = prepare("UPDATE rooms SET live_chunk_id = ? WHERE room_nid = ?")
        let token = prepare(
            "INSERT INTO sync_state(id, since_token) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET since_token = excluded.since_token"
        )
        defer { for statement in [room, state, chunk, gap, event, live, token] { sqlite3_finalize(statement) } }
        var rows = 0
        sqlite3_exec(connection, "BEGIN IMMEDIATE", nil, nil, nil)
        body.document.withUnsafeBytes { bytes in
            func text(_ statement: OpaquePointer?, _ index: Int32, _ value: String?) {
                guard var value else {
                    sqlite3_bind_null(statement, index)
                    return
                }
                value.withUTF8 { utf8 in
                    _ = utf8.withMemoryRebound(to: CChar.self) {
                        sqlite3_bind_text(statement, index, $0.baseAddress, Int32($0.count), Self.transient)
                    }
                }
            }
            func blob(_ statement: OpaquePointer?, _ index: Int32, _ range: Range<Int>) {
                sqlite3_bind_blob(
                    statement, index, bytes.baseAddress! + range.lowerBound, Int32(range.count), Self.transient)
            }
            func step(_ statement: OpaquePointer?) {
                sqlite3_step(statement)
                sqlite3_reset(statement)
                rows += 1
            }
            for update in body.rooms {
                text(room, 1, update.roomID)
                sqlite3_bind_int64(room, 2, Int64(update.membership.rawValue))
                step(room)
                let nid = sqlite3_last_insert_rowid(connection)
                for item in update.state {
                    sqlite3_bind_int64(state, 1, nid)
                    text(state, 2, item.type)
                    text(state, 3, item.stateKey)
                    text(state, 4, item.eventID)
                    text(state, 5, item.sender)
                    sqlite3_bind_int64(state, 6, item.originServerTS)
                    blob(state, 7, item.content)
                    step(state)
                }
                guard !update.timeline.isEmpty else { continue }
                var previous: Int64?
                if update.isLimited, let prevBatch = update.previousBatch {
                    sqlite3_bind_int64(chunk, 1, nid)
                    sqlite3_bind_null(chunk, 2)
                    step(chunk)
                    previous = sqlite3_last_insert_rowid(connection)
                    sqlite3_bind_int64(gap, 1, previous!)
                    text(gap, 2, prevBatch)
                    step(gap)
                }
                sqlite3_bind_int64(chunk, 1, nid)
                if let previous { sqlite3_bind_int64(chunk, 2, previous) } else { sqlite3_bind_null(chunk, 2) }
                step(chunk)
                let chunkID = sqlite3_last_insert_rowid(connection)
                for (position, item) in update.timeline.enumerated() {
                    let isRedaction = item.type == "m.room.redaction" && item.redacts != nil
                    sqlite3_bind_int64(event, 1, nid)
                    sqlite3_bind_int64(event, 2, chunkID)
                    sqlite3_bind_int64(event, 3, Int64(position))
                    text(event, 4, item.eventID)
                    text(event, 5, item.type)
                    text(event, 6, item.sender)
                    sqlite3_bind_int64(event, 7, item.originServerTS)
                    text(event, 8, item.stateKey)
                    text(event, 9, item.transactionID)
                    blob(event, 10, item.content)
                    text(event, 11, isRedaction ? item.redacts : item.relation?.eventID)
                    text(event, 12, isRedaction ? "m.room.redaction" : item.relation?.type)
                    text(event, 13, item.relation?.key)
                    text(event, 14, item.relation?.inReplyTo)
                    step(event)
                }
                sqlite3_bind_int64(live, 1, chunkID)
                sqlite3_bind_int64(live, 2, nid)
                step(live)
            }
            text(token, 1, body.nextBatch)
            step(token)
        }
        guard sqlite3_exec(connection, "COMMIT", nil, nil, nil) == SQLITE_OK else {
            throw ChatBench.Failure(message: "plain loop: commit failed")
        }
        return rows
    }
}
