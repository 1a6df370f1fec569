import SymorvaKit
import SymorvaMatrix

/// The protocol's engine: reads JSON requests, runs the method each names, and puts exactly one
/// answer per request in its ``outbox`` (a result or a typed error carrying the request's `id`),
/// with the updates of subscriptions and the requests to the host in between.
///
/// Messages from the host (see docs/contract.md):
/// - a request: `{"id": 7, "method": "chat.conversation.send", "params": {…}}` (`id` a string or
///   an integer, echoed in the answer);
///
/// and to the host:
/// - an answer: `{"id": 7, "result": …}` or `{"id": 7, "error": {"domain", "code", "message", "details"?}}`
///   (`id` is `null` when the request's own could not be read);
/// - an update: `{"update": {"subscription": "sub-1", "value": …}}`;
/// - a host request: `{"hostRequest": {"id": "host-1", "kind": "consent" | "pin", …}}`, answered by
///   the host with the method `host.answer`;
/// - `{"closed": true}`, the last message, after ``close()``.
///
/// Requests run concurrently; answers come in the order the methods finish. Bad input (not JSON,
/// too large, an unknown method, a wrong parameter, a foreign handle) is answered with a typed
/// error and changes nothing else: the client stays usable.
package final class ContractEngine: Sendable {
    /// The longest request accepted, in bytes (1 MiB): longer ones are answered with
    /// `contract.requestTooLarge` without being parsed.
    package static let maximumRequestSize = 1 << 20
    /// The methods every engine answers itself.
    package static let builtIns = [
        "subscribe", "unsubscribe", "value", "host.answer", "handle.release", "contract.methods",
    ]

    /// Where answers, updates and host requests wait for the host.
    package let outbox: ContractOutbox
    /// The handles this client issued.
    package let handles: ContractHandles
    private let methods: ContractMethods
    private let log: @Sendable (LogLevel, String) -> Void
    private let state = Lock(State())

    private struct State: ~Copyable {
        var tasks: [Int: Task<Void, Never>] = [:]
        var subscriptions: [String: ContractSubscription] = [:]
        var hostRequests: [String: CheckedContinuation<JSONValue?, Never>] = [:]
        var nextTask = 1
        var nextSubscription = 1
        var nextHostRequest = 1
        var isClosed = false
    }

    /// An engine answering `methods`.
    ///
    /// - Parameter log: receives one line per request and per error (method names, IDs and error
    ///   codes only, never a parameter: passwords, PINs and message bodies stay out of logs).
    package init(
        methods: ContractMethods, outbox: ContractOutbox = ContractOutbox(),
        handles: ContractHandles = ContractHandles(),
        log: @escaping @Sendable (LogLevel, String) -> Void = { _, _ in }
    ) {
        self.methods = methods
        self.outbox = outbox
        self.handles = handles
        self.log = log
    }

    /// Whether ``close()`` was called.
    package var isClosed: Bool { state.withLock { $0.isClosed } }

    // MARK: - Requests

    /// Takes one request; its answer (and anything it causes) arrives in ``outbox``. Never blocks
    /// on the network or the host.
    package func send(_ bytes: some Collection<UInt8>) {
        let request: ContractRequest
        do throws(ContractRequest.Failure) {
            request = try ContractRequest(bytes: bytes)
        } catch {
            answer(id: error.id, method: nil, .failure(error.error))
            return
        }
        guard !isClosed else {
            answer(id: request.id, method: request.method, .failure(.closed))
            return
        }
        if isKnown(request.method) { log(.debug, "request \(request.method)") }
        if let builtIn = builtIn(request) {
            answer(id: request.id, method: request.method, builtIn)
        } else if let method = methods.synchronous[request.method] {
            answer(id: request.id, method: request.method, Self.run(method, request))
        } else if let method = methods.asynchronous[request.method] {
            start(method, request)
        } else {
            answer(id: request.id, method: request.method, .failure(.methodNotFound(request.method)))
        }
    }

    /// Answers a request the transport refused for its size without reading it (a line of
    /// `symorva serve --stdio` over the limit): `contract.requestTooLarge`, `id` null.
    package func refuseTooLarge() {
        answer(id: .null, method: nil, .failure(.requestTooLarge(limit: Self.maximumRequestSize)))
    }

    /// Runs a synchronous method (`message.split`, `amount.parse`) on the calling thread and
    /// returns its answer message; every other method is answered `contract.methodNotFound`.
    /// Works after ``close()`` too: it touches no state.
    package func execute(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let request: ContractRequest
        do throws(ContractRequest.Failure) {
            request = try ContractRequest(bytes: bytes, idRequired: false)
        } catch {
            return Self.answerMessage(id: error.id, .failure(error.error))
        }
        guard let method = methods.synchronous[request.method] else {
            return Self.answerMessage(id: request.id, .failure(.methodNotFound(request.method)))
        }
        return Self.answerMessage(id: request.id, Self.run(method, request))
    }

    private static func run(_ method: ContractMethods.Synchronous, _ request: ContractRequest) -> Result<
        JSONValue, ContractError
    > {
        do {
            return .success(try method(try ContractParams(request.params)))
        } catch {
            return .failure(ContractError.wrapping(error))
        }
    }

    private func start(_ method: @escaping ContractMethods.Asynchronous, _ request: ContractRequest) {
        let started = state.withLock { current -> Bool in
            guard !current.isClosed else { return false }
            let taskID = current.nextTask
            current.nextTask += 1
            current.tasks[taskID] = Task { [self] in
                let result: Result<JSONValue, ContractError>
                do {
                    let call = ContractCall(params: try ContractParams(request.params), handles: handles) {
                        [weak self] kind, payload in await self?.askHostRequest(kind, payload)
                    }
                    result = .success(try await method(call))
                } catch {
                    result = .failure(ContractError.wrapping(error))
                }
                answer(id: request.id, method: request.method, result)
                _ = state.withLock { $0.tasks.removeValue(forKey: taskID) }
            }
            return true
        }
        if !started { answer(id: request.id, method: request.method, .failure(.closed)) }
    }

    private func answer(id: JSONValue, method: String?, _ result: Result<JSONValue, ContractError>) {
        if case .failure(let error) = result {
            // Only a method this engine knows is named: the host chose the text of any other.
            let known = method.map { isKnown($0) ? $0 : "(unknown)" } ?? "(unreadable)"
            log(.info, "answer \(known) error=\(error.domain).\(error.code)")
        }
        outbox.push(Self.answerMessage(id: id, result))
    }

    private func isKnown(_ method: String) -> Bool {
        Self.builtIns.contains(method) || methods.asynchronous[method] != nil || methods.synchronous[method] != nil
    }

    static func answerMessage(id: JSONValue, _ result: Result<JSONValue, ContractError>) -> [UInt8] {
        switch result {
        case .success(let value): ContractJSON.encode(.object(["id": id, "result": value]))
        case .failure(let error): ContractJSON.encode(.object(["id": id, "error": error.json]))
        }
    }

    // MARK: - Built-in methods

    private func builtIn(_ request: ContractRequest) -> Result<JSONValue, ContractError>? {
        guard Self.builtIns.contains(request.method) else { return nil }
        do throws(ContractError) {
            let params = try ContractParams(request.params)
            switch request.method {
            case "subscribe": return .success(try subscribe(params))
            case "unsubscribe": return .success(try unsubscribe(params))
            case "value": return .success(try value(params))
            case "host.answer": return .success(try hostAnswer(params))
            case "handle.release":
                let id = try params.string("handle")
                guard handles.release(id) else { throw ContractError.unknownID("handle") }
                return .success(.object([:]))
            default:
                return .success(
                    .object([
                        "methods": .array(methods.names.map(JSONValue.string)),
                        "subscriptions": .array(methods.subscriptions.keys.sorted().map(JSONValue.string)),
                    ]))
            }
        } catch {
            return .failure(error)
        }
    }

    private func source(_ params: ContractParams) throws(ContractError) -> ContractSource {
        let path = try params.string("path")
        guard let subscription = methods.subscriptions[path] else {
            throw ContractError.invalidParams(
                "path", "one of \(methods.subscriptions.keys.sorted().joined(separator: ", "))")
        }
        let call = ContractCall(params: params, handles: handles) { _, _ in nil }
        do {
            return try subscription(call)
        } catch {
            throw ContractError.wrapping(error)
        }
    }

    private func subscribe(_ params: ContractParams) throws(ContractError) -> JSONValue {
        let source = try source(params)
        let id = state.withLock { state -> String in
            defer { state.nextSubscription += 1 }
            return "sub-\(state.nextSubscription)"
        }
        let subscription = ContractSubscription(id: id, outbox: outbox)
        subscription.unsubscribe = source.subscribe { value in subscription.publish(value) }
        let accepted = state.withLock { state -> Bool in
            guard !state.isClosed else { return false }
            state.subscriptions[id] = subscription
            return true
        }
        guard accepted else {
            subscription.cancel()
            throw ContractError.closed
        }
        // The first value is the result's; later ones are updates, sent after the answer.
        return .object(["subscription": .string(id), "value": subscription.start()])
    }

    private func unsubscribe(_ params: ContractParams) throws(ContractError) -> JSONValue {
        let id = try params.string("subscription")
        guard let subscription = state.withLock({ $0.subscriptions.removeValue(forKey: id) }) else {
            throw ContractError.unknownID("subscription")
        }
        subscription.cancel()
        return .object([:])
    }

    private func value(_ params: ContractParams) throws(ContractError) -> JSONValue {
        let source = try source(params)
        let first = Lock<JSONValue?>(nil)
        let stop = source.subscribe { value in first.withLock { if $0 == nil { $0 = value } } }
        stop()
        return first.withLock { $0 } ?? .null
    }

    // MARK: - Host requests

    func askHostRequest(_ kind: String, _ payload: JSONValue) async -> JSONValue? {
        let id = state.withLock { state -> String in
            defer { state.nextHostRequest += 1 }
            return "host-\(state.nextHostRequest)"
        }
        var request: [String: JSONValue] = ["id": .string(id), "kind": .string(kind)]
        if case .object(let members) = payload { request.merge(members) { current, _ in current } }
        let message = ContractJSON.encode(.object(["hostRequest": .object(request)]))
        log(.debug, "hostRequest \(kind) id=\(id)")
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<JSONValue?, Never>) in
                let accepted = state.withLock { state -> Bool in
                    guard !state.isClosed, !Task.isCancelled else { return false }
                    state.hostRequests[id] = continuation
                    return true
                }
                if accepted { outbox.push(message) } else { continuation.resume(returning: nil) }
            }
        } onCancel: {
            state.withLock { $0.hostRequests.removeValue(forKey: id) }?.resume(returning: nil)
        }
    }

    private func hostAnswer(_ params: ContractParams) throws(ContractError) -> JSONValue {
        let id = try params.string("request")
        guard let answer = params.members["answer"] else { throw ContractError.invalidParams("answer", "present") }
        guard let continuation = state.withLock({ $0.hostRequests.removeValue(forKey: id) }) else {
            throw ContractError.unknownID("request")
        }
        continuation.resume(returning: answer)
        return .object([:])
    }

    // MARK: - Closing

    /// Stops the client: requests in flight are cancelled (their answers, if any, are dropped),
    /// subscriptions end, host requests are withdrawn, handles are forgotten, and `{"closed":
    /// true}` is the last message. Later requests are answered `contract.closed` until the
    /// outbox closes.
    package func close() {
        let (tasks, subscriptions, hostRequests) = state.withLock { state in
            state.isClosed = true
            defer {
                state.tasks = [:]
                state.subscriptions = [:]
                state.hostRequests = [:]
            }
            return (Array(state.tasks.values), Array(state.subscriptions.values), Array(state.hostRequests.values))
        }
        for task in tasks { task.cancel() }
        for subscription in subscriptions { subscription.cancel() }
        for continuation in hostRequests { continuation.resume(returning: nil) }
        handles.removeAll()
        outbox.push(ContractJSON.encode(.object(["closed": .bool(true)])))
        outbox.close()
        log(.info, "closed")
    }
}

