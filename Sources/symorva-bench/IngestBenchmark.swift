import Foundation
import SymorvaChatStore
import SymorvaKit

/// `symorva-bench ingest FILE [--runs N] [--no-json] [--encrypted]`
///
/// Ingests any `/sync` JSON file into a fresh account database (opened as an account's is, by
/// `AccountDatabase.openFile`) the way the sync loop does — decode, then write in one
/// transaction — and prints the time from bytes in memory to committed rows and a computed
/// conversation list, the peak memory (`VmHWM`) and
/// the RSS growth, and beside them the time and peak memory of `JSONSerialization` parsing the
/// same file (measured last, after resetting the peak, so it does not inflate ours).
///
/// With `--encrypted`, the same response with its rooms encrypted goes through chat's and the
/// crypto module's decryption beside the plaintext ingest (``EncryptedIngest``).
enum IngestBenchmark: StaticBenchmark {
    static let name = "ingest"
    static let argumentsSynopsis = "FILE [--runs N] [--no-json] [--encrypted]"
    static let summary = "/sync file → committed rows → conversation list; peak memory; JSONSerialization beside"

    static func run(arguments: [String]) async -> Int32 {
        do {
            return try await measure(arguments)
        } catch {
            print("ingest: \(error.message)\nusage: symorva-bench \(name) \(argumentsSynopsis)")
            return 2
        }
    }

    private static func measure(_ arguments: [String]) async throws(ChatBench.Failure) -> Int32 {
        let (positional, values) = try ChatBench.options(
            arguments, known: ["runs"], flags: ["no-json", "encrypted"])
        guard let path = positional.first else { throw ChatBench.Failure(message: "missing FILE") }
        let runs = try ChatBench.integer(values, "runs", 3)
        let baseline = ChatBench.processStatus("VmRSS")
        let document = try ChatBench.readFile(path)
        let folder = try ChatBench.temporaryDirectory()
        defer { ChatBench.removeDirectory(folder) }
        print("file: \(path) (\(ChatBench.megabytes(document.count)))")
        if values["encrypted"] != nil {
            try await EncryptedIngest.measure(document, runs: runs, folder: folder)
            return 0
        }

        let beforeIngest = ChatBench.processStatus("VmRSS")
        ChatBench.resetPeakMemory()
        var times: [Double] = []
        var report = SyncIngestReport()
        var conversations = 0
        var checkpoints: [Double] = []
        var cpu: [Double] = []
        for run in 0..<runs {
            let database = folder + "/chat-\(run).sqlite"
            let store = try await ColdStartBenchmark.open(database)
            let ingestor = SyncIngestor(store: store)
            let startCPU = ChatBench.cpuTime()
            let start = ChatBench.now()
            do {
                report = try await ingestor.ingest(document)
                conversations = try await store.loadConversationList().count
            } catch {
                throw ChatBench.Failure(message: "ingest failed: \(error)")
            }
            times.append(ChatBench.now() - start)
            cpu.append(ChatBench.cpuTime() - startCPU)
            let checkpointStart = ChatBench.now()
            try? await store.checkpoint()
            checkpoints.append(ChatBench.now() - checkpointStart)
            ChatBench.removeDatabase(database)
        }
        print(
            "ingest, decode then write: median \(ChatBench.format(ChatBench.median(times))) s wall, "
                + "\(ChatBench.format(ChatBench.median(cpu))) s CPU (all threads)  "
                + "(runs: \(times.map { ChatBench.format($0) }.joined(separator: ", ")))")
        print(
            "  wrote \(report.rooms) rooms, \(report.timelineEvents) timeline events, \(report.stateEvents) state "
                + "events, \(report.gapsCreated) gaps, \(report.redactionsApplied) redactions; "
                + "conversation list: \(conversations) rooms; WAL checkpoint afterwards (off the path): median "
                + "\(ChatBench.format(ChatBench.median(checkpoints))) s")
        let peak = ChatBench.processStatus("VmHWM")
        let afterIngest = ChatBench.processStatus("VmRSS")
        print(
            "memory: peak (VmHWM) \(ChatBench.megabytes(peak)) = \(ChatBench.format(Double(peak) / Double(document.count), 2))× "
                + "the response; RSS before reading the file \(ChatBench.megabytes(baseline)), "
                + "with the file \(ChatBench.megabytes(beforeIngest)), after ingest \(ChatBench.megabytes(afterIngest)) "
                + "(delta during ingest \(ChatBench.megabytes(peak - beforeIngest)))")

        // Our decoder alone, for the breakdown (after the memory figures, which it would inflate).
        var decodeTimes: [Double] = []
        for _ in 0..<runs {
            let start = ChatBench.now()
            let body = try? SyncResponseDecoder.decode(document)
            decodeTimes.append(ChatBench.now() - start)
            guard let body else { throw ChatBench.Failure(message: "the file is not a /sync response") }
            if decodeTimes.count == 1 && runs > 0 {
                let events = body.rooms.reduce(0) { $0 + $1.timeline.count + $1.state.count }
                print(
                    "content: \(body.rooms.count) rooms, \(events) events (timeline + state), "
                        + "\(body.malformedEvents.count) malformed")
            }
        }
        print("decode only (SyncResponseDecoder): median \(ChatBench.format(ChatBench.median(decodeTimes))) s")

        if values["no-json"] != nil { return 0 }
        ChatBench.resetPeakMemory()
        let before = ChatBench.processStatus("VmRSS")
        let start = ChatBench.now()
        let parsed = try? JSONSerialization.jsonObject(with: Data(document))
        let parseTime = ChatBench.now() - start
        let parsePeak = ChatBench.processStatus("VmHWM")
        print(
            "JSONSerialization parse of the same file: \(ChatBench.format(parseTime)) s, peak "
                + "\(ChatBench.megabytes(parsePeak)) (delta \(ChatBench.megabytes(parsePeak - before)), "
                + "\(parsed == nil ? "failed" : "ok"))")
        return 0
    }
}
