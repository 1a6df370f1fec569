import SymorvaKit
import SymorvaRuntime

/// Prints a line when another device asks the active account to verify, so that the person at
/// the prompt knows to answer with `verify accept` or `verify cancel`. It follows the account:
/// ``follow(_:)`` runs after every session change (``CommunitySlot/updateModuleSlots(in:)``)
/// and watches the active account's crypto module, if any.
enum VerificationAnnouncer: REPLStateKey {
    typealias Value = Watch

    /// The watch on one account's incoming requests.
    final class Watch: Sendable {
        let crypto: ObjectIdentifier
        let stop: @Sendable () -> Void

        init(crypto: ObjectIdentifier, stop: @escaping @Sendable () -> Void) {
            self.crypto = crypto
            self.stop = stop
        }
    }

    /// The line printed for an incoming request (user content: none; IDs only).
    static func line(user: UserID, device: DeviceID?) -> String {
        "verification request from \(user)\(device.map { " \($0.rawValue)" } ?? ""): verify accept | verify cancel"
    }

    /// Watches the active account's incoming verification requests (and stops watching the
    /// previous account's).
    static func follow(_ context: REPLContext) {
        let crypto = context[CommunitySlot.self]?.module(AccountCrypto.self)
        let current = context[Self.self]
        if let current, let crypto, current.crypto == ObjectIdentifier(crypto) { return }
        current?.stop()
        context[Self.self] = nil
        guard let crypto else { return }
        let output = context.output
        let announced = Lock<ObjectIdentifier?>(nil)
        let stop = crypto.incomingVerification.subscribe { request in
            guard let request, request.state.value == .incoming else { return }
            let isNew = announced.withLock { last in
                defer { last = ObjectIdentifier(request) }
                return last != ObjectIdentifier(request)
            }
            if isNew { output.print(line(user: request.otherUserID, device: request.otherDeviceID)) }
        }
        context[Self.self] = Watch(crypto: ObjectIdentifier(crypto), stop: stop)
    }
}
