import SymorvaKit
import SymorvaMatrix

/// The contract bound to one ``SymorvaCommunity``: every method and observable path of the
/// contract (`contract/symorva.d.ts`), each a call of the Swift product API.
///
/// It also ends the handles of an account when that account is signed out or switched away
/// from, and makes the studio's consent sheet a `hostRequest` of kind `consent`.
package final class ContractCommunity: Sendable {
    /// The community.
    package let community: SymorvaCommunity
    /// The engine serving the community (set once, by ``makeEngine(log:)``).
    private let engineSlot = Lock<ContractEngine?>(nil)
    private let following = Lock<FollowState>(FollowState())
    private let handles = ContractHandles()

    private struct FollowState {
        var active: UserID?
        var unsubscribe: (@Sendable () -> Void)?
    }

    /// The binding of `community`; ``makeEngine(log:)`` makes its engine.
    package init(community: SymorvaCommunity) {
        self.community = community
    }

    /// The engine answering the contract for the community. Installs the consent presenter.
    package func makeEngine(log: @escaping @Sendable (LogLevel, String) -> Void = { _, _ in }) -> ContractEngine {
        let engine = ContractEngine(methods: methods, handles: handles, log: log)
        engineSlot.withLock { $0 = engine }
        let unsubscribe = community.session.state.subscribe { [weak self] state in self?.sessionChanged(state) }
        following.withLock { $0.unsubscribe = unsubscribe }
        community.aiStudio?.consentPresenter = ClosureConsentPresenter { [weak engine] sheet in
            guard let engine else { return .unavailable }
            let answer = await engine.askHost("consent", .object(["sheet": ContractValues.consentSheet(sheet)]))
            switch answer {
            case .string("approved")?: return .approved
            case .string("declined")?: return .declined
            default: return .unavailable
            }
        }
        return engine
    }

    /// Closes the engine and shuts the community down.
    package func close() async {
        let engine = engineSlot.withLock { $0 }
        following.withLock { state in
            state.unsubscribe?()
            state.unsubscribe = nil
        }
        engine?.close()
        await community.shutdown()
    }

    /// Ends the handles of the account that stops being active.
    private func sessionChanged(_ state: SessionState) {
        let ended = following.withLock { following -> UserID? in
            let previous = following.active
            switch state {
            case .signedIn(let account), .softLoggedOut(let account):
                following.active = account.userID
                return previous == account.userID ? nil : previous
            case .signedOut:
                following.active = nil
                return previous
            case .signingOut(let userID) where userID == previous:
                following.active = nil
                return previous
            case .switching(let target) where target != previous:
                following.active = nil
                return previous
            case .launching, .signingIn, .restoring, .signingOut, .switching, .unavailable:
                return nil
            }
        }
        if let ended { handles.endAccount(ended) }
    }

    /// The active account's ID when a handle is issued (the account it belongs to).
    var activeUserID: UserID? { community.session.state.value.account?.userID }

    /// Every method and path.
    var methods: ContractMethods {
        var methods = ContractMethods.synchronousRules
        methods.merge(sessionMethods)
        methods.merge(chatMethods)
        methods.merge(roomManagementMethods)
        methods.merge(spaceMethods)
        methods.merge(deviceMethods)
        methods.merge(conversationMethods)
        methods.merge(attachmentMethods)
        methods.merge(walletMethods)
        methods.merge(meetingMethods)
        methods.merge(studioMethods)
        methods.merge(directoryMethods)
        methods.merge(pushMethods)
        methods.merge(encryptionMethods)
        methods.merge(verificationMethods)
        return methods
    }

    /// The module client or `moduleDisabled`.
    static func required<Client>(_ client: Client?, _ module: String) throws(ContractError) -> Client {
        guard let client else { throw .moduleDisabled(module) }
        return client
    }
}

extension ContractEngine {
    /// Asks the host (a `hostRequest` of `kind`) and waits for its answer; `nil` when the client
    /// closed first. For adapters the binding installs (the consent presenter).
    package func askHost(_ kind: String, _ payload: JSONValue) async -> JSONValue? {
        await askHostRequest(kind, payload)
    }
}

/// Wraps a feature's typed error as a contract error of `domain`.
///
/// The body's error is untyped because the features' typed errors pass through here as they are
/// (the Swift 6.3 compiler crashes on a generic typed-throws body inside these closures).
func mapping<T>(_ domain: String, _ body: () async throws -> T) async throws(ContractError) -> T {
    do {
        return try await body()
    } catch let error as ContractError {
        throw error
    } catch {
        throw ContractError(error, domain: domain)
    }
}
