import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The grants this account revoked on the device, read right before content leaves.
///
/// ``AccountStudio/revoke(_:)`` adds a grant here **before** it tells the grant's machine, so
/// a summary request that is being sent at that moment is stopped by the last check even if the
/// machine's cancellation has not reached it yet.
final class RevocationList: Sendable {
    private let revoked = Lock<Set<GrantID>>([])

    func revoke(_ id: GrantID) { revoked.withLock { _ = $0.insert(id) } }
    var all: Set<GrantID> { revoked.withLock { $0 } }
}

/// The consent presenter an account's studio asks: set by whoever holds the studio (the
/// ``StudioClient`` installs its own when it follows the account).
final class ConsentPresenterSlot: Sendable {
    private let presenter: Lock<any ConsentPresenter>

    init(_ presenter: any ConsentPresenter) { self.presenter = Lock(presenter) }

    var current: any ConsentPresenter {
        get { presenter.withLock { $0 } }
        set { presenter.withLock { $0 = newValue } }
    }
}

/// Performs ``/SymorvaMachines/StudioGrantMachine``'s effects; its expiry timer is performed by the host.
///
/// | effect | performed as | answers |
/// | --- | --- | --- |
/// | `presentConsent` | the ``ConsentPresenter`` | `consentAnswered` |
/// | `sendGrantRequest` | `POST …/studio/grants` (no content) | `grantResponse` |
/// | `sendSummarize` | the last check (revoked, expired on the runtime clock, scope), then `POST …/studio/summaries` | `summaryResponse` |
/// | `sendRevoke` | `POST …/studio/grants/{id}/revoke` | `revokeResponse` |
/// | `persistGrant` / `forgetGrant` | the account's `studio_grants` table (no content); a forget wins over a later persist | nothing |
struct StudioGrantInterpreter: EffectInterpreter {
    typealias Machine = StudioGrantMachine

    let service: StudioService
    let presenter: ConsentPresenterSlot
    let store: StudioStore
    let revocations: RevocationList
    private let logger = Logger(category: "studio")

    init(service: StudioService, presenter: ConsentPresenterSlot, store: StudioStore, revocations: RevocationList) {
        self.service = service
        self.presenter = presenter
        self.store = store
        self.revocations = revocations
    }

    func perform(
        _ effect: StudioGrantMachine.Effect, context: EffectContext<StudioGrantMachine.Event>
    ) async -> StudioGrantMachine.Event? {
        switch effect {
        case .presentConsent(let sheet):
            return .consentAnswered(await presenter.current.present(sheet))
        case .sendGrantRequest(let request):
            return .grantResponse(await service.createGrant(request, now: context.clock.now))
        case .sendSummarize(let content):
            // The last check, right before the content leaves.
            if Task.isCancelled { return nil }
            if let refusal = content.recheck(at: context.clock.now, revoked: revocations.all) {
                logger.notice("studio summary stopped on the device grant=\(content.grant.id)")
                return .summaryResponse(content.requestID, .failure(refusal))
            }
            // The service is the authority on the grant: another device of the member may have
            // revoked it, the service may have ended it on its clock. Nothing leaves until the
            // service says it is live (one request; a failure to ask sends nothing either).
            switch await service.check(content.grant.id) {
            case .success(.active): break
            case .success(.ended(let expired)):
                logger.notice("studio summary stopped: grant ended at the service grant=\(content.grant.id)")
                return .summaryResponse(content.requestID, .failure(expired ? .grantExpired : .grantRevoked))
            case .failure(let failure):
                return .summaryResponse(content.requestID, .failure(failure))
            }
            if Task.isCancelled { return nil }
            return .summaryResponse(content.requestID, await service.summarize(content))
        case .sendRevoke(let id):
            return .revokeResponse(await service.revoke(id))
        case .persistGrant(let grant):
            do throws(StoreError) { try await store.insert(grant) } catch {
                logger.error("could not record a studio grant error=\(error)")
            }
            return nil
        case .forgetGrant(let id):
            do throws(StoreError) { try await store.remove(id) } catch {
                logger.error("could not forget a studio grant error=\(error)")
            }
            return nil
        case .scheduleExpiry, .cancel:
            return nil
        }
    }
}
