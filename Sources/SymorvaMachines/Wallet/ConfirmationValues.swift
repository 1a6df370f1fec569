import SymorvaRuntime

/// A way the wallet service accepts a member's confirmation of a draft.
public enum VerificationMethod: String, Sendable, Hashable, CaseIterable {
    /// The member's wallet PIN, sealed to the service's public key on the device.
    case pin
    /// A biometric check by the platform (Face ID, Touch ID, fingerprint) through a
    /// `BiometricVerifier` adapter. Offered only when the service advertises it for the draft
    /// and the adapter is present; Linux has none.
    case biometric
}

/// The member's confirmation, as the product layer hands it to the machine.
///
/// A PIN is held in a ``/SymorvaRuntime/Secret`` from the keypad to the sealing effect and nowhere else: the
/// machine never keeps it in a state and never persists it.
public enum Verification: Sendable, Equatable {
    /// The PIN the member typed.
    case pin(Secret<String>)
    /// Ask the platform's biometric verifier.
    case biometric

    /// The method this confirmation uses.
    public var method: VerificationMethod {
        switch self {
        case .pin: .pin
        case .biometric: .biometric
        }
    }
}

/// A confirmation ready to leave the device: sealed to the service's public key.
///
/// For a PIN these are the bytes of `crypto_box_seal(payload, serverKey)` where the payload is
/// ``SealingContext/pinPayload(_:)``. For biometrics they are the verifier's assertion over the
/// same context, sealed the same way. Only the service can open them, and the payload names the
/// command and the draft, so the bytes are useless for any other confirmation.
public struct SealedVerification: Sendable, Equatable {
    /// How the member confirmed.
    public let method: VerificationMethod
    /// The sealed box. Redacted in every description even though it is ciphertext.
    public let sealedBytes: Secret<[UInt8]>

    /// Wraps sealed bytes.
    public init(method: VerificationMethod, sealedBytes: Secret<[UInt8]>) {
        self.method = method
        self.sealedBytes = sealedBytes
    }
}

/// What the sealing effect binds a confirmation to.
public struct SealingContext: Sendable, Hashable {
    /// The length of an X25519 public key, as `crypto_box_seal` expects it.
    public static let publicKeyLength = 32
    /// The first line of every sealed payload; the service refuses other versions.
    public static let payloadVersion = "symorva-wallet-confirm/1"

    /// The command being confirmed.
    public let commandID: CommandID
    /// The draft being confirmed.
    public let draftID: DraftID
    /// The service's public key to seal to.
    public let serverPublicKey: [UInt8]

    /// Creates a context.
    public init(commandID: CommandID, draftID: DraftID, serverPublicKey: [UInt8]) {
        self.commandID = commandID
        self.draftID = draftID
        self.serverPublicKey = serverPublicKey
    }

    /// The plaintext the device seals for a PIN confirmation, as UTF-8 lines:
    /// the version, the command ID, the draft ID, the PIN.
    ///
    /// Binding the command and the draft means that sealed bytes observed in transit cannot
    /// confirm anything else. The result stays a ``/SymorvaRuntime/Secret``; the interpreter seals it and drops it.
    public func pinPayload(_ pin: Secret<String>) -> Secret<[UInt8]> {
        pin.map { pin in
            Array([Self.payloadVersion, commandID.rawValue, draftID.rawValue, pin].joined(separator: "\n").utf8)
        }
    }

    /// Whether `pin` has the shape the service accepts: 4 to 12 ASCII digits.
    ///
    /// Checked on the device so that a typo never spends a command ID or an attempt.
    public static func isWellFormed(pin: Secret<String>) -> Bool {
        let bytes = pin.exposedValue.utf8
        return (4...12).contains(bytes.count) && bytes.allSatisfy { (0x30...0x39).contains($0) }
    }
}

/// Why the device could not produce a sealed confirmation. Nothing has left the device, so the
/// draft stays confirmable.
public enum VerificationError: Error, Sendable, Hashable {
    /// The service does not accept this method for the draft, or (biometrics) no verifier is present.
    case methodNotOffered
    /// The PIN is not 4 to 12 digits.
    case malformedPIN
    /// The member dismissed the biometric prompt.
    case biometricCancelled
    /// The biometric check did not recognise the member.
    case biometricFailed
    /// Sealing failed (a bad service key, or libsodium refused).
    case sealingFailed
}

