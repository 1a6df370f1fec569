import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaE2EE
import SymorvaEncryptionBridge
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaKit
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting

/// `symorva-bench ingest FILE --encrypted [--runs N]`: the initial sync of `FILE` with its
/// rooms encrypted, through the shipping path, beside the same sync in plaintext.
///
/// Before the clock runs, every joined room of the response becomes an encrypted room (an
/// `m.room.encryption` state event where it has none) and each of its timeline events that is
/// not state and not a redaction becomes `m.room.encrypted` — its `{type, content, room_id}`
/// encrypted with one outbound Megolm session per room (the SDK's driver) — and each room's
/// session is stored in the receiving account as a received `m.room_key`'s is (the keys are
/// there before the sync: their Olm to-device delivery is not in the figure).
///
/// Each run, on a fresh account database: an ``AccountCrypto`` (started offline: the account
/// loads, its key upload waits for a homeserver that is not there) and an ``AccountChat`` whose
/// decryptor is the crypto module's, as the standard modules wire them; then, timed: the
/// ingest (`SyncIngestor`, decode then write) and the conversation list, then chat's
/// `decryptPending()` — what runs after every committed sync: the newest 500 undecrypted events,
/// each decrypted (`AccountCrypto.decrypt`: session read and unpickled, replay record, JSON),
/// sealed and stored, the list reloaded — and then further passes until no event is left
/// (what later syncs and key arrivals would do).
enum EncryptedIngest {
    /// The encrypted document and each room's session key.
    struct Prepared {
        var document: [UInt8]
        var sessions: [(roomID: String, sessionID: String, key: Secret<String>)]
        var encryptedEvents: Int
    }

    /// `document` with its joined rooms encrypted.
    static func prepare(_ document: [UInt8]) throws(ChatBench.Failure) -> Prepared {
        guard case .object(var top)? = try? JSONValue(parsing: document),
            case .object(var rooms)? = top["rooms"], case .object(var joined)? = rooms["join"]
        else { throw ChatBench.Failure(message: "the file is not a /sync response with joined rooms") }
        let driver = OlmCryptoDriver()
        var sessions: [(roomID: String, sessionID: String, key: Secret<String>)] = []
        var count = 0
        do {
            for (roomID, value) in joined {
                guard case .object(var room) = value else { continue }
                let outbound = try driver.newOutboundGroupSession()
                sessions.append((roomID, outbound.sessionID, try outbound.sessionKey()))
                if case .object(var state)? = room["state"], case .array(var events)? = state["events"] {
                    let hasEncryption = events.contains {
                        if case .object(let event) = $0 { return event["type"] == .string("m.room.encryption") }
                        return false
                    }
                    if !hasEncryption {
                        events.append(
                            .object([
                                "type": .string("m.room.encryption"), "state_key": .string(""),
                                "sender": .string(SyncResponseGenerator.ownUserID),
                                "event_id": .string("$encryption-\(roomID)"), "origin_server_ts": .number(1),
                                "content": .object(["algorithm": .string("m.megolm.v1.aes-sha2")]),
                            ]))
                        state["events"] = .array(events)
                        room["state"] = .object(state)
                    }
                }
                if case .object(var timeline)? = room["timeline"], case .array(let events)? = timeline["events"] {
                    var encrypted: [JSONValue] = []
                    for value in events {
                        guard case .object(var event) = value, event["state_key"] == nil,
                            case .string(let type)? = event["type"], type != "m.room.redaction"
                        else {
                            encrypted.append(value)
                            continue
                        }
                        // The generator's fake ciphertexts become a real message.
                        let content =
                            type == "m.room.encrypted"
                            ? JSONValue.object(["msgtype": .string("m.text"), "body": .string("a message")])
                            : event["content"] ?? .object([:])
                        let plainType = type == "m.room.encrypted" ? "m.room.message" : type
                        let plaintext = try JSONValue.object([
                            "type": .string(plainType), "content": content, "room_id": .string(roomID),
                        ]).canonicalEncoding()
                        var encryptedContent: [String: JSONValue] = [
                            "algorithm": .string("m.megolm.v1.aes-sha2"),
                            "ciphertext": .string(try outbound.encrypt(Secret(plaintext))),
                            "device_id": .string("SENDERDEVICE"), "sender_key": .string("sender-curve25519"),
                            "session_id": .string(outbound.sessionID),
                        ]
                        // Relations stay in the clear, as Matrix clients send them.
                        if case .object(let inner) = content, let relation = inner["m.relates_to"] {
                            encryptedContent["m.relates_to"] = relation
                        }
                        event["type"] = .string("m.room.encrypted")
                        event["content"] = .object(encryptedContent)
                        encrypted.append(.object(event))
                        count += 1
                    }
                    timeline["events"] = .array(encrypted)
                    room["timeline"] = .object(timeline)
                }
                joined[roomID] = .object(room)
            }
            rooms["join"] = .object(joined)
            top["rooms"] = .object(rooms)
            var document: [UInt8] = []
            document.reserveCapacity(document.count * 2)
            writeJSON(.object(top), to: &document)
            return Prepared(document: document, sessions: sessions, encryptedEvents: count)
        } catch {
            throw ChatBench.Failure(message: "encrypting the response failed: \(error)")
        }
    }

