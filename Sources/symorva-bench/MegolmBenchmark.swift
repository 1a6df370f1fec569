import CMegolmBaseline
import Foundation
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaFeatureKit
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Synchronization

/// `symorva-bench megolm [--messages N] [--rounds N] [--forms c,driver,c2,driver2,engine]`
///
/// Megolm decryption throughput. One outbound session per room encrypts `N` event plaintexts
/// (`{type, content, room_id}`, a text message of about 100 characters) before the clock runs;
/// each measurement then creates a fresh inbound session from the session key and decrypts the
/// `N` ciphertexts in index order:
///
/// - `c`: a plain C loop over libolm (`CMegolmBaseline`), one core;
/// - `driver`: the SDK's driver (``OlmCryptoDriver``, `InboundGroupSession.decrypt`), one core;
/// - `c2`, `driver2`: the same on two threads at once, one room (one inbound session) each;
/// - `engine`: the SDK's full path for one event, `CryptoEngine.decryptRoomEvent` (the content's
///   JSON, the stored session read and unpickled, the message index recorded for the replay
///   check in its own transaction, the plaintext's JSON and canonical content), on an account
///   database opened as an account's is.
///
/// The forms run interleaved in every round so that the machine's load falls on all alike.
struct MegolmBenchmark: BenchmarkMode {
    /// The mode's word on the command line.
    let name = "megolm"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--messages N] [--rounds N] [--forms c,driver,c2,driver2,engine]"
    /// What the mode measures.
    let summary = "Megolm decrypt throughput: the driver vs a plain C libolm loop, 1 and 2 threads; full path"

    static let allForms = ["c", "driver", "c2", "driver2", "engine"]

    /// Runs the benchmark; returns the process exit status.
    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: ["messages", "rounds", "forms"])
        let messages = options.integer("messages", default: 2_000)
        let rounds = options.integer("rounds", default: 5)
        let forms = options.string("forms", default: Self.allForms.joined(separator: ",")).split(separator: ",").map(
            String.init)
        let unknown = forms.filter { !Self.allForms.contains($0) }
        guard options.problems.isEmpty, unknown.isEmpty else {
            print("megolm: \((options.problems + unknown.map { "unknown form '\($0)'" }).joined(separator: "; "))")
            print("usage: symorva-bench \(name) \(argumentsSynopsis)")
            return 2
        }
        do {
            try await measure(messages: messages, rounds: rounds, forms: forms)
            return 0
        } catch {
            print("megolm: failed: \(error)")
            return 1
        }
    }

    /// One room's messages, encrypted by its outbound session.
    struct Room: Sendable {
        let roomID: String
        let sessionID: String
        let sessionKey: Secret<String>
        let ciphertexts: [String]
        /// The ciphertexts concatenated, for the C loop.
        let joined: [UInt8]
        let offsets: [Int]
        let lengths: [Int]

        init(roomID: String, messages: Int) throws {
            let driver = OlmCryptoDriver()
            let outbound = try driver.newOutboundGroupSession()
            self.roomID = roomID
            sessionID = outbound.sessionID
            sessionKey = try outbound.sessionKey()
            var ciphertexts: [String] = []
            for index in 0..<messages {
                let body = "message \(index) of the benchmark, about as long as a chat line usually is, give or take"
                let plaintext = try JSONValue.object([
                    "type": .string("m.room.message"),
                    "content": .object(["msgtype": .string("m.text"), "body": .string(body)]),
                    "room_id": .string(roomID),
                ]).canonicalEncoding()
                ciphertexts.append(try outbound.encrypt(Secret(plaintext)))
            }
            self.ciphertexts = ciphertexts
            var joined: [UInt8] = []
            var offsets: [Int] = []
            for ciphertext in ciphertexts {
                offsets.append(joined.count)
                joined += Array(ciphertext.utf8)
            }
            self.joined = joined
            self.offsets = offsets
            lengths = ciphertexts.map(\.utf8.count)
        }

        /// The C loop over this room's messages; the checksum.
        func decryptWithC() throws -> Int {
            var checksum: UInt64 = 0
            let key = Array(sessionKey.exposedValue.utf8)
            let done = megolm_baseline_decrypt(key, key.count, joined, offsets, lengths, ciphertexts.count, &checksum)
            guard done == ciphertexts.count else { throw BenchFailure("the C loop decrypted \(done) messages") }
            return Int(truncatingIfNeeded: checksum)
        }

        /// The driver over this room's messages; the checksum.
        func decryptWithDriver() throws -> Int {
            let session = try OlmCryptoDriver().inboundGroupSession(sessionKey: sessionKey)
            var checksum = 0
            for ciphertext in ciphertexts {
                let decrypted = try session.decrypt(ciphertext)
                checksum &+= decrypted.plaintext.exposedValue.count &+ decrypted.messageIndex
                checksum &+= Int(decrypted.plaintext.exposedValue.first ?? 0)
            }
            return checksum
        }
    }

    private func measure(messages: Int, rounds: Int, forms: [String]) async throws {
        let rooms = try [
            Room(roomID: "!bench-a:localhost", messages: messages),
            Room(roomID: "!bench-b:localhost", messages: messages),
        ]
        let sink = Sink()
        // A first pass of each, to check both agree and to warm caches.
        let c = try rooms[0].decryptWithC()
        let d = try rooms[0].decryptWithDriver()
        guard c == d else { throw BenchFailure("the C loop and the driver disagree (\(c) vs \(d))") }
        let folder = try ChatBench.temporaryDirectory()
        defer { ChatBench.removeDirectory(folder) }

        print(
            "megolm: \(messages) messages per room (ciphertext \(rooms[0].lengths.min() ?? 0)–\(rooms[0].lengths.max() ?? 0) bytes), "
                + "\(rounds) rounds, forms interleaved; load average \(Self.loadAverage())")
        var rates: [String: [Double]] = [:]
        var cpuRates: [String: [Double]] = [:]
        for round in 0..<rounds {
            for form in forms {
                let rate: (Double, Double)
                switch form {
                case "c":
                    rate = try Self.single(rooms[0], sink: sink) { try $0.decryptWithC() }
                case "driver":
                    rate = try Self.single(rooms[0], sink: sink) { try $0.decryptWithDriver() }
                case "c2":
                    rate = try Self.parallel(rooms, sink: sink) { try $0.decryptWithC() }
                case "driver2":
                    rate = try Self.parallel(rooms, sink: sink) { try $0.decryptWithDriver() }
                default:
                    rate = (
                        try await Self.engine(rooms[0], database: folder + "/engine-\(round).sqlite", sink: sink), .nan
                    )
                }
                rates[form, default: []].append(rate.0)
                cpuRates[form, default: []].append(rate.1)
            }
        }

        print(
            "  form                                   messages/s median [min–max]   per CPU-second (threads' CPU time)")
        let labels = [
            "c": "C loop over libolm, 1 thread", "driver": "driver (OlmCryptoDriver), 1 thread",
            "c2": "C loop, 2 threads (2 rooms)", "driver2": "driver, 2 threads (2 rooms)",
            "engine": "full path (decryptRoomEvent), 1 room",
        ]
        for form in forms {
            let values = Repeated(values: rates[form] ?? [])
            let cpu = Repeated(values: cpuRates[form] ?? [])
            print(
                "  \(padded(labels[form] ?? form, 38, right: true)) \(padded(grouped(values.median), 10)) "
                    + "[\(grouped(values.min))–\(grouped(values.max))]"
                    + (cpu.median.isNaN ? "" : "   \(grouped(cpu.median)) [\(grouped(cpu.min))–\(grouped(cpu.max))]"))
        }
        func ratio(_ top: String, _ bottom: String, in rates: [String: [Double]] = rates) -> String? {
            guard let top = rates[top], let bottom = rates[bottom], top.count == bottom.count else { return nil }
            let ratios = Repeated(values: zip(top, bottom).map { $0 / $1 })
            return "\(fixed(ratios.median, 3)) [\(fixed(ratios.min, 3))–\(fixed(ratios.max, 3))] (per round)"
        }
        if let value = ratio("driver", "c") { print("  driver / C loop, 1 thread:  \(value)  goal ≥ 0.80") }
        if let value = ratio("driver2", "driver") { print("  driver, 2 threads / 1:      \(value)  goal ≥ 1.6") }
        if let value = ratio("c2", "c") { print("  C loop, 2 threads / 1:      \(value)  (what the machine gives)") }
        if let value = ratio("driver2", "c2") { print("  driver / C loop, 2 threads: \(value)") }
        if let value = ratio("engine", "driver") { print("  full path / driver:         \(value)") }
        if let value = ratio("driver2", "driver", in: cpuRates) {
            print("  driver, per CPU-second, 2 threads / 1: \(value)  (1.0: the threads do not slow each other)")
        }
        if let value = ratio("c2", "c", in: cpuRates) { print("  C loop, per CPU-second, 2 threads / 1: \(value)") }
        print("  load average afterwards \(Self.loadAverage()); checksum \(sink.checksum)")
        // The last account database closes on its own thread once released; exiting while it
        // does crashes the process, so it gets a moment.
        try? await Task.sleep(for: .milliseconds(500))
    }

    /// The calling thread's CPU time, in seconds.
    static func threadCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
    }

    /// Messages per second of `body` over one room on this thread, wall clock and per second
    /// of the thread's CPU time.
    static func single(_ room: Room, sink: Sink, _ body: (Room) throws -> Int) throws -> (Double, Double) {
        let cpu = threadCPU()
        let start = ContinuousClock.now
        sink.consume(try body(room))
        let elapsed = (ContinuousClock.now - start).seconds
        let count = Double(room.ciphertexts.count)
        return (count / elapsed, count / (threadCPU() - cpu))
    }

    /// Messages per second of `body` over every room, one thread per room, all started together.
    static func parallel(_ rooms: [Room], sink: Sink, _ body: @escaping @Sendable (Room) throws -> Int) throws
        -> (Double, Double)
    {
        let failed = Atomic<Bool>(false)
        let cpuNanoseconds = Atomic<Int>(0)
        let group = DispatchGroup()
        let start = ContinuousClock.now
        for room in rooms {
            group.enter()
            let thread = Thread {
                let cpu = threadCPU()
                do { sink.consume(try body(room)) } catch { failed.store(true, ordering: .relaxed) }
                cpuNanoseconds.wrappingAdd(Int((threadCPU() - cpu) * 1e9), ordering: .relaxed)
                group.leave()
            }
            thread.start()
        }
        group.wait()
        let elapsed = (ContinuousClock.now - start).seconds
        guard !failed.load(ordering: .relaxed) else { throw BenchFailure("a thread failed to decrypt") }
        let count = Double(rooms.reduce(0) { $0 + $1.ciphertexts.count })
        return (count / elapsed, count / (Double(cpuNanoseconds.load(ordering: .relaxed)) * 1e-9))
    }

    /// Messages per second through `CryptoEngine.decryptRoomEvent` on a fresh account database
    /// that holds the room's inbound session (stored as a received `m.room_key`'s is).
    static func engine(_ room: Room, database path: String, sink: Sink) async throws -> Double {
        defer { ChatBench.removeDatabase(path) }
        let database = try await AccountDatabase.openFile(path: path, migrations: .standard)
        let user = UserID("@bench:localhost")
        let sender = UserID("@sender:localhost")
        let store = try await CryptoStore.migrating(on: database, userID: user, key: try SecretBox.generateKey())
        let engine = CryptoEngine(driver: OlmCryptoDriver(), store: store, userID: user, deviceID: "BENCH")
        _ = try await engine.load()
        // The room key as a received `m.room_key` leaves it: pickled with the account's pickle key.
        guard let account = try await store.loadAccount() else { throw BenchFailure("no stored account") }
        let inbound = try OlmCryptoDriver().inboundGroupSession(sessionKey: room.sessionKey)
        try await store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: room.roomID, sessionID: room.sessionID, senderKey: "sender-curve25519",
                signingKey: "sender-ed25519", forwarded: false, pickle: try inbound.pickle(key: account.pickleKey),
                senderUser: sender))
        let contents = room.ciphertexts.map { ciphertext in
            (try? JSONValue.object([
                "algorithm": .string("m.megolm.v1.aes-sha2"), "ciphertext": .string(ciphertext),
                "device_id": .string("SENDER"), "sender_key": .string("sender-curve25519"),
                "session_id": .string(room.sessionID),
            ]).canonicalEncoding()) ?? []
        }
        let start = ContinuousClock.now
        for (index, content) in contents.enumerated() {
            guard
                case .success(let event)? = try await engine.decryptRoomEvent(
                    roomID: room.roomID, eventID: "$bench-\(index)", sender: sender, content: content)
            else { throw BenchFailure("the engine did not decrypt message \(index)") }
            sink.consume(event.content.count)
        }
        return Double(contents.count) / (ContinuousClock.now - start).seconds
    }

    static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "n/a" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }
}
