import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Performs the SecretRequest machine's effects: the round's writes to the crypto store (each
/// before the messages it stands for) and the `m.secret.request` messages to our own devices.
/// Timers are the host's.
struct SecretRequestInterpreter: EffectInterpreter {
    typealias Machine = SecretRequestMachine

    let store: CryptoStore
    let crypto: CryptoInterpreter
    let userID: UserID
    let deviceID: DeviceID
    let logger: Logger

    func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event? {
        switch effect {
        case .sendRequests(let round):
            do throws(CryptoStoreError) { try await store.saveSecretRequestState(.sending(round)) } catch {
                logger.error("secret requests not stored error=\(error)")
                return .requestsSent(failure: .unreachable)
            }
            for request in round.requests {
                guard await send(request, cancel: false, to: round.deviceIDs) else {
                    return .requestsSent(failure: .unreachable)
                }
            }
            return .requestsSent(failure: nil)
        case .keepSecret(let name, let secret, let round):
            do throws(CryptoStoreError) {
                try await store.keepReceivedSecret(name: name, secret: secret, round: round)
            } catch { logger.error("secret received not kept error=\(error)") }
            return nil
        case .sendCancellations(let round, let end):
            do throws(CryptoStoreError) { try await store.saveSecretRequestState(.cancelling(round, end)) } catch {
                logger.error("secret request cancellation not stored error=\(error)")
            }
            // Best effort: a device that missed it answers a request nobody waits for.
            for request in round.requests { _ = await send(request, cancel: true, to: round.deviceIDs) }
            return .cancellationsSent
        case .forgetRound:
            do throws(CryptoStoreError) { try await store.saveSecretRequestState(.idle) } catch {
                logger.error("secret request round not forgotten error=\(error)")
            }
            return nil
        case .scheduleTimeout, .cancelTimeout:
            return nil  // the host's timer
        }
    }

    /// One `m.secret.request` (or its cancellation) to each of `devices`; the transaction ID is
    /// made from the request ID, so a resend after a restart is the same request.
    private func send(_ request: SecretRequest, cancel: Bool, to devices: [String]) async -> Bool {
        var content: [String: JSONValue] = [
            "action": .string(cancel ? "request_cancellation" : "request"), "request_id": .string(request.requestID),
            "requesting_device_id": .string(deviceID.rawValue),
        ]
        if !cancel { content["name"] = .string(request.name) }
        let messages = [
            userID.rawValue: Dictionary(uniqueKeysWithValues: devices.map { ($0, JSONValue.object(content)) })
        ]
        let transactionID = TransactionID("\(cancel ? "src" : "srq")-\(request.requestID)")
        return await crypto.sendToDevice("m.secret.request", messages, transactionID: transactionID) == nil
    }
}
