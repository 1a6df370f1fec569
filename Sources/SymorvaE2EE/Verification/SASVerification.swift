import SymorvaMachines
import SymorvaRuntime

/// Where an interactive verification is, as an app shows it.
public enum SASVerificationState: Sendable, Hashable {
    /// We asked the other side; waiting for one of its devices to answer.
    case requested
    /// The other side asks to verify: ``SASVerification/accept()`` or ``SASVerification/cancel()``.
    case incoming
    /// Both sides are ready; ``SASVerification/startSAS()`` starts the emoji comparison.
    case ready
    /// Keys are being exchanged.
    case exchangingKeys
    /// Both devices show this code: the person compares and answers with
    /// ``SASVerification/confirm()`` or ``SASVerification/mismatch()``.
    case showingCode(emoji: [VerificationEmoji], decimals: [Int])
    /// The person confirmed (or scanned the other device's QR code, and its keys matched);
    /// waiting for the other side.
    case confirmed
    /// The other device scanned this device's QR code (``SASVerification/qrCode()``) and proved
    /// it: the person confirms they saw it scan with ``SASVerification/confirm()``, or not with
    /// ``SASVerification/mismatch()`` (cancelled `m.user`).
    case otherDeviceScanned
    /// The other device (or user) is verified and signed.
    case verified
    /// The verification ended without success: `code` is the spec's cancel code (`m.user`,
    /// `m.timeout`, `m.mismatched_sas`, …), `byUs` whether this side cancelled.
    case cancelled(code: String, byUs: Bool)
}

/// One emoji of the short authentication string (the spec's table).
public struct VerificationEmoji: Sendable, Hashable {
    /// The emoji character.
    public let character: String
    /// Its English name in the spec's table (`Dog`, `Thumbs Up`).
    public let description: String
}

/// Why a verification action failed.
public enum KeyVerificationError: Error, Sendable, Hashable {
    /// The user or device is not one this account tracks (no shared encrypted room, or an
    /// unknown device), so its keys are not known.
    case unknownDevice
    /// The account's crypto is not ready (keys not published yet).
    case notReady
    /// The request could not be sent.
    case unavailable
    /// The bytes scanned are not a verification QR code (the flow goes on).
    case invalidQRCode
}

/// One interactive verification (emoji or decimals, `m.sas.v1`, or a QR code either way) with
/// another device or user, incoming or started here. The app observes ``state`` and answers with the person's choices.
public final class SASVerification: Sendable {
    /// The flow's transaction ID.
    public let transactionID: String
    /// The user being verified (this account for one of its own devices).
    public let otherUserID: UserID
    /// Where the flow is.
    public var state: ObservableValue<SASVerificationState> { publisher.observable }
    /// The other device, once known (a request to every device learns it from the answer).
    public var otherDeviceID: DeviceID? { device.withLock { $0 } }

    let device = Lock<DeviceID?>(nil)

    let publisher: ObservableValue<SASVerificationState>.Publisher
    private let center: VerificationCenter

    init(transactionID: String, otherUserID: UserID, initial: SASVerificationState, center: VerificationCenter) {
        self.transactionID = transactionID
        self.otherUserID = otherUserID
        publisher = .init(initial)
        self.center = center
    }

    /// Accepts an incoming request (sends `ready`) or an incoming start (sends `accept`).
    public func accept() async { await center.handle(.acceptAsked, in: transactionID) }
    /// Starts the emoji comparison on a ready flow.
    public func startSAS() async { await center.handle(.sasAsked, in: transactionID) }
    /// The person says both devices show the same code.
    public func confirm() async { await center.handle(.codeCompared(matches: true), in: transactionID) }
    /// The person says the codes differ: the flow is cancelled (`m.mismatched_sas`).
    public func mismatch() async { await center.handle(.codeCompared(matches: false), in: transactionID) }
    /// Cancels the flow (`m.user`).
    public func cancel() async { await center.handle(.cancelAsked, in: transactionID) }

    /// The QR code this device shows for a ready flow: the bytes of the spec's payload, which
    /// the app renders as an image for the other device to scan (made once per flow, with a
    /// fresh secret). Mode `0x00` for another user, `0x01` or `0x02` for an own device (whether
    /// this device holds the cross-signing keys). `nil` when the flow is not ready or a key the
    /// code needs is missing (another user without a cross-signing identity, or ours).
    public func qrCode() async -> [UInt8]? { await center.qrCode(in: transactionID) }

    /// The bytes the app scanned from the other device's QR code, on a ready flow. Keys that
    /// match send `m.reciprocate.v1` (``SASVerificationState/confirmed``; verified once the
    /// other side confirms); keys that do not cancel the flow (`m.key_mismatch`).
    ///
    /// - Throws: ``KeyVerificationError/invalidQRCode`` when the bytes are no verification
    ///   code (the flow is unchanged).
    public func scanned(_ bytes: [UInt8]) async throws(KeyVerificationError) {
        try await center.scanned(bytes, in: transactionID)
    }

    static func appState(_ state: VerificationMachine.State) -> SASVerificationState {
        switch state {
        case .idle, .requested: .requested
        case .requestReceived, .startReceived: .incoming
        case .ready: .ready
        case .started, .accepted, .keySent: .exchangingKeys
        case .comparing(let progress):
            if let code = progress.code {
                .showingCode(
                    emoji: code.emoji.map { VerificationEmoji(character: $0.character, description: $0.description) },
                    decimals: code.decimals)
            } else {
                .exchangingKeys
            }
        case .macSent, .awaitingDone: .confirmed
        case .reciprocating, .scanConfirmed: .confirmed
        case .scanned: .otherDeviceScanned
        case .verified: .verified
        case .cancelled(_, let code, let byUs): .cancelled(code: code.rawValue, byUs: byUs)
        }
    }
}
