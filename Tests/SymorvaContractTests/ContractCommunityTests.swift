import Foundation
import SymorvaContract
import SymorvaKit
import SymorvaMatrix
import SymorvaTesting
import Testing

/// The contract bound to a real community, signed out, with an unreachable transport: every
/// method and path is there, answers with the Swift API's typed errors, and nothing secret is
/// logged.
@Suite("Contract community binding, signed out")
struct ContractCommunityTests {
    static let manifest = """
        {
          "version": 1,
          "community": {"name": "Orbit"},
          "homeserver": {"url": "http://127.0.0.1:9", "serverName": "localhost"},
          "services": {"url": "http://127.0.0.1:9"},
          "modules": {
            "meetings": {"enabled": true},
            "aiStudio": {"enabled": false},
            "wallet": {"enabled": true, "assets": [{"code": "ORB", "precision": 2}]},
            "directory": {"enabled": false}
          },
          "encryption": {"defaultEnabled": false}
        }
        """

    func withEngine(_ body: (ContractEngine, CapturingLogSink) async throws -> Void) async throws {
        let folder = NSTemporaryDirectory() + "symorva-contract-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifest = URL(fileURLWithPath: folder + "/symorva.config.json")
        try Data(Self.manifest.utf8).write(to: manifest)
        let sink = CapturingLogSink()
        let logCenter = LogCenter(threshold: .trace, sinks: [sink])
        let community = SymorvaCommunity(
            configuration: try .load(from: manifest),
            environment: SymorvaEnvironment(
                dataDirectory: folder + "/data", transport: ScriptedHTTPTransport.unreachable(), clock: ManualClock(),
                tracer: Tracer(), logCenter: logCenter))
        await community.launch()
        let binding = ContractCommunity(community: community)
        let logger = Logger(category: "contract", center: logCenter)
        let engine = binding.makeEngine { level, line in logger.log(level, "\(LogLabel(line))") }
        try await body(engine, sink)
        await binding.close()
    }

    func call(_ engine: ContractEngine, _ text: String) async throws -> JSONValue {
        engine.send(Array(text.utf8))
        return try JSONValue(
            parsing: try await ContractEngineTests.receive(from: engine.outbox, within: TestWaiting.defaultTimeout))
    }

