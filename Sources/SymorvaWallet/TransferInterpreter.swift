import SymorvaCrypto
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaStore

/// Performs ``TransferMachine``'s effects: the wallet service over ``CommunityServicesClient``,
/// the account's ``WalletStore`` and libsodium sealing; its timers are performed by the host.
///
/// | effect | performed as | answers |
/// | --- | --- | --- |
/// | `sendPrepare` | `POST …/transfers/prepare` | `prepareResponse` (4xx → `failed`, other failures → `transportError`) |
/// | `scheduleDraftExpiry(at:)` | a timer the host performs (state timeout) | `draftExpired` |
/// | `sealVerification` | `crypto_box_seal(pinPayload, draft key)` | `verificationSealed` |
/// | `persistPendingCommand` | insert into `wallet_pending_commands` | `commandPersisted` / `persistenceFailed` |
/// | `sendConfirm` | `POST …/transfers/confirm`, once, never retried | `confirmResponse` (see ``WalletService``) |
/// | `sendQuery` | `GET …/commands/{id}` | `queryResponse` (any failure → `transportError`) |
/// | `scheduleQuery(after:)` | a timer the host performs (state timeout) | `timerFired(.query)` |
/// | `clearPendingCommand` | delete the row | nothing |
///
/// The host runs each effect in its own task. Cancelling a keyed request (the machine left the
/// state, or the member cancelled) makes the transfer end early, and the host drops whatever
/// comes back. `sendConfirm` and the store effects are never cancelled by the
/// machine; only the end of the account scope stops them, and then their results are stale.
package struct TransferInterpreter: EffectInterpreter {
    /// The machine whose effects this interpreter performs.
    package typealias Machine = TransferMachine

    let service: WalletService
    let store: WalletStore
    private let logger = Logger(category: "wallet")

    /// Creates an interpreter for one account.
    ///
    /// - Parameters:
    ///   - services: the account's authenticated services client.
    ///   - store: the account's pending-command store.
    ///   - requestTimeout: the total time allowed for each request to the service. A confirm that
    ///     times out is unknown and is queried.
    ///   - draftLifetime: a draft lifetime to ask the service for, or `nil` for the service's own.
    ///     The reference server honours it only in test mode.
    package init(
        services: CommunityServicesClient, store: WalletStore, requestTimeout: Duration = .seconds(30),
        draftLifetime: Duration? = nil
    ) {
        self.service = WalletService(services: services, requestTimeout: requestTimeout, draftLifetime: draftLifetime)
        self.store = store
    }

    package func perform(
        _ effect: TransferMachine.Effect, context: EffectContext<TransferMachine.Event>
    ) async -> TransferMachine.Event? {
        switch effect {
        case .sendPrepare(let request):
            return .prepareResponse(await service.prepare(request, now: context.clock.now))
        case .sealVerification(let verification, let sealingContext):
            return .verificationSealed(Self.seal(verification, for: sealingContext))
        case .persistPendingCommand(let pending):
            return await persist(pending)
        case .sendConfirm(let commandID, let draftID, let verification):
            FaultPoint.walletCommandPersisted.reach()
            let result = await service.confirm(commandID: commandID, draftID: draftID, verification: verification)
            logger.info("wallet confirm answered outcome=\(LogLabel(Self.label(result)))")
            return .confirmResponse(result)
        case .sendQuery(let commandID):
            return .queryResponse(await service.query(commandID))
        case .clearPendingCommand(let commandID):
            do throws(StoreError) {
                try await store.remove(commandID)
            } catch {
                // The row stays; the next launch queries the command again and gets the same answer.
                logger.error("could not clear a resolved wallet command error=\(error)")
            }
            return nil
        case .scheduleDraftExpiry, .scheduleQuery, .cancel:
            // The host performs timers and cancellations itself; the interpreter never sees them.
            return nil
        }
    }

    // MARK: Sealing

    /// Seals the member's confirmation to the draft's key. The PIN leaves its ``Secret`` only
    /// inside this function, as the payload handed to libsodium.
    static func seal(
        _ verification: Verification, for context: SealingContext
    ) -> Result<SealedVerification, VerificationError> {
        switch verification {
        case .pin(let pin):
            let payload = context.pinPayload(pin)
            do {
                let sealed = try SealedBox.seal(payload.exposedValue, recipientPublicKey: context.serverPublicKey)
                return .success(SealedVerification(method: .pin, sealedBytes: Secret(sealed)))
            } catch {
                return .failure(.sealingFailed)
            }
        case .biometric:
            // No biometric verifier adapter exists yet (and never on Linux): the machine only
            // offers biometrics when one is present, so reaching this is a configuration error.
            return .failure(.methodNotOffered)
        }
    }

    // MARK: Store

    private func persist(_ pending: PendingCommand) async -> TransferMachine.Event {
        do throws(StoreError) {
            try await store.insert(pending)
            return .commandPersisted
        } catch {
            logger.error("could not record a wallet command before confirming error=\(error)")
            return .persistenceFailed
        }
    }

    private static func label(_ result: ConfirmResult) -> String {
        switch result {
        case .settled: "settled"
        case .failed: "failed"
        case .pending: "pending"
        case .transportError(let problem): "transportError.\(caseLabel(of: problem))"
        }
    }
}
