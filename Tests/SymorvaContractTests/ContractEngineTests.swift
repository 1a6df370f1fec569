import Foundation
import SymorvaContract
import SymorvaKit
import SymorvaMatrix
import SymorvaTesting
import Testing

/// The engine without the network: a small table of methods (an echo, a slow one, one that asks
/// the host, an observable) plus the SDK's synchronous rules; every message read back from the
/// outbox.
@Suite("Contract engine")
struct ContractEngineTests {
    final class Box: Sendable {
        let name: String
        init(_ name: String) { self.name = name }
    }

    let publisher = ObservableValue<Int>.Publisher(0)
    let handles = ContractHandles()
    let engine: ContractEngine

    init() {
        var methods = ContractMethods.synchronousRules
        methods.asynchronous["test.echo"] = { call in
            .object(["text": .string(try call.params.string("text"))])
        }
        methods.asynchronous["test.handle"] = { call in
            let account = try call.params.userID("account")
            return .string(call.handles.issue(Box(try call.params.string("name")), kind: "box", account: account))
        }
        methods.asynchronous["test.useHandle"] = { call in
            .string(try call.handles.resolve(call.params, "box", kind: "box", as: Box.self, domain: "test").name)
        }
        methods.asynchronous["test.ask"] = { call in
            await call.askHost("pin", .object(["why": "test"])) ?? .string("no answer")
        }
        methods.asynchronous["test.wait"] = { _ in
            try? await Task.sleep(for: .seconds(600))
            return .string("woke")
        }
        let observable = publisher.observable
        methods.subscriptions["test.counter"] = { _ in ContractSource(observable) { JSONValue.int($0) } }
        engine = ContractEngine(methods: methods, handles: handles)
    }

    /// The next message, parsed (waits up to `TestWaiting.defaultTimeout`, ThreadSanitizer on a
    /// loaded machine included: the engine answers asynchronous methods on tasks).
    func next() async throws -> JSONValue {
        try JSONValue(parsing: try await Self.receive(from: engine.outbox))
    }

    /// The outbox's next message within `limit`. Polls without blocking: a test runs on the
    /// cooperative pool, and a blocking `receive` there would starve the tasks that answer.
    static func receive(from outbox: ContractOutbox, within limit: Duration = TestWaiting.defaultTimeout) async throws
        -> [UInt8]
    {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if let bytes = outbox.receive(timeout: .zero) { return bytes }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw NoMessage()
    }

    struct NoMessage: Error, CustomStringConvertible {
        var description: String { "no message within 60 s" }
    }

    func send(_ text: String) { engine.send(Array(text.utf8)) }

    func errorCode(_ message: JSONValue) -> String? {
        if case .string(let code)? = message["error"]?["code"] { return code }
        return nil
    }

