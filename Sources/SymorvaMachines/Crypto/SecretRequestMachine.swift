import SymorvaRuntime

/// One secret this device asked its own other devices for (`m.secret.request`).
package struct SecretRequest: Sendable, Hashable, Codable {
    /// The request's ID: an answer (`m.secret.send`) and the cancellation carry it.
    package var requestID: String
    /// The secret's name (`m.cross_signing.master`, …, `m.megolm_backup.v1`).
    package var name: String

    /// A request.
    package init(requestID: String, name: String) {
        self.requestID = requestID
        self.name = name
    }
}

/// One round of secret requests: what was asked, of which devices, until when, and which
/// secrets have been accepted. It is what the crypto store keeps, so that a restart resumes
/// the round or cancels it.
package struct SecretRequestRound: Sendable, Hashable, Codable {
    /// The requests of the round, one per secret.
    package var requests: [SecretRequest]
    /// The other devices of the account asked (each cross-signed by the account when asked).
    package var deviceIDs: [String]
    /// When the round gives up on the secrets still missing.
    package var deadline: Timestamp
    /// The names of the secrets accepted so far, in arrival order.
    package var received: [String]

    /// A round that has received nothing yet.
    package init(requests: [SecretRequest], deviceIDs: [String], deadline: Timestamp, received: [String] = []) {
        self.requests = requests
        self.deviceIDs = deviceIDs
        self.deadline = deadline
        self.received = received
    }

    /// The requests still without an accepted answer.
    package var open: [SecretRequest] { requests.filter { !received.contains($0.name) } }
}

/// What an `m.secret.send` that arrived for this device was, as the engine found it: the
/// machine decides from these facts whether the secret is accepted.
package struct SecretArrival: Sendable, Hashable, CustomStringConvertible {
    /// The request it answers.
    package var requestID: String
    /// It came Olm-encrypted (an unencrypted `m.secret.send` is never accepted).
    package var overOlm: Bool
    /// It came from another device of this account that the account cross-signed (keys as stored,
    /// not changed), addressed to this device's keys.
    package var fromOwnCrossSignedDevice: Bool
    /// The secret matches the public key the server lists for it (the cross-signing identity or
    /// the backup version's `auth_data`).
    package var matchesPublicKey: Bool
    /// The secret itself, as sent.
    package var secret: Secret<String>

    /// An arrival.
    package init(
        requestID: String, overOlm: Bool, fromOwnCrossSignedDevice: Bool, matchesPublicKey: Bool,
        secret: Secret<String>
    ) {
        self.requestID = requestID
        self.overOlm = overOlm
        self.fromOwnCrossSignedDevice = fromOwnCrossSignedDevice
        self.matchesPublicKey = matchesPublicKey
        self.secret = secret
    }

    /// No secret: the request ID and the checks only.
    package var description: String {
        "SecretArrival(olm: \(overOlm), crossSigned: \(fromOwnCrossSignedDevice), matches: \(matchesPublicKey))"
    }
}

/// Why a round of secret requests ended.
package enum SecretRequestEnd: Sendable, Hashable, Codable {
    /// Every secret asked for was accepted.
    case allReceived
    /// The deadline passed first (what arrived before it is kept).
    case timedOut
    /// The requests could not be sent.
    case sendFailed
    /// The account stopped (or the caller gave up) before the end.
    case cancelled
}

