import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaKit
import SymorvaMachines

/// `symorva-bench threads [--events 10000] [--threads 500] [--runs 20]`
///
/// Fills one room with N events through the sync ingest (the roots of T threads, their
/// replies, plain messages), counts every reply as an unread notification (the heaviest case
/// for the per-thread counts), then measures reading the room's whole thread list with its
/// counts from a freshly opened store: `ChatStore.threads(roomID:ownUserID:)`, what
/// `Conversation.threads()` runs.
enum ThreadListBenchmark: StaticBenchmark {
    static let name = "threads"
    static let argumentsSynopsis = "[--events 10000] [--threads 500] [--runs 20]"
    static let summary = "one room with N events and T threads → the whole thread list with unread counts"

    static let me = "@me:bench.example"
    static let roomID = "!threads:bench.example"

    static func run(arguments: [String]) async -> Int32 {
        do throws(ChatBench.Failure) {
            let (_, values) = try ChatBench.options(arguments, known: ["events", "threads", "runs"])
            let events = try ChatBench.integer(values, "events", 10_000)
            let threads = try ChatBench.integer(values, "threads", 500)
            let runs = try ChatBench.integer(values, "runs", 20)
            guard threads > 0, events >= 2 * threads else {
                throw ChatBench.Failure(message: "need --events ≥ 2 × --threads > 0")
            }
            let folder = try ChatBench.temporaryDirectory()
            let path = folder + "/threads.sqlite"
            defer {
                ChatBench.removeDatabase(path)
                ChatBench.removeDirectory(folder)
            }
            let store = try await ColdStartBenchmark.open(path)
            do {
                _ = try await SyncIngestor(store: store).ingest(document(events: events, threads: threads))
                // Every reply notifies and nothing is read: the per-thread counts see every row.
                let candidates = try await store.pushCandidates(ownUserID: me, everyRoom: true, limit: events + 10)
                try await store.recordPushActions(
                    candidates.events.map { ($0.eventNID, false) }, evaluatedThrough: candidates.through, ownUserID: me)
            } catch {
                throw ChatBench.Failure(message: "fill failed: \(error)")
            }
            var cold: [Double] = []
            var warm: [Double] = []
            var cpu: [Double] = []
            var list: [StoredThread] = []
            for _ in 0..<runs {
                let fresh = try await ColdStartBenchmark.open(path)
                let startCPU = ChatBench.cpuTime()
                let start = ChatBench.now()
                list = (try? await fresh.threads(roomID: RoomID(roomID), ownUserID: me)) ?? []
                cold.append(ChatBench.now() - start)
                cpu.append(ChatBench.cpuTime() - startCPU)
                let again = ChatBench.now()
                _ = try? await fresh.threads(roomID: RoomID(roomID), ownUserID: me)
                warm.append(ChatBench.now() - again)
            }
            let replies = list.reduce(0) { $0 + $1.replyCount }
            let unread = list.reduce(0) { $0 + $1.unread.notifications }
            print("threads: \(events) events stored; \(list.count) threads, \(replies) replies, \(unread) unread")
            print(
                "  thread list with counts, fresh connection: median "
                    + "\(ChatBench.format(ChatBench.median(cold) * 1000, 2)) ms, max "
                    + "\(ChatBench.format((cold.max() ?? .nan) * 1000, 2)) ms, CPU median "
                    + "\(ChatBench.format(ChatBench.median(cpu) * 1000, 2)) ms (goal ≤ 20 ms); warm: median "
                    + "\(ChatBench.format(ChatBench.median(warm) * 1000, 2)) ms")
            return list.count == threads ? 0 : 1
        } catch {
            print("threads: \(error.message)")
            return 1
        }
    }

    /// One `/sync` response: the thread roots first, then the replies spread over the threads
    /// round-robin, one plain message after every 18 events.
    static func document(events: Int, threads: Int) -> [UInt8] {
        var timeline: [String] = []
        timeline.reserveCapacity(events)
        var ts: Int64 = 1_700_000_000_000
        func message(_ id: String, _ sender: String, _ extra: String) -> String {
            ts += 1
            return
                #"{"type":"m.room.message","event_id":"\#(id)","sender":"\#(sender)","origin_server_ts":\#(ts),"content":{"msgtype":"m.text","body":"message \#(id)"\#(extra)}}"#
        }
        for index in 0..<threads { timeline.append(message("$root\(index)", "@bob:bench.example", "")) }
        var reply = 0
        while timeline.count < events {
            if timeline.count % 19 == 0 {
                timeline.append(message("$plain\(timeline.count)", "@carol:bench.example", ""))
                continue
            }
            let root = "$root\(reply % threads)"
            timeline.append(
                message(
                    "$reply\(reply)", reply % 2 == 0 ? "@bob:bench.example" : "@carol:bench.example",
                    #","m.relates_to":{"rel_type":"m.thread","event_id":"\#(root)","is_falling_back":true,"m.in_reply_to":{"event_id":"\#(root)"}}"#
                ))
            reply += 1
        }
        let member =
            #"{"type":"m.room.member","event_id":"$me","sender":"\#(me)","state_key":"\#(me)","origin_server_ts":1,"content":{"membership":"join"}}"#
        // Encrypted: the list carries the device's counts (an unencrypted room shows the server's).
        let encryption =
            #"{"type":"m.room.encryption","event_id":"$enc","sender":"\#(me)","state_key":"","origin_server_ts":1,"content":{"algorithm":"m.megolm.v1.aes-sha2"}}"#
        return Array(
            #"{"next_batch":"b1","rooms":{"join":{"\#(roomID)":{"state":{"events":[\#(member),\#(encryption)]},"timeline":{"events":[\#(timeline.joined(separator: ","))],"limited":false}}}}}"#
                .utf8)
    }
}
