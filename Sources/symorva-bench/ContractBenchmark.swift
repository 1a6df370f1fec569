import Dispatch
import Foundation
import SymorvaContract
import SymorvaFFI
import SymorvaKit
import SymorvaMatrix

/// `symorva-bench contract`: the language-neutral contract's overheads.
///
/// - **C round trip**: `symorva_client_send` of a trivial request (`message.split` of a short
///   text) and `symorva_client_receive` of its answer, on a client of a signed-out community
///   (the same functions a C host calls, through the same engine), one at a time; p50 and p99.
/// - **execute**: `symorva_execute` of the same request (no client, no queue).
/// - **updates/s**: values published on an observable that a subscription forwards as updates
///   (JSON encoding, the outbox) and a receiver thread takes with `symorva`'s receive path.
struct ContractBenchmark: BenchmarkMode {
    let name = "contract"
    let argumentsSynopsis = "[--requests N] [--updates N]"
    let summary = "the contract: C round trip of a trivial request (p50), execute, updates delivered per second"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["requests", "updates"])
        let requests = options.integer("requests", default: 20_000)
        let updates = options.integer("updates", default: 200_000)
        guard options.problems.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)  (\(options.problems.joined(separator: "; ")))")
            return 2
        }
        let folder = NSTemporaryDirectory() + "symorva-bench-contract-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try Data(Self.manifest.utf8).write(to: URL(fileURLWithPath: folder + "/m.json"))
        } catch {
            print("contract: cannot write the manifest: \(error)")
            return 1
        }
        // The C functions block their caller: run them on a thread of their own, as a host would.
        let report = await onThread { Self.measure(folder: folder, requests: requests, updates: updates) }
        print(report)
        return 0
    }

    static let manifest = """
        {"version": 1, "community": {"name": "Bench"},
         "homeserver": {"url": "http://127.0.0.1:9", "serverName": "localhost"},
         "services": {"url": "http://127.0.0.1:9"},
         "modules": {"meetings": {"enabled": true}, "aiStudio": {"enabled": false},
                     "wallet": {"enabled": true, "assets": [{"code": "ORB", "precision": 2}]},
                     "directory": {"enabled": false}},
         "encryption": {"defaultEnabled": false}}
        """

    private func onThread(_ body: @escaping @Sendable () -> String) async -> String {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    private static func measure(folder: String, requests: Int, updates: Int) -> String {
        var lines: [String] = []
        let client = symorva_client_create(folder + "/m.json", folder + "/data")
        guard client > 0 else { return "contract: symorva_client_create failed (\(client))" }
        let request = #"{"id": 1, "method": "message.split", "params": {"text": "ping"}}"#
        // Warm up, then one request at a time.
        for _ in 0..<1_000 { roundTrip(client, request) }
        var samples: [Double] = []
        samples.reserveCapacity(requests)
        for _ in 0..<requests {
            let start = ContinuousClock.now
            roundTrip(client, request)
            samples.append((ContinuousClock.now - start).nanoseconds / 1_000)
        }
        samples.sort()
        lines.append(
            "contract: C round trip (send + receive, message.split), \(grouped(Double(requests))) requests: "
                + "p50 \(fixed(percentile(samples, 0.5), 1)) µs, p99 \(fixed(percentile(samples, 0.99), 1)) µs")
        // An asynchronous method: a task per request, the wallet client's own check (signed out:
        // wallet.notSignedIn, no network).
        let asynchronous = #"{"id": 2, "method": "wallet.refreshBalances"}"#
        for _ in 0..<1_000 { roundTrip(client, asynchronous) }
        var taskSamples: [Double] = []
        taskSamples.reserveCapacity(requests)
        for _ in 0..<requests {
            let start = ContinuousClock.now
            roundTrip(client, asynchronous)
            taskSamples.append((ContinuousClock.now - start).nanoseconds / 1_000)
        }
        taskSamples.sort()
        lines.append(
            "contract: C round trip of an asynchronous method (wallet.refreshBalances, signed out): "
                + "p50 \(fixed(percentile(taskSamples, 0.5), 1)) µs, p99 \(fixed(percentile(taskSamples, 0.99), 1)) µs")
        symorva_client_destroy(client)

        var executeSamples: [Double] = []
        for _ in 0..<requests {
            let start = ContinuousClock.now
            symorva_free(symorva_execute(request))
            executeSamples.append((ContinuousClock.now - start).nanoseconds / 1_000)
        }
        executeSamples.sort()
        lines.append("contract: symorva_execute, p50 \(fixed(percentile(executeSamples, 0.5), 1)) µs")
        lines.append(updateRate(updates))
        return lines.joined(separator: "\n")
    }

    private static func roundTrip(_ client: Int32, _ request: String) {
        _ = symorva_client_send(client, request)
        symorva_free(symorva_client_receive(client, 10))
    }

    /// Updates of one subscription delivered to a receiver thread, per second.
    private static func updateRate(_ count: Int) -> String {
        let publisher = ObservableValue<Int>.Publisher(0)
        var methods = ContractMethods()
        let observable = publisher.observable
        methods.subscriptions["bench.counter"] = { _ in ContractSource(observable) { JSONValue.int($0) } }
        let engine = ContractEngine(methods: methods)
        engine.send(Array(#"{"id": 1, "method": "subscribe", "params": {"path": "bench.counter"}}"#.utf8))
        _ = engine.outbox.receive(timeout: .seconds(5))
        let done = DispatchSemaphore(value: 0)
        let received = Lock(0)
        Thread.detachNewThread {
            var taken = 0
            while taken < count, engine.outbox.receive(timeout: .seconds(10)) != nil { taken += 1 }
            received.withLock { $0 = taken }
            done.signal()
        }
        let start = ContinuousClock.now
        for value in 1...count { publisher.publish(value) }
        done.wait()
        let elapsed = (ContinuousClock.now - start).seconds
        let taken = received.withLock { $0 }
        return "contract: \(grouped(Double(taken))) updates delivered in \(fixed(elapsed, 2)) s: "
            + "\(grouped(Double(taken) / elapsed)) updates/s"
    }
}
