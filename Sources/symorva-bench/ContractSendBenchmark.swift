import Foundation
import SymorvaKit

/// `symorva-bench contract-send --manifest PATH`: the Swift side of "the Python client's overhead
/// over the Swift API": a new account on the manifest's (running) homeserver, a room, and
/// `--messages` sends through `Conversation.send` one after the other, timed until the last call
/// returns (each returns once the message is queued and persisted, as through the contract).
/// `clients/python/bench_send.py` times the same through the Python client.
struct ContractSendBenchmark: BenchmarkMode {
    let name = "contract-send"
    let argumentsSynopsis = "--manifest PATH [--messages N]"
    let summary = "1,000 sends through the Swift API (the baseline of the Python client's overhead)"

    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["manifest", "messages"])
        let messages = options.integer("messages", default: 1_000)
        let manifest = options.string("manifest", default: "")
        guard options.problems.isEmpty, !manifest.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)")
            return 2
        }
        let folder = NSTemporaryDirectory() + "symorva-bench-send-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        do {
            let community = SymorvaCommunity(
                configuration: try .load(from: URL(fileURLWithPath: manifest)),
                environment: SymorvaEnvironment(dataDirectory: folder, logCenter: LogCenter(threshold: .error)))
            await community.launch()
            let name = "bs" + UUID().uuidString.prefix(8).lowercased()
            _ = try await community.session.register(username: name, password: Secret(UUID().uuidString))
            let roomID = try await community.chat.createRoom(name: "Bench")
            let conversation = try await community.chat.conversation(id: roomID)
            let start = ContinuousClock.now
            for index in 0..<messages { _ = try await conversation.send(.text("message \(index)")) }
            let elapsed = ContinuousClock.now - start
            print(
                "contract-send: Swift API, \(messages) sends: \(fixed(elapsed.seconds * 1000, 1)) ms, "
                    + "\(fixed(elapsed.nanoseconds / 1000 / Double(messages), 1)) µs per message")
            await community.shutdown()
            return 0
        } catch {
            print("contract-send: \(error)")
            return 1
        }
    }
}
