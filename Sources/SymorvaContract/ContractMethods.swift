import SymorvaKit
import SymorvaMatrix

/// What a method sees of its request: its parameters, the client's handles, and the way to ask
/// the host (the consent sheet, PIN entry).
package struct ContractCall: Sendable {
    /// The request's `params`.
    package let params: ContractParams
    /// The client's handles.
    package let handles: ContractHandles
    let asker: @Sendable (String, JSONValue) async -> JSONValue?

    /// A call (the engine makes them; tests of a method may too).
    package init(
        params: ContractParams, handles: ContractHandles,
        asker: @escaping @Sendable (String, JSONValue) async -> JSONValue?
    ) {
        self.params = params
        self.handles = handles
        self.asker = asker
    }

    /// Sends the host a `hostRequest` of `kind` with `payload`'s members and waits for its
    /// `host.answer`; `nil` when the client closed (or the request was cancelled) first.
    package func askHost(_ kind: String, _ payload: JSONValue) async -> JSONValue? { await asker(kind, payload) }
}

/// An observable value as the protocol sends it: `subscribe` calls the listener with the current
/// value at once (synchronously) and with every later one, until the returned function is called.
package struct ContractSource: Sendable {
    /// Starts observing.
    package let subscribe: @Sendable (@escaping @Sendable (JSONValue) -> Void) -> @Sendable () -> Void

    /// A source over any subscription function.
    package init(subscribe: @escaping @Sendable (@escaping @Sendable (JSONValue) -> Void) -> @Sendable () -> Void) {
        self.subscribe = subscribe
    }

    /// A source over an SDK observable, encoding each value with `encode`.
    package init<Value: Sendable>(
        _ observable: ObservableValue<Value>, encode: @escaping @Sendable (Value) -> JSONValue
    ) {
        subscribe = { listener in observable.subscribe { value in listener(encode(value)) } }
    }
}

/// The methods a client answers, by name.
package struct ContractMethods: Sendable {
    // The methods throw untyped: the engine answers a `ContractError` as it is and any other error
    // as `contract.internal` (the Swift 6.3 compiler crashes lowering typed-throws async closures
    // stored in these dictionaries). Every method throws only `ContractError`s.

    /// A method that answers later (it may wait for the network or the host).
    package typealias Asynchronous = @Sendable (ContractCall) async throws -> JSONValue
    /// A method that `execute` answers at once, on the caller's thread (no I/O, no state).
    package typealias Synchronous = @Sendable (ContractParams) throws -> JSONValue
    /// An observable value by its path.
    package typealias Subscription = @Sendable (ContractCall) throws -> ContractSource

    /// Request methods (`session.signIn`, `chat.conversation.send`, …).
    package var asynchronous: [String: Asynchronous] = [:]
    /// Methods `execute` runs synchronously (`message.split`, `amount.parse`); `send` answers
    /// them too.
    package var synchronous: [String: Synchronous] = [:]
    /// Paths `subscribe` accepts (`chat.conversations`, `conversation.timeline`, …).
    package var subscriptions: [String: Subscription] = [:]

    /// No methods.
    package init() {}

    /// Every method and path of `other` added (`other` wins on a name in both).
    package mutating func merge(_ other: ContractMethods) {
        asynchronous.merge(other.asynchronous) { _, new in new }
        synchronous.merge(other.synchronous) { _, new in new }
        subscriptions.merge(other.subscriptions) { _, new in new }
    }

    /// Every method name, sorted (the engine's built-ins included): for `contract.methods` and the drift check.
    package var names: [String] {
        (Array(asynchronous.keys) + Array(synchronous.keys) + ContractEngine.builtIns).sorted()
    }
}
