import SymorvaRuntime

/// A per-account module a community client follows (``ActiveAccount``): it knows when its
/// account's scope has ended (switched away from, signed out, shut down).
package protocol AccountBound: AnyObject, Sendable {
    /// Whether the account's scope has ended: the module then refuses to act.
    var isEnded: Bool { get }
}

/// The error of a feature whose client follows the active account: the cases
/// ``ActiveAccount`` throws on the feature's behalf.
package protocol ActiveAccountError: Error {
    /// No account is signed in.
    static var notSignedIn: Self { get }
    /// The account the operation (or its handle) was for was switched away from or signed out
    /// before it finished.
    static var accountEnded: Self { get }
    /// An account is signed in but its module could not be made (its store failed).
    static var moduleUnavailable: Self { get }
}

extension ActiveAccountError {
    /// By default a signed-in account without the module is treated as nobody signed in.
    package static var moduleUnavailable: Self { notSignedIn }
}

/// The one "follows the active account" client of the SDK: what every community client
/// (`community.chat`, `.wallet`, `.meetings`, `.publicRooms`, `.directory`, `.push`,
/// `.aiStudio`) is built on.
///
/// The community calls ``follow(_:isSignedIn:)`` with the new active account's module at every
/// sign-in, switch and sign-out. The client then:
/// - **acts for the account active when called**: ``module()`` gives that account's module, or
///   throws ``ActiveAccountError/notSignedIn`` (nobody signed in),
///   ``ActiveAccountError/moduleUnavailable`` (signed in, the module could not be made) or
///   ``ActiveAccountError/accountEnded`` (its scope has ended);
/// - **never hands out a result under the wrong account**: ``withActive(_:discarding:)`` runs an
///   operation with the active module and throws ``ActiveAccountError/accountEnded`` instead of
///   returning when, meanwhile, another account became active or the module's scope ended (a
///   handle the result would have been, such as a meeting room, is given to `discarding`);
/// - **shows the active account's values**: each ``value(placeholder:isSame:_:)`` is an
///   ``ActiveAccountValue`` switched to the new module's observable at every follow (its rules:
///   no late publication of a replaced account, work follows observers, current reads).
package final class ActiveAccount<Module: AccountBound>: Sendable {
    private enum Active {
        case signedOut
        /// Signed in, but the account's module could not be made.
        case unavailable
        case module(Module)
    }

    private let active = Lock<Active>(.signedOut)
    private let values = Lock<[@Sendable (Module?) -> Void]>([])

    /// A client that acts for nobody until ``follow(_:isSignedIn:)``.
    package init() {}

    /// Makes `module` (the new active account's) the one this client acts for and shows;
    /// `isSignedIn` tells a signed-in account without the module (``ActiveAccountError/moduleUnavailable``)
    /// from nobody signed in (`nil`, `false`).
    package func follow(_ module: Module?, isSignedIn: Bool) {
        active.withLock { active in
            active = module.map(Active.module) ?? (isSignedIn ? .unavailable : .signedOut)
        }
        // The values follow the module active now, not `module`: of two follows that race, the
        // values end on the one that won, whatever order their forwards run in.
        let now = current
        for forward in values.withLock({ $0 }) { forward(now) }
    }

    /// The active account's module, or `nil` (nobody signed in, or signed in without it).
    package var current: Module? {
        active.withLock { active in
            if case .module(let module) = active { return module }
            return nil
        }
    }

    /// The active account's module, to act with now.
    ///
    /// - Throws: `Failure.notSignedIn`, `Failure.moduleUnavailable` or `Failure.accountEnded`.
    package func module<Failure: ActiveAccountError>(orThrow _: Failure.Type = Failure.self) throws(Failure)
        -> Module
    {
        switch active.withLock({ $0 }) {
        case .signedOut: throw .notSignedIn
        case .unavailable: throw .moduleUnavailable
        case .module(let module):
            if module.isEnded { throw .accountEnded }
            return module
        }
    }

    /// Checks that `module` is still the active account's and its scope has not ended.
    ///
    /// - Throws: `Failure.accountEnded` otherwise.
    package func ensureActive<Failure: ActiveAccountError>(_ module: Module, orThrow _: Failure.Type = Failure.self)
        throws(Failure)
    {
        guard current === module, !module.isEnded else { throw .accountEnded }
    }

    /// Runs `body` with the active account's module and returns its result, unless the account
    /// was switched away from or its scope ended meanwhile: then `discarding` gets the result
    /// (to leave a meeting joined for the old account, say) and `Failure.accountEnded` is thrown.
    package func withActive<Result: Sendable, Failure: ActiveAccountError>(
        _ body: (Module) async throws(Failure) -> Result,
        discarding: (Result) async -> Void = { _ in }
    ) async throws(Failure) -> Result {
        let module = try module(orThrow: Failure.self)
        let result = try await body(module)
        guard current === module, !module.isEnded else {
            await discarding(result)
            throw .accountEnded
        }
        return result
    }

    /// A value that shows the active account's `source` (`placeholder` while nobody is signed
    /// in), switched at every ``follow(_:isSignedIn:)``.
    ///
    /// - Parameter isSame: whether two values look the same to an observer; an equal value is
    ///   not published again.
    package func value<Value: Sendable>(
        placeholder: Value, isSame: @escaping @Sendable (Value, Value) -> Bool,
        _ source: @escaping @Sendable (Module) -> ObservableValue<Value>
    ) -> ObservableValue<Value> {
        let value = ActiveAccountValue(placeholder: placeholder, isSame: isSame)
        values.withLock { $0.append { module in value.follow(module.map(source)) } }
        if let module = current { value.follow(source(module)) }
        return value.observable
    }

    /// A value that shows the active account's `source`; equal values are not published again.
    package func value<Value: Sendable & Equatable>(
        placeholder: Value, _ source: @escaping @Sendable (Module) -> ObservableValue<Value>
    ) -> ObservableValue<Value> {
        value(placeholder: placeholder, isSame: ==, source)
    }
}
