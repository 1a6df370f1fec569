import SymorvaRuntime

/// A secret another device of this account asked this one for (`m.secret.request`).
package struct IncomingSecretRequest: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The asking device (of this account; the engine drops other users' requests).
    package var deviceID: String
    /// The request's ID: the answer (`m.secret.send`) and a cancellation carry it.
    package var requestID: String
    /// The secret's name (`m.cross_signing.master`, …, `m.megolm_backup.v1`).
    package var name: String

    /// A request.
    package init(deviceID: String, requestID: String, name: String) {
        self.deviceID = deviceID
        self.requestID = requestID
        self.name = name
    }

    /// Whether it is the request `requestID` of `deviceID` (what a cancellation names).
    package func isRequest(_ requestID: String, of deviceID: String) -> Bool {
        self.requestID == requestID && self.deviceID == deviceID
    }

    package var description: String { "\(deviceID)/\(requestID) \(name)" }
}

/// What the interpreter found out about a request before it may be answered: the machine
/// decides from these facts.
package struct SecretRequestCheck: Sendable, Hashable {
    /// The request checked.
    package var request: IncomingSecretRequest
    /// The asking device is another device of this account that the account cross-signed (or
    /// this device verified), its keys as stored and not changed, after a fresh `keys/query`
    /// when the stored list did not say so.
    package var fromOwnCrossSignedDevice: Bool
    /// This device holds the secret (a cross-signing key, or the key of the backup in use).
    package var secretHeld: Bool

    /// A check.
    package init(request: IncomingSecretRequest, fromOwnCrossSignedDevice: Bool, secretHeld: Bool) {
        self.request = request
        self.fromOwnCrossSignedDevice = fromOwnCrossSignedDevice
        self.secretHeld = secretHeld
    }
}