    /// Writes `value` as JSON (the response has non-integer numbers, which the canonical
    /// encoding refuses).
    static func writeJSON(_ value: JSONValue, to output: inout [UInt8]) {
        switch value {
        case .null: output += Array("null".utf8)
        case .bool(let flag): output += Array((flag ? "true" : "false").utf8)
        case .number(let number):
            if number.rounded() == number, abs(number) < 9e15 {
                output += Array(String(Int(number)).utf8)
            } else {
                output += Array("\(number)".utf8)
            }
        case .string(let text):
            output.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "\""): output += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
                case UInt8(ascii: "\\"): output += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                case 0..<0x20:
                    let hex = Array("0123456789abcdef".utf8)
                    output += Array("\\u00".utf8) + [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                default: output.append(byte)
                }
            }
            output.append(UInt8(ascii: "\""))
        case .array(let values):
            output.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeJSON(element, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let members):
            output.append(UInt8(ascii: "{"))
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { output.append(UInt8(ascii: ",")) }
                writeJSON(.string(key), to: &output)
                output.append(UInt8(ascii: ":"))
                writeJSON(members[key]!, to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// One run's figures.
    struct Figures {
        var ingest: Double
        var firstPass: Double
        var firstPassDecrypted: Int
        var all: Double
        var passes: Int
        var left: Int
        var cpu: Double
        /// Each pass's time, in order.
        var passTimes: [Double]
        /// Two queries every pass runs, timed once after the last pass: chat's query for
        /// undecrypted events (which walks every stored encrypted event newest first) and the
        /// conversation list (the pass reloads it).
        var undecryptedQuery: Double
        var conversationList: Double
    }

    /// Ingests `prepared` into a fresh account database at `path` and decrypts as chat does.
    static func run(_ prepared: Prepared, path: String) async throws(ChatBench.Failure) -> Figures {
        defer { ChatBench.removeDatabase(path) }
        do {
            let database = try await AccountDatabase.openFile(path: path, migrations: .standard)
            guard let userID = UserID(SyncResponseGenerator.ownUserID) else { throw BenchFailure("bad user ID") }
            let secretsKey = try SecretBox.generateKey()
            let scope = AccountScope(label: userID.rawValue)
            defer { scope.end(reason: .shutdown) }
            let requester = OfflineRequester(userID: userID)
            let crypto = try await AccountCrypto(
                userID: userID, deviceID: DeviceID("BENCHDEVICE"), database: database, secretsKey: secretsKey,
                requester: requester, scope: scope, clock: SystemClock(), wallClock: SystemWallClock(),
                tracer: Tracer(), logCenter: LogCenter(threshold: .error),
                // The generated senders' devices are made up (their keys exist only in the stored
                // sessions; no keys/query can list them, offline), so the default strict policy
                // would refuse every event `senderNotCrossSigned` and time the refusal. The bench
                // times decryption: the policy that shows an unknown sender's message. The strict
                // check itself is one comparison per event.
                roomKeyPolicy: .crossSignedWhenAvailable)
            await crypto.start()
            _ = try await crypto.state.wait(timeout: .seconds(30)) { state in
                if case .idle = state { return false }
                if case .loading = state { return false }
                return true
            }
            // The room keys, as received `m.room_key`s leave them: pickled with the account's key.
            let keys = try await CryptoStore.open(on: database, userID: userID, key: secretsKey)
            guard let account = try await keys.loadAccount() else { throw BenchFailure("no stored account") }
            let driver = OlmCryptoDriver()
            for session in prepared.sessions {
                let inbound = try driver.inboundGroupSession(sessionKey: session.key)
                try await keys.saveInboundSession(
                    CryptoStore.InboundSessionRow(
                        roomID: session.roomID, sessionID: session.sessionID, senderKey: "sender-curve25519",
                        signingKey: "sender-ed25519", forwarded: false,
                        pickle: try inbound.pickle(key: account.pickleKey)))
            }
            let chat = AccountChat(requester: requester, database: database, scope: scope, tracer: Tracer())
            chat.setDecryptor(CryptoRoomDecryptor(crypto: crypto))
            let store = ChatStore(database: database)
            // setDecryptor's own first pass finds nothing; let it end before the clock runs.
            try await Task.sleep(for: .milliseconds(200))

            var firstPassDecrypted = 0
            let startCPU = ChatBench.cpuTime()
            let start = ChatBench.now()
            _ = try await SyncIngestor(store: store).ingest(prepared.document)
            _ = try await store.loadConversationList()
            let ingested = ChatBench.now()
            let before = try await store.undecryptedEvents(limit: Int.max).count
            // Passes of chat's decryption, each timed; the counts between them are not.
            var passTimes: [Double] = []
            var left = before
            while left > 0 {
                let passStart = ChatBench.now()
                await chat.decryptPending(continuing: false)
                passTimes.append(ChatBench.now() - passStart)
                let now = try await store.undecryptedEvents(limit: Int.max).count
                if passTimes.count == 1 { firstPassDecrypted = left - now }
                if now == left { break }  // nothing more can be decrypted
                left = now
            }
            let cpu = ChatBench.cpuTime() - startCPU
            let queryStart = ChatBench.now()
            _ = try await store.undecryptedEvents(limit: 500)
            let listStart = ChatBench.now()
            _ = try await store.loadConversationList()
            let listEnd = ChatBench.now()
            return Figures(
                ingest: ingested - start, firstPass: passTimes.first ?? 0, firstPassDecrypted: firstPassDecrypted,
                all: passTimes.reduce(0, +), passes: passTimes.count, left: left, cpu: cpu, passTimes: passTimes,
                undecryptedQuery: listStart - queryStart, conversationList: listEnd - listStart)
        } catch let failure as ChatBench.Failure {
            throw failure
        } catch {
            throw ChatBench.Failure(message: "encrypted ingest failed: \(error)")
        }
    }

    /// Both figures, `runs` times, plaintext and encrypted alternated.
    static func measure(_ document: [UInt8], runs: Int, folder: String) async throws(ChatBench.Failure) {
        let prepareStart = ChatBench.now()
        let prepared = try prepare(document)
        print(
            "encrypted: \(prepared.sessions.count) rooms, \(prepared.encryptedEvents) timeline events encrypted, "
                + "\(ChatBench.megabytes(prepared.document.count)) (prepared in "
                + "\(ChatBench.format(ChatBench.now() - prepareStart)) s, not timed); load average "
                + MegolmBenchmark.loadAverage())
        var plain: [Double] = []
        var figures: [Figures] = []
        for round in 0..<runs {
            let database = folder + "/plain-\(round).sqlite"
            let store = try await ColdStartBenchmark.open(database)
            let start = ChatBench.now()
            do {
                _ = try await SyncIngestor(store: store).ingest(document)
                _ = try await store.loadConversationList()
            } catch {
                throw ChatBench.Failure(message: "ingest failed: \(error)")
            }
            plain.append(ChatBench.now() - start)
            ChatBench.removeDatabase(database)
            figures.append(try await run(prepared, path: folder + "/encrypted-\(round).sqlite"))
            let last = figures[figures.count - 1]
            print(
                "  run \(round + 1): plaintext ingest \(ChatBench.format(plain[round])) s; encrypted ingest "
                    + "\(ChatBench.format(last.ingest)) s, first decrypt pass \(ChatBench.format(last.firstPass)) s "
                    + "(\(last.firstPassDecrypted) events), all \(ChatBench.format(last.all)) s in \(last.passes) passes "
                    + "(\(last.left) left), CPU \(ChatBench.format(last.cpu)) s (with the counts between passes)")
            let passes = last.passTimes
            print(
                "    passes: first \(ChatBench.format(passes.first ?? 0)) s, middle "
                    + "\(ChatBench.format(passes.isEmpty ? 0 : passes[passes.count / 2])) s, last full "
                    + "\(ChatBench.format(passes.count > 1 ? passes[passes.count - 2] : 0)) s; after them the "
                    + "undecrypted-events query \(ChatBench.format(last.undecryptedQuery)) s and the conversation "
                    + "list \(ChatBench.format(last.conversationList)) s")
        }
        func line(_ label: String, _ values: [Double]) {
            let repeated = Repeated(values: values)
            print(
                "  \(padded(label, 58, right: true)) median \(ChatBench.format(repeated.median)) s "
                    + "[\(ChatBench.format(repeated.min))–\(ChatBench.format(repeated.max))]")
        }
        line("plaintext: ingest + conversation list", plain)
        line("encrypted: ingest + conversation list (rows still encrypted)", figures.map(\.ingest))
        line("encrypted: + first decryptPending pass (what a sync runs)", figures.map { $0.ingest + $0.firstPass })
        line("encrypted: first pass alone", figures.map(\.firstPass))
        line("encrypted: every event decrypted (passes until none left)", figures.map(\.all))
        let perEvent = figures.map { $0.all / Double(max(1, prepared.encryptedEvents - $0.left)) * 1e6 }
        print(
            "  decryption per event (all passes): median \(ChatBench.format(Repeated(values: perEvent).median, 1)) µs")
        print("  load average afterwards \(MegolmBenchmark.loadAverage())")
    }
}

/// A requester for an account whose homeserver is not there: every request fails as a
/// connection failure (the crypto machine backs off; nothing else is sent during the ingest).
struct OfflineRequester: MatrixRequester {
    let homeserverURL = HomeserverURL("http://127.0.0.1:9")!
    let userID: UserID

    func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse {
        throw .transport(.connectFailed)
    }
}