/// One subscription: its listener forwards values as updates once the subscription's answer is
/// out, in order, and never after ``cancel()``.
final class ContractSubscription: Sendable {
    let id: String
    private let outbox: ContractOutbox
    private let shared = Lock(Shared())
    private let stop = Lock<(@Sendable () -> Void)?>(nil)

    private struct Shared {
        var isStarted = false
        var isCancelled = false
        var first: JSONValue?
    }

    init(id: String, outbox: ContractOutbox) {
        self.id = id
        self.outbox = outbox
    }

    /// The function that ends the SDK subscription.
    var unsubscribe: (@Sendable () -> Void)? {
        get { stop.withLock { $0 } }
        set { stop.withLock { $0 = newValue } }
    }

    /// A value from the SDK: kept as the first one until ``start()``, an update after.
    func publish(_ value: JSONValue) {
        shared.withLock { shared in
            guard !shared.isCancelled else { return }
            guard shared.isStarted else {
                shared.first = value
                return
            }
            // Pushed under the lock: two publications never overtake each other.
            outbox.push(
                ContractJSON.encode(.object(["update": .object(["subscription": .string(id), "value": value])])))
        }
    }

    /// The value the answer carries; later values are updates.
    func start() -> JSONValue {
        shared.withLock { shared in
            shared.isStarted = true
            return shared.first ?? .null
        }
    }