/// This device answering the secret requests of the account's other devices (the spec's
/// `m.secret.request` / `m.secret.send`, answering side), one batch at a time.
///
/// ```
/// idle ─requestReceived→ checking ─requestsChecked (some answerable)→ answering ─answersSent→ idle (or checking the next batch)
///                            └────requestsChecked (none answerable)──────────────────────→ idle (or checking the next batch)
/// ```
///
/// The machine owns the rules: a request is answered only when its device is another of the
/// account's cross-signed devices and this device holds the secret, only over Olm (the
/// interpreter's ``Effect/sendAnswers(_:)``), and not once the device cancelled it
/// (`request_cancellation`): a cancelled request still queued is dropped, one being checked is
/// not answered. The engine stores each request in the transaction that takes in its to-device
/// event (and deletes it with its cancellation); the machine's ``Effect/forgetRequests(_:)``
/// deletes what is done (answered, refused, cancelled). At start the stored requests are the
/// host's initial `checking` batch and ``Event/restored`` checks them again: a request that
/// arrived but was not answered before a restart is answered after it.
package struct SecretAnswerMachine: StateMachine {
    package static let name = "SecretAnswer"

    /// A machine.
    package init() {}

    /// Keys of the machine's cancellable effects.
    package enum Keys {
        /// The batch's check.
        package static let check = EffectKey("crypto.secretAnswer.check")
        /// The batch's answers being sent.
        package static let send = EffectKey("crypto.secretAnswer.send")
    }

    /// Where the answering is.
    package enum State: Sendable, Equatable, CaseNamed {
        /// No request waits.
        case idle
        /// `batch` is being checked (devices, held secrets); `queued` arrived meanwhile.
        case checking(batch: [IncomingSecretRequest], queued: [IncomingSecretRequest])
        /// The answers to `batch` are being sent over Olm; `queued` arrived meanwhile.
        case answering(batch: [IncomingSecretRequest], queued: [IncomingSecretRequest])

        /// Every state case name, in declaration order: the chart's state ids.
        package static let caseNames = ["idle", "checking", "answering"]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .checking: "checking"
            case .answering: "answering"
            }
        }

        /// The requests not done yet: the batch, then the queue.
        package var pending: [IncomingSecretRequest] {
            switch self {
            case .idle: []
            case .checking(let batch, let queued), .answering(let batch, let queued): batch + queued
            }
        }
    }

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// Another device of the account asked for a secret this SDK shares (already stored).
        case requestReceived(IncomingSecretRequest)
        /// That device cancelled its request `requestID` (`request_cancellation`).
        case cancellationReceived(deviceID: String, requestID: String)
        /// The batch's facts, one check per request of the batch.
        case requestsChecked([SecretRequestCheck])
        /// The answers were sent (`failure` nil), or could not be (the asking device asks again).
        case answersSent(failure: TransportProblem?)
        /// The host started with the stored requests as its state: check them again.
        case restored

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "requestReceived", "cancellationReceived", "requestsChecked", "answersSent", "restored",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .requestReceived: "requestReceived"
            case .cancellationReceived: "cancellationReceived"
            case .requestsChecked: "requestsChecked"
            case .answersSent: "answersSent"
            case .restored: "restored"
            }
        }

        package var description: String { caseName }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Find out, for each request, whether its device is another own cross-signed device
        /// (a `keys/query` of the account first when the stored list does not say so) and
        /// whether this device holds the secret; answers ``Event/requestsChecked(_:)``.
        case checkRequests([IncomingSecretRequest])
        /// Send each request's secret, read from where this device keeps it, Olm-encrypted to
        /// its device (a `keys/claim` first for a device without an Olm session), transaction
        /// IDs made from the request IDs; answers ``Event/answersSent(failure:)``.
        case sendAnswers([IncomingSecretRequest])
        /// Delete these requests from the crypto store: answered, refused or cancelled.
        case forgetRequests([IncomingSecretRequest])

        package var directive: EffectDirective {
            switch self {
            case .checkRequests: .keyed(Keys.check)
            case .sendAnswers: .keyed(Keys.send)
            case .forgetRequests: .perform
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = ["checkRequests", "sendAnswers", "forgetRequests"]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .checkRequests: "checkRequests"
            case .sendAnswers: "sendAnswers"
            case .forgetRequests: "forgetRequests"
            }
        }

        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.idle, .requestReceived(let request)):
            return .move(to: .checking(batch: [request], queued: []), effects: [.checkRequests([request])])
        case (.checking(let batch, let queued), .requestReceived(let request)):
            guard !(batch + queued).contains(where: { $0.isRequest(request.requestID, of: request.deviceID) }) else {
                return .stay  // the same request again (a resend): one answer
            }
            return .move(to: .checking(batch: batch, queued: queued + [request]))
        case (.answering(let batch, let queued), .requestReceived(let request)):
            guard !(batch + queued).contains(where: { $0.isRequest(request.requestID, of: request.deviceID) }) else {
                return .stay
            }
            return .move(to: .answering(batch: batch, queued: queued + [request]))

        case (.checking(let batch, let queued), .cancellationReceived(let device, let id)):
            // One being checked is not answered (its check's result is ignored).
            guard let (batch, queued, gone) = withdraw(id, of: device, batch: batch, queued: queued) else {
                return .stay
            }
            return .move(to: .checking(batch: batch, queued: queued), effects: [.forgetRequests([gone])])
        case (.answering(let batch, let queued), .cancellationReceived(let device, let id)):
            // One whose answer is on its way cannot be called back; one queued is dropped.
            guard let (batch, queued, gone) = withdraw(id, of: device, batch: batch, queued: queued) else {
                return .stay
            }
            return .move(to: .answering(batch: batch, queued: queued), effects: [.forgetRequests([gone])])

        case (.checking(let batch, let queued), .requestsChecked(let checks)):
            let answerable = batch.filter { request in
                checks.contains { $0.request == request && $0.fromOwnCrossSignedDevice && $0.secretHeld }
            }
            let refused = batch.filter { !answerable.contains($0) }
            if answerable.isEmpty { return next(queued, forgetting: refused) }
            return .move(
                to: .answering(batch: answerable, queued: queued),
                effects: (refused.isEmpty ? [] : [.forgetRequests(refused)]) + [.sendAnswers(answerable)])

        case (.answering(let batch, let queued), .answersSent):
            // Sent or not, the batch is done: a device whose answer was lost asks again.
            return next(queued, forgetting: batch)

        case (.checking(let batch, let queued), .restored), (.answering(let batch, let queued), .restored):
            // Stored, not answered yet: checked again (a device may have lost its trust meanwhile).
            let all = batch + queued
            return .move(to: .checking(batch: all, queued: []), effects: [.checkRequests(all)])

        case (.idle, .cancellationReceived), (.idle, .requestsChecked), (.idle, .answersSent), (.idle, .restored),
            (.checking, .answersSent), (.answering, .requestsChecked):
            return .ignored
        }
    }

    /// The batch is done: `done` leaves the store, and the queue (if any) is checked next.
    private func next(_ queued: [IncomingSecretRequest], forgetting done: [IncomingSecretRequest])
        -> Transition<State, Effect>
    {
        let forget: [Effect] = done.isEmpty ? [] : [.forgetRequests(done)]
        guard !queued.isEmpty else { return .move(to: .idle, effects: forget) }
        return .move(to: .checking(batch: queued, queued: []), effects: forget + [.checkRequests(queued)])
    }

    /// The batch and queue without request `id` of `device`, and that request; `nil` when
    /// neither holds it.
    private func withdraw(
        _ id: String, of device: String, batch: [IncomingSecretRequest], queued: [IncomingSecretRequest]
    ) -> ([IncomingSecretRequest], [IncomingSecretRequest], IncomingSecretRequest)? {
        guard let gone = (batch + queued).first(where: { $0.isRequest(id, of: device) }) else { return nil }
        return (batch.filter { $0 != gone }, queued.filter { $0 != gone }, gone)
    }
}

extension SecretAnswerMachine: ChartedMachine {}

extension SecretAnswerMachine.State: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension SecretAnswerMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}
