import SymorvaMachines
import SymorvaRuntime

/// Performs the SecretAnswer machine's effects: the checks (the asking device's trust after a
/// `keys/query` when needed, whether the secret is held), the Olm answers, and the store's
/// deletions. The checks and answers need the account's keys, so they run on its
/// ``AccountCrypto`` (held weakly: the account owns the host that owns this).
struct SecretAnswerInterpreter: EffectInterpreter {
    typealias Machine = SecretAnswerMachine

    let store: CryptoStore
    let account: AccountReference
    let logger: Logger

    /// The account the effects run on, set once it is built.
    final class AccountReference: Sendable {
        private struct Weak: Sendable { weak var crypto: AccountCrypto? }
        private let reference = Lock(Weak())

        var crypto: AccountCrypto? { reference.withLock { $0.crypto } }

        func set(_ crypto: AccountCrypto) { reference.withLock { $0.crypto = crypto } }
    }

    func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event? {
        switch effect {
        case .checkRequests(let requests):
            guard let crypto = account.crypto else { return nil }
            return .requestsChecked(await crypto.checkSecretRequests(requests))
        case .sendAnswers(let requests):
            guard let crypto = account.crypto else { return nil }
            return .answersSent(failure: await crypto.sendSecretAnswers(requests))
        case .forgetRequests(let requests):
            do throws(CryptoStoreError) { try await store.forgetIncomingSecretRequests(requests) } catch {
                logger.error("secret requests not forgotten error=\(error)")
            }
            return nil
        }
    }
}
