import SymorvaMachines
import SymorvaRuntime

/// Where the session machine's ``/SymorvaMachines/SessionMachine/Effect/finishAuthorization(id:_:)``
/// hands an authorized request's result to the caller waiting for it (``SessionClient``'s
/// `authorize`). A result that arrives before its caller waits is kept until it does.
package final class AuthorizationResults: Sendable {
    private typealias Waiter = CheckedContinuation<Result<[UInt8], SessionError>, Never>
    private let state = Lock<(waiting: [String: Waiter], finished: [String: Result<[UInt8], SessionError>])>(
        ([:], [:]))

    /// An empty registry.
    package init() {}

    /// The result of the request `id`, once finished.
    package func wait(_ id: String) async -> Result<[UInt8], SessionError> {
        await withCheckedContinuation { (continuation: Waiter) in
            let ready = state.withLock { state -> Result<[UInt8], SessionError>? in
                if let result = state.finished.removeValue(forKey: id) { return result }
                state.waiting[id] = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// Hands the result of `id` to its caller.
    package func finish(_ id: String, _ result: Result<[UInt8], SessionError>) {
        let waiter = state.withLock { state -> Waiter? in
            if let waiter = state.waiting.removeValue(forKey: id) { return waiter }
            state.finished[id] = result
            return nil
        }
        waiter?.resume(returning: result)
    }
}