    @Test("A request is answered once, with its id, string or integer")
    func answerCarriesID() async throws {
        send(#"{"id": "a-1", "method": "test.echo", "params": {"text": "hi"}}"#)
        #expect(try await next() == .object(["id": "a-1", "result": .object(["text": "hi"])]))
        send(#"{"id": 42, "method": "test.echo", "params": {"text": "x"}}"#)
        #expect(try await next()["id"] == .int(42))
        let queued = engine.outbox.count
        #expect(queued == 0)
    }

    @Test("Malformed JSON, a non-object, a missing id or method: typed errors, and the client goes on")
    func malformedInput() async throws {
        send("{not json")
        let first = try await next()
        #expect(first["id"] == .null)
        #expect(errorCode(first) == "parseError")
        send("[1, 2]")
        #expect(errorCode(try await next()) == "invalidRequest")
        send(#"{"method": "test.echo"}"#)
        #expect(errorCode(try await next()) == "invalidRequest")
        send(#"{"id": 3, "params": {}}"#)
        let noMethod = try await next()
        #expect(noMethod["id"] == .int(3))
        #expect(errorCode(noMethod) == "invalidRequest")
        send(#"{"id": {"x": 1}, "method": "test.echo"}"#)
        #expect(errorCode(try await next()) == "invalidRequest")
        send(String(repeating: "[", count: 200))
        #expect(errorCode(try await next()) == "parseError")
        send(#"{"id": 4, "method": "test.echo", "params": {"text": "still here"}}"#)
        #expect(try await next() == .object(["id": .int(4), "result": .object(["text": "still here"])]))
    }

    @Test("Unknown method and wrong parameter types name what was wrong")
    func unknownMethodAndWrongParams() async throws {
        send(#"{"id": 1, "method": "wallet.stealEverything"}"#)
        let unknown = try await next()
        #expect(errorCode(unknown) == "methodNotFound")
        #expect(unknown["error"]?["domain"] == "contract")
        send(#"{"id": 2, "method": "test.echo", "params": {"text": 5}}"#)
        let wrong = try await next()
        #expect(errorCode(wrong) == "invalidParams")
        #expect(wrong["error"]?["details"]?["parameter"] == "text")
        send(#"{"id": 3, "method": "test.echo", "params": "text"}"#)
        #expect(errorCode(try await next()) == "invalidRequest")
        send(#"{"id": 4, "method": "test.echo", "params": {"text": "ok"}}"#)
        #expect(try await next()["result"] == .object(["text": "ok"]))
    }

    @Test("A request over the limit is refused unread, and the next one is served")
    func tooLarge() async throws {
        let padding = String(repeating: "a", count: 10 * 1024 * 1024)
        send(#"{"id": 1, "method": "test.echo", "params": {"text": ""# + padding + #""}}"#)
        let answer = try await next()
        #expect(errorCode(answer) == "requestTooLarge")
        #expect(answer["error"]?["details"]?["limit"] == .int(ContractEngine.maximumRequestSize))
        send(#"{"id": 2, "method": "test.echo", "params": {"text": "small"}}"#)
        #expect(try await next()["result"] == .object(["text": "small"]))
    }

    @Test("Handles: a foreign ID is invalidHandle, an ended account's is accountEnded, never served")
    func handleScoping() async throws {
        send(#"{"id": 1, "method": "test.handle", "params": {"name": "first", "account": "@alice:example.org"}}"#)
        let issued = try await next()
        guard case .string(let handle)? = issued["result"] else {
            Issue.record("no handle in \(issued)")
            return
        }
        send(#"{"id": 2, "method": "test.useHandle", "params": {"box": "\#(handle)"}}"#)
        #expect(try await next()["result"] == "first")
        send(#"{"id": 3, "method": "test.useHandle", "params": {"box": "box-999"}}"#)
        #expect(errorCode(try await next()) == "invalidHandle")
        send(#"{"id": 4, "method": "test.useHandle", "params": {"box": 17}}"#)
        #expect(errorCode(try await next()) == "invalidParams")
        handles.endAccount(UserID("@alice:example.org"))
        send(#"{"id": 5, "method": "test.useHandle", "params": {"box": "\#(handle)"}}"#)
        let ended = try await next()
        #expect(errorCode(ended) == "accountEnded")
        #expect(ended["error"]?["domain"] == "test")
    }

    @Test("Subscriptions: the value in the answer, then updates in order, none after unsubscribe")
    func subscriptions() async throws {
        publisher.publish(5)
        send(#"{"id": 1, "method": "subscribe", "params": {"path": "test.counter"}}"#)
        let answer = try await next()
        #expect(answer["result"]?["value"] == .int(5))
        guard case .string(let subscription)? = answer["result"]?["subscription"] else {
            Issue.record("no subscription in \(answer)")
            return
        }
        for value in 6...8 { publisher.publish(value) }
        for value in 6...8 {
            #expect(
                try await next()
                    == .object(["update": .object(["subscription": .string(subscription), "value": .int(value)])]))
        }
        send(#"{"id": 2, "method": "unsubscribe", "params": {"subscription": "\#(subscription)"}}"#)
        #expect(try await next()["result"] == .object([:]))
        publisher.publish(9)
        send(#"{"id": 3, "method": "unsubscribe", "params": {"subscription": "\#(subscription)"}}"#)
        let again = try await next()
        #expect(again["id"] == .int(3))
        #expect(errorCode(again) == "unknownID")
        send(#"{"id": 4, "method": "subscribe", "params": {"path": "no.such.path"}}"#)
        #expect(errorCode(try await next()) == "invalidParams")
        send(#"{"id": 5, "method": "value", "params": {"path": "test.counter"}}"#)
        #expect(try await next()["result"] == .int(9))
        let observers = publisher.observable.observerCount
        #expect(observers == 0)
    }

    @Test("A host request is answered by host.answer; an unknown one is unknownID")
    func hostRequests() async throws {
        send(#"{"id": 1, "method": "test.ask"}"#)
        let request = try await next()
        #expect(request["hostRequest"]?["kind"] == "pin")
        #expect(request["hostRequest"]?["why"] == "test")
        guard case .string(let id)? = request["hostRequest"]?["id"] else {
            Issue.record("no id in \(request)")
            return
        }
        send(#"{"id": 2, "method": "host.answer", "params": {"request": "host-999", "answer": "1"}}"#)
        #expect(errorCode(try await next()) == "unknownID")
        send(#"{"id": 3, "method": "host.answer", "params": {"request": "\#(id)", "answer": "4321"}}"#)
        var answers: [JSONValue: JSONValue] = [:]
        for _ in 0..<2 {
            let message = try await next()
            if let id = message["id"] { answers[id] = message["result"] }
        }
        #expect(answers[.int(3)] == .object([:]))
        #expect(answers[.int(1)] == "4321")
    }

    @Test("execute runs the synchronous rules only, on the caller's thread")
    func execute() async throws {
        let split = try JSONValue(
            parsing: engine.execute(
                Array(#"{"method": "message.split", "params": {"text": "aaaa bbbb", "limit": 5}}"#.utf8)))
        #expect(split["result"]?["parts"] == .array(["aaaa ", "bbbb"]))
        let amount = try JSONValue(
            parsing: engine.execute(
                Array(#"{"method": "amount.parse", "params": {"text": "25.5", "precision": 2}}"#.utf8)))
        #expect(amount["result"] == .object(["value": "25.50", "precision": .int(2)]))
        let bad = try JSONValue(
            parsing: engine.execute(Array(#"{"id": 9, "method": "amount.parse", "params": {"text": "-3"}}"#.utf8)))
        #expect(bad["id"] == .int(9))
        #expect(bad["error"]?["domain"] == "amount")
        #expect(errorCode(bad) == "negative")
        let notSync = try JSONValue(parsing: engine.execute(Array(#"{"method": "test.echo"}"#.utf8)))
        #expect(errorCode(notSync) == "methodNotFound")
        let queued = engine.outbox.count
        #expect(queued == 0)
    }

    @Test("After close: in-flight requests end, host requests are withdrawn, later requests get closed")
    func close() async throws {
        send(#"{"id": 1, "method": "test.wait"}"#)
        send(#"{"id": 2, "method": "test.ask"}"#)
        #expect(try await next()["hostRequest"]?["kind"] == "pin")
        engine.close()
        // Whatever was queued before it, then the closing message (a barrier, not a quiet spell).
        var sawClosed = false
        while !sawClosed, let bytes = try? await Self.receive(from: engine.outbox) {
            if try JSONValue(parsing: bytes)["closed"] == .bool(true) { sawClosed = true }
        }
        #expect(sawClosed)
        send(#"{"id": 3, "method": "test.echo", "params": {"text": "late"}}"#)
        let late = engine.outbox.receive(timeout: .zero)
        #expect(late == nil)
        let isClosed = engine.isClosed
        #expect(isClosed)
        // execute keeps working: it touches no state.
        let split = try JSONValue(
            parsing: engine.execute(Array(#"{"method": "message.split", "params": {"text": "a"}}"#.utf8)))
        #expect(split["result"]?["parts"] == .array(["a"]))
    }

    @Test("Two threads receiving get each message exactly once")
    func twoReceivers() async throws {
        let outbox = ContractOutbox()
        let count = 2_000
        async let first = Self.drain(outbox)
        async let second = Self.drain(outbox)
        for index in 0..<count { outbox.push(Array(String(index).utf8)) }
        // Messages queued before close stay receivable: both threads drain them, then see nil.
        outbox.close()
        let all = await first + second
        #expect(all.count == count)
        #expect(Set(all).count == count)
    }

    static func drain(_ outbox: ContractOutbox) async -> [String] {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var received: [String] = []
                // Ends at `close()` (nil once drained); the timeout is only a safety net.
                while let bytes = outbox.receive(timeout: TestWaiting.defaultTimeout) {
                    received.append(String(decoding: bytes, as: UTF8.self))
                }
                continuation.resume(returning: received)
            }
        }
    }

    @Test("Error codes are the Swift case names, with the case's values as details")
    func errorMapping() {
        let wrongPIN = ContractError(TransferError.failure(.wrongPIN(attemptsLeft: 2)), domain: "wallet")
        #expect(wrongPIN.code == "failure")
        #expect(wrongPIN.details == .object(["reason": "wrongPIN", "attemptsLeft": .int(2)]))
        #expect(ContractError(TransferError.accountEnded, domain: "wallet").code == "accountEnded")
        #expect(ContractError(StudioError.declined, domain: "studio").code == "declined")
        #expect(ContractError(ChatError.network, domain: "chat").code == "network")
        let server = ContractError(ChatError.server(status: 403, errorCode: "M_FORBIDDEN"), domain: "chat")
        #expect(server.code == "server")
        #expect(server.details == .object(["status": .int(403), "errorCode": "M_FORBIDDEN"]))
    }
}