    @Test("Signed out: the Swift API's typed errors, by domain and case name")
    func signedOutErrors() async throws {
        try await withEngine { engine, _ in
            let chat = try await call(
                engine, #"{"id": 1, "method": "chat.conversation", "params": {"roomID": "!r:localhost"}}"#)
            #expect(chat["error"]?["domain"] == "chat")
            #expect(chat["error"]?["code"] == "notSignedIn")
            let wallet = try await call(engine, #"{"id": 2, "method": "wallet.refreshBalances"}"#)
            #expect(wallet["error"]?["domain"] == "wallet")
            #expect(wallet["error"]?["code"] == "notSignedIn")
            let studio = try await call(
                engine,
                #"{"id": 3, "method": "studio.requestGrant", "params": {"roomID": "!r:localhost", "scope": {"kind": "conversation", "since": "$e"}}}"#
            )
            #expect(studio["error"]?["code"] == "moduleDisabled")
            let meetings = try await call(
                engine, #"{"id": 4, "method": "meetings.join", "params": {"roomID": "!r:localhost"}}"#)
            #expect(meetings["error"]?["domain"] == "meetings")
            #expect(meetings["error"]?["code"] == "notSignedIn")
            let amount = try await call(
                engine,
                #"{"id": 5, "method": "wallet.prepareTransfer", "params": {"recipient": "@bob:localhost", "asset": "ORB", "amount": "1.234"}}"#
            )
            #expect(amount["error"]?["domain"] == "amount")
            #expect(amount["error"]?["code"] == "tooManyDecimals")
            let foreign = try await call(
                engine, #"{"id": 6, "method": "draft.confirm", "params": {"draft": "draft-1", "pin": "1234"}}"#)
            #expect(foreign["error"]?["code"] == "invalidHandle")
        }
    }

    @Test(
        "Signed out: room management, devices, encryption, attachments and verification answer typed errors; wrong parameters first"
    )
    func managementSignedOut() async throws {
        try await withEngine { engine, sink in
            let cases: [(request: String, domain: String, code: String, parameter: String?)] = [
                (#""chat.setRoomName", "params": {"roomID": "!r:localhost", "name": "n"}"#, "chat", "notSignedIn", nil),
                (
                    #""chat.setHistoryVisibility", "params": {"roomID": "!r:localhost", "visibility": "everyone"}"#,
                    "contract", "invalidParams", "visibility"
                ),
                (
                    #""chat.setPowerLevel", "params": {"roomID": "!r:localhost", "userID": "@b:localhost", "level": "high"}"#,
                    "contract", "invalidParams", "level"
                ),
                (#""chat.knock", "params": {"roomIDOrAlias": "!r:localhost"}"#, "chat", "notSignedIn", nil),
                (#""chat.ignore", "params": {"userID": "bob"}"#, "contract", "invalidParams", "userID"),
                (#""session.devices""#, "session", "notSignedIn", nil),
                (#""session.removeDevice", "params": {"deviceID": "D"}"#, "contract", "invalidParams", "password"),
                (#""encryption.identityState""#, "encryption", "notReady", nil),
                (#""encryption.backup.status""#, "encryption", "notReady", nil),
                (
                    #""encryption.backup.enable", "params": {"privateKey": "***"}"#, "contract", "invalidParams",
                    "privateKey"
                ),
                (
                    #""encryption.recovery.restore", "params": {"recoveryKey": "canary-recovery-key-5d1e"}"#,
                    "encryption", "notReady", nil
                ),
                (#""subscribe", "params": {"path": "encryption.identity"}"#, "encryption", "notReady", nil),
                (
                    #""chat.conversation.sendAttachment", "params": {"conversation": "conversation-99", "path": "/a"}"#,
                    "contract", "invalidHandle", "conversation"
                ),
                (
                    #""chat.conversation.download", "params": {"conversation": "conversation-99", "eventID": "$e"}"#,
                    "contract", "invalidHandle", "conversation"
                ),
                (
                    #""subscribe", "params": {"path": "conversation.uploads"}"#, "contract", "invalidParams",
                    "conversation"
                ),
                (#""verification.start", "params": {"userID": "bob"}"#, "contract", "invalidParams", "userID"),
                (
                    #""verification.start", "params": {"userID": "@b:localhost", "startDirectly": true}"#,
                    "contract", "invalidParams", "deviceID"
                ),
                (#""verification.start", "params": {"userID": "@b:localhost"}"#, "verification", "notReady", nil),
                (
                    #""verification.confirm", "params": {"verification": "verification-1"}"#, "contract",
                    "invalidHandle", "verification"
                ),
                (#""subscribe", "params": {"path": "verification.incoming"}"#, "verification", "notReady", nil),
            ]
            for (index, item) in cases.enumerated() {
                let answer = try await call(engine, #"{"id": \#(index), "method": \#(item.request)}"#)
                #expect(answer["error"]?["domain"] == .string(item.domain), "\(item.request)")
                #expect(answer["error"]?["code"] == .string(item.code), "\(item.request)")
                if let parameter = item.parameter {
                    #expect(answer["error"]?["details"]?["parameter"] == .string(parameter), "\(item.request)")
                }
            }
            let text = sink.text
            #expect(!text.contains("canary-recovery-key-5d1e"))
        }
    }

    @Test("Subscriptions to the session and the conversation list answer their current value")
    func observables() async throws {
        try await withEngine { engine, _ in
            let state = try await call(
                engine, #"{"id": 1, "method": "subscribe", "params": {"path": "session.state"}}"#)
            #expect(state["result"]?["value"] == .object(["kind": "signedOut"]))
            let list = try await call(
                engine, #"{"id": 2, "method": "value", "params": {"path": "chat.conversations"}}"#)
            #expect(list["result"]?["status"] == "signedOut")
            let methods = try await call(engine, #"{"id": 3, "method": "contract.methods"}"#)
            guard case .array(let names)? = methods["result"]?["methods"] else {
                Issue.record("no method list")
                return
            }
            for name in [
                "session.signIn", "chat.conversation.send", "wallet.prepareTransfer", "draft.confirm", "pending.query",
                "meetings.join", "room.raiseHand", "studio.requestGrant", "message.split", "amount.parse",
            ] {
                #expect(names.contains(.string(name)), "missing \(name)")
            }
        }
    }

    /// The names declared at the top level of `export interface <name> { … }` in the schema.
    static func declaredKeys(of interface: String) throws -> Set<String> {
        let schema = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("contract/symorva.d.ts")
        let text = try String(contentsOf: schema, encoding: .utf8)
        var keys: Set<String> = []
        var inside = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("export interface \(interface) {") {
                inside = true
            } else if inside && line.hasPrefix("}") {
                break
            } else if inside, line.hasPrefix("  "), !line.hasPrefix("   "), let colon = line.firstIndex(of: ":") {
                let key = line[line.index(line.startIndex, offsetBy: 2)..<colon].trimmingCharacters(in: ["\""])
                if !key.hasPrefix("/") && !key.hasPrefix("*") { keys.insert(key) }
            }
        }
        return keys
    }

    @Test("Drift check: contract/symorva.d.ts declares exactly the engine's methods and paths")
    func schemaMatchesEngine() async throws {
        try await withEngine { engine, _ in
            let answer = try await call(engine, #"{"id": 1, "method": "contract.methods"}"#)
            guard case .array(let methods)? = answer["result"]?["methods"],
                case .array(let paths)? = answer["result"]?["subscriptions"]
            else {
                Issue.record("no method list in \(answer)")
                return
            }
            let served = Set(methods.compactMap { if case .string(let name) = $0 { name } else { nil } })
            let observable = Set(paths.compactMap { if case .string(let name) = $0 { name } else { nil } })
            let declared = try Self.declaredKeys(of: "Methods")
            let declaredPaths = try Self.declaredKeys(of: "Paths")
            #expect(served.subtracting(declared).sorted() == [], "served but not in symorva.d.ts")
            #expect(declared.subtracting(served).sorted() == [], "in symorva.d.ts but not served")
            #expect(observable.subtracting(declaredPaths).sorted() == [], "observable but not in symorva.d.ts")
            #expect(declaredPaths.subtracting(observable).sorted() == [], "in symorva.d.ts but not observable")
        }
    }

    @Test("A password sent over the boundary never reaches a log")
    func passwordNotLogged() async throws {
        try await withEngine { engine, sink in
            let canary = "canary-password-7f3a9"
            let answer = try await call(
                engine,
                #"{"id": 1, "method": "session.signIn", "params": {"username": "alice", "password": "\#(canary)"}}"#)
            #expect(answer["error"]?["domain"] == "session")
            let wrongType = try await call(
                engine, #"{"id": 2, "method": "session.signIn", "params": {"username": "alice", "password": 12345}}"#)
            #expect(wrongType["error"]?["code"] == "invalidParams")
            #expect(!sink.text.isEmpty)
            #expect(!sink.text.contains(canary))
            #expect(!sink.text.contains("12345"))
        }
    }
}

@Suite("Contract line splitter")
struct ContractLineSplitterTests {
    func lines(_ chunks: [String], limit: Int = 10) -> [ContractLineSplitter.Line] {
        var splitter = ContractLineSplitter(limit: limit)
        var found: [ContractLineSplitter.Line] = []
        for chunk in chunks { splitter.feed(Array(chunk.utf8)) { found.append($0) } }
        splitter.finish { found.append($0) }
        return found
    }

    @Test("Lines across chunks, CRLF, blank lines, a last line without newline")
    func splitting() {
        #expect(
            lines(["ab", "c\nde\r\n", "\n  \nf"]) == [
                .request(Array("abc".utf8)), .request(Array("de".utf8)), .request(Array("f".utf8)),
            ])
    }

    @Test("A line over the limit is reported once and skipped; the next is read")
    func tooLong() {
        #expect(lines(["0123456789A", "BCDEF\nok\n"]) == [.tooLong, .request(Array("ok".utf8))])
        #expect(lines([String(repeating: "x", count: 11) + "\n"]) == [.tooLong])
        #expect(
            lines([String(repeating: "x", count: 10) + "\n"]) == [
                .request(Array(String(repeating: "x", count: 10).utf8))
            ])
    }
}