/// Why a transfer did not happen, as the member is told.
public enum TransferFailure: Error, Sendable, Hashable {
    /// The PIN was wrong; the draft stays confirmable with a new command ID.
    case wrongPIN(attemptsLeft: Int)
    /// Too many wrong PINs: the wallet refuses confirmations for now.
    case lockedOut
    /// The balance does not cover the total.
    case insufficientFunds
    /// The draft expired before it was confirmed; prepare again.
    case draftExpired
    /// The recipient has no wallet in this community.
    case recipientUnknown
    /// The service refused the amount (zero, above a limit, wrong precision).
    case invalidAmount
    /// The asset is unknown to the service or not transferable.
    case assetUnknown
    /// The service's draft did not match the request or did not add up; it was never shown.
    case invalidDraft
    /// The service has no record of the command: the confirmation never arrived, and the
    /// service has now fenced its ID so that it can never execute. Prepare the transfer again.
    case notReceived
    /// The device could not produce a sealed confirmation; nothing left the device.
    case verification(VerificationError)
    /// The confirmation reused a command ID that already has an answer.
    case commandIDReused
    /// The command ID could not be written to the account's store, so nothing was sent.
    case storeUnavailable
    /// The wallet service could not be reached while preparing; nothing was committed.
    case serviceUnreachable(TransportProblem)
    /// The service refused the request for now: too many requests from this member
    /// (`SY_LIMIT_EXCEEDED`). It refuses before handling anything, so nothing happened. After a
    /// confirmation the draft stays confirmable (PIN again, new command ID), as after a wrong PIN
    /// but without costing an attempt; wait `retryAfter` (when the service said) first.
    case rateLimited(retryAfter: Duration?)
    /// Another refusal, by the service's error code.
    case rejected(code: String)
}

/// The wallet feature's error at the product boundary.
public enum TransferError: Error, Sendable, Hashable {
    /// The amount text or arithmetic is invalid.
    case amount(AmountError)
    /// The transfer did not happen, for this reason.
    case failure(TransferFailure)
    /// A request to the service failed in transport.
    case transport(TransportProblem)
    /// The account's store failed.
    case store(StoreFailure)
    /// An action that has no meaning in the transfer's current state.
    case invalidTransition(state: String, event: String)
    /// The caller stopped waiting (its task was cancelled, or the account's scope ended). A
    /// confirmation already sent goes on and is resolved by query.
    case cancelled
    /// No account is signed in: the wallet has no member to act for.
    case notSignedIn
    /// The handle belongs to an account that was switched away from or signed out: it never
    /// acts for the account that is active now.
    case accountEnded
}

/// The service's answer to a prepare request.
package enum PrepareResult: Sendable, Equatable {
    /// The service priced the transfer.
    case drafted(TransferDraft)
    /// The service refused to prepare it.
    case failed(TransferFailure)
    /// The request failed in transport; preparing is safe to try again.
    case transportError(TransportProblem)
}

/// The service's answer to a confirm request, or what the transport made of it.
package enum ConfirmResult: Sendable, Equatable {
    /// The money moved.
    case settled(Transfer)
    /// The service refused the command; the answer is definitive and the command is spent.
    /// ``TransferFailure/rateLimited(retryAfter:)`` is such a refusal: the service turned the
    /// request away before recording anything, so the command did not execute.
    case failed(TransferFailure)
    /// The service accepted the command but has not settled it yet; query until it has.
    case pending
    /// No usable answer: the command may or may not have executed.
    case transportError(TransportProblem)
}

/// The service's answer to a query by command ID, or what the transport made of it.
package enum QueryResult: Sendable, Equatable {
    /// The command executed and the money moved.
    case settled(Transfer)
    /// The command was refused.
    case failed(TransferFailure)
    /// The command is known but not settled yet.
    case pending
    /// The service has no record of the command (and fences the ID from now on).
    case unknownCommand
    /// The service refused the query for now (too many requests); the outcome is still unknown.
    /// Query again, not before `retryAfter`.
    case rateLimited(retryAfter: Duration?)
    /// The query failed in transport; query again later.
    case transportError(TransportProblem)
}