    /// Ends the subscription: no update after this returns.
    func cancel() {
        shared.withLock { $0.isCancelled = true }
        stop.withLock { stop in
            stop?()
            stop = nil
        }
    }
}

/// A request as read from its JSON text.
struct ContractRequest: Sendable {
    let id: JSONValue
    let method: String
    let params: JSONValue?

    /// Why a request could not be read, with its `id` when that much was readable.
    struct Failure: Error {
        let id: JSONValue
        let error: ContractError
    }

    init(bytes: some Collection<UInt8>, idRequired: Bool = true) throws(Failure) {
        guard bytes.count <= ContractEngine.maximumRequestSize else {
            throw Failure(id: .null, error: .requestTooLarge(limit: ContractEngine.maximumRequestSize))
        }
        let json: JSONValue
        do throws(JSONSyntaxError) {
            json = try JSONValue(parsing: bytes)
        } catch {
            throw Failure(
                id: .null, error: .parseError("\(error.reason) at line \(error.line), column \(error.column)"))
        }
        guard case .object(let members) = json else {
            throw Failure(id: .null, error: .invalidRequest("a request is a JSON object"))
        }
        switch members["id"] {
        case .string(let text)? where text.utf8.count <= 256: id = .string(text)
        case let number? where number.integerValue != nil: id = number
        case nil where !idRequired: id = .null
        case nil: throw Failure(id: .null, error: .invalidRequest("id is missing"))
        case _?:
            throw Failure(id: .null, error: .invalidRequest("id must be a string of at most 256 bytes or an integer"))
        }
        guard case .string(let method)? = members["method"] else {
            throw Failure(id: id, error: .invalidRequest("method must be a string"))
        }
        self.method = method
        self.params = members["params"]
    }
}