/// This device asking its own other devices for secrets (the spec's `m.secret.request` /
/// `m.secret.send`), from the request to the cancellation of what is still open.
///
/// ```
/// idle ─requested→ sending ─requestsSent→ waiting ─secretArrived (last one) / timedOut / cancelRequested→ cancelling ─cancellationsSent→ finished
///                      └───────────────requestsSent (failure)──────────────────────────────────────────────────────────────→ finished
/// ```
///
/// The machine owns the rules: a secret is accepted only over Olm, only from another of the
/// account's cross-signed devices, only for a request of the current round not answered yet,
/// and only when it matches the public key the server lists. Every state change that matters
/// after a restart comes with an effect that writes the round to the crypto store in the same
/// transaction as its I/O (``Effect/sendRequests(_:)``, ``Effect/keepSecret(name:secret:round:)``,
/// ``Effect/sendCancellations(_:_:)``, ``Effect/forgetRound``); on
/// ``Event/restored(now:)`` a round found in the store is sent again (same request IDs, so
/// devices see one request), waited for until its deadline, or cancelled when the deadline has
/// passed.
package struct SecretRequestMachine: StateMachine {
    package static let name = "SecretRequest"

    /// A machine.
    package init() {}

    /// Keys of the machine's cancellable effects.
    package enum Keys {
        /// The requests or cancellations being sent.
        package static let send = EffectKey("crypto.secretRequest.send")
        /// The round's deadline.
        package static let deadline = EffectKey("crypto.secretRequest.deadline")
    }

    /// Where the round is.
    package enum State: Sendable, Equatable, CaseNamed {
        /// No round: nothing asked, nothing pending.
        case idle
        /// The round is stored and its requests are being sent to the other devices.
        case sending(SecretRequestRound)
        /// The requests are out: answers are taken until every secret arrived or the deadline.
        case waiting(SecretRequestRound)
        /// The requests still open are being cancelled (`request_cancellation`).
        case cancelling(SecretRequestRound, SecretRequestEnd)
        /// The round ended; `received` are the names of the secrets accepted (kept sealed).
        case finished(received: [String], SecretRequestEnd)

        /// Every state case name, in declaration order: the chart's state ids.
        package static let caseNames = ["idle", "sending", "waiting", "cancelling", "finished"]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .sending: "sending"
            case .waiting: "waiting"
            case .cancelling: "cancelling"
            case .finished: "finished"
            }
        }
    }

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The caller asks for these secrets (request IDs made by the host, devices chosen by
        /// the account's trust; a round in flight is kept and the caller waits for it).
        case requested(SecretRequestRound)
        /// The requests were stored and sent (`failure` nil), or could not be sent.
        case requestsSent(failure: TransportProblem?)
        /// An `m.secret.send` for this device arrived, with what the engine checked.
        case secretArrived(SecretArrival)
        /// The round's deadline passed.
        case timedOut
        /// The caller gives up (the account stops): what is open is cancelled.
        case cancelRequested
        /// The cancellations were sent (or could not be: devices drop requests of their own).
        case cancellationsSent
        /// The host started and read the stored round into the state; `now` is the wall time.
        case restored(now: Timestamp)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = [
            "requested", "requestsSent", "secretArrived", "timedOut", "cancelRequested", "cancellationsSent",
            "restored",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .requested: "requested"
            case .requestsSent: "requestsSent"
            case .secretArrived: "secretArrived"
            case .timedOut: "timedOut"
            case .cancelRequested: "cancelRequested"
            case .cancellationsSent: "cancellationsSent"
            case .restored: "restored"
            }
        }

        /// The case name only: an arrival carries a secret.
        package var description: String { caseName }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// Store the round (replacing any stored one) and send one unencrypted
        /// `m.secret.request` per request to each of its devices, transaction IDs made from the
        /// request IDs (a resend is one request); answers ``Event/requestsSent(_:)``.
        case sendRequests(SecretRequestRound)
        /// Fire ``Event/timedOut`` at the round's deadline (a wall-clock timer: it holds across a
        /// restart because the deadline is stored with the round).
        case scheduleTimeout(Timestamp)
        /// Stop the deadline's timer: the round left `waiting`.
        case cancelTimeout
        /// Keep the accepted secret sealed and store the round that lists it (in the phase stored),
        /// in one transaction.
        case keepSecret(name: String, secret: Secret<String>, round: SecretRequestRound)
        /// Store the round as cancelling (and why) and send `request_cancellation` for every request of the
        /// round to each of its devices (the spec: once a secret arrived, the other devices must
        /// stop; when the deadline passed, all of them); answers ``Event/cancellationsSent``.
        case sendCancellations(SecretRequestRound, SecretRequestEnd)
        /// Delete the stored round: nothing is pending any more.
        case forgetRound

        package var directive: EffectDirective {
            switch self {
            case .sendRequests, .sendCancellations: .keyed(Keys.send)
            case .scheduleTimeout(let deadline): .timer(Keys.deadline, .atWallTime(deadline))
            case .cancelTimeout: .cancel(Keys.deadline)
            case .keepSecret, .forgetRound: .perform
            }
        }

        /// Every effect case name, in declaration order.
        package static let caseNames = [
            "sendRequests", "scheduleTimeout", "cancelTimeout", "keepSecret", "sendCancellations", "forgetRound",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .sendRequests: "sendRequests"
            case .scheduleTimeout: "scheduleTimeout"
            case .cancelTimeout: "cancelTimeout"
            case .keepSecret: "keepSecret"
            case .sendCancellations: "sendCancellations"
            case .forgetRound: "forgetRound"
            }
        }

        /// The case name only: ``keepSecret(name:secret:round:)`` carries a secret.
        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }

    package func event(firing timer: Effect) -> Event? {
        if case .scheduleTimeout = timer { return .timedOut }
        return nil
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.idle, .requested(let round)), (.finished, .requested(let round)):
            return .move(to: .sending(round), effects: [.sendRequests(round)])
        case (.sending, .requested), (.waiting, .requested), (.cancelling, .requested):
            return .stay  // a round is in flight: the caller waits for its end

        case (.sending(let round), .requestsSent(failure: nil)):
            // Answers may come before the last request left: all of them already kept ends the round.
            if round.open.isEmpty { return cancel(round, because: .allReceived) }
            return .move(to: .waiting(round), effects: [.scheduleTimeout(round.deadline)])
        case (.sending(let round), .requestsSent):
            return .move(to: .finished(received: round.received, .sendFailed), effects: [.forgetRound])

        case (.waiting(let round), .secretArrived(let arrival)):
            return accept(arrival, in: round)
        case (.sending(let round), .secretArrived(let arrival)):
            // A device answered a request while the next ones were still being sent: kept, the
            // round ends once the requests are out.
            return accept(arrival, inSending: round)

        case (.waiting(let round), .timedOut):
            return cancel(round, because: .timedOut)
        case (.sending(let round), .cancelRequested), (.waiting(let round), .cancelRequested):
            return cancel(round, because: .cancelled)

        case (.cancelling(let round, let end), .cancellationsSent):
            return .move(to: .finished(received: round.received, end), effects: [.forgetRound])

        case (.sending(let round), .restored):
            return .move(to: .sending(round), effects: [.sendRequests(round)])
        case (.waiting(let round), .restored(let now)):
            // Every secret may have been kept just before the stop, the cancellations not stored yet.
            if round.open.isEmpty { return cancel(round, because: .allReceived) }
            if now >= round.deadline { return cancel(round, because: .timedOut) }
            return .move(to: .waiting(round), effects: [.scheduleTimeout(round.deadline)])
        case (.cancelling(let round, let end), .restored):
            return .move(to: .cancelling(round, end), effects: [.sendCancellations(round, end)])

        case (.idle, .requestsSent), (.idle, .secretArrived), (.idle, .timedOut), (.idle, .cancelRequested),
            (.idle, .cancellationsSent), (.idle, .restored),
            (.sending, .timedOut), (.sending, .cancellationsSent),
            (.waiting, .requestsSent), (.waiting, .cancellationsSent),
            (.cancelling, .requestsSent), (.cancelling, .secretArrived), (.cancelling, .timedOut),
            (.cancelling, .cancelRequested),
            (.finished, .requestsSent), (.finished, .secretArrived), (.finished, .timedOut),
            (.finished, .cancelRequested), (.finished, .cancellationsSent), (.finished, .restored):
            return .ignored
        }
    }

    /// Takes a secret that passes every check and answers a request of the round still open;
    /// the last one ends the round. Anything else is dropped (the round waits on).
    private func accept(_ arrival: SecretArrival, in round: SecretRequestRound) -> Transition<State, Effect> {
        guard arrival.overOlm, arrival.fromOwnCrossSignedDevice, arrival.matchesPublicKey,
            let request = round.open.first(where: { $0.requestID == arrival.requestID })
        else { return .stay }
        var next = round
        next.received.append(request.name)
        let keep = Effect.keepSecret(name: request.name, secret: arrival.secret, round: next)
        guard next.open.isEmpty else { return .move(to: .waiting(next), effects: [keep]) }
        return .move(
            to: .cancelling(next, .allReceived),
            effects: [keep, .cancelTimeout, .sendCancellations(next, .allReceived)])
    }

    /// ``accept(_:in:)`` while the requests are being sent: the round stays `sending`.
    private func accept(_ arrival: SecretArrival, inSending round: SecretRequestRound) -> Transition<State, Effect> {
        guard arrival.overOlm, arrival.fromOwnCrossSignedDevice, arrival.matchesPublicKey,
            let request = round.open.first(where: { $0.requestID == arrival.requestID })
        else { return .stay }
        var next = round
        next.received.append(request.name)
        return .move(
            to: .sending(next), effects: [.keepSecret(name: request.name, secret: arrival.secret, round: next)])
    }

    /// Ends the wait: every request of the round is cancelled at every device asked.
    private func cancel(_ round: SecretRequestRound, because end: SecretRequestEnd) -> Transition<State, Effect> {
        .move(to: .cancelling(round, end), effects: [.cancelTimeout, .sendCancellations(round, end)])
    }
}

extension SecretRequestMachine: ChartedMachine {}

extension SecretRequestMachine.State: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}

extension SecretRequestMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}
