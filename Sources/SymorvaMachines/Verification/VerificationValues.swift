import SymorvaRuntime

/// Why a verification ended without success: the `code` of `m.key.verification.cancel`.
///
/// A code a peer sends that the spec does not list is kept as it came (``rawValue``), so an app
/// can show it.
package struct VerificationCancelCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code as on the wire, `m.user`.
    package let rawValue: String

    package init(rawValue: String) { self.rawValue = rawValue }

    /// A person cancelled.
    package static let user = VerificationCancelCode(rawValue: "m.user")
    /// The flow took too long (10 minutes overall, 2 minutes for a request to be answered).
    package static let timeout = VerificationCancelCode(rawValue: "m.timeout")
    /// The transaction is not one this device knows.
    package static let unknownTransaction = VerificationCancelCode(rawValue: "m.unknown_transaction")
    /// No method, key agreement, hash, MAC or short-code method both sides support.
    package static let unknownMethod = VerificationCancelCode(rawValue: "m.unknown_method")
    /// A message arrived that the flow does not expect now (duplicate, late, out of order).
    package static let unexpectedMessage = VerificationCancelCode(rawValue: "m.unexpected_message")
    /// A MAC did not match the keys (or covered no key this device knows).
    package static let keyMismatch = VerificationCancelCode(rawValue: "m.key_mismatch")
    /// The user the flow is with is not the one expected.
    package static let userMismatch = VerificationCancelCode(rawValue: "m.user_mismatch")
    /// A message could not be read.
    package static let invalidMessage = VerificationCancelCode(rawValue: "m.invalid_message")
    /// Another device of the user answered the request.
    package static let accepted = VerificationCancelCode(rawValue: "m.accepted")
    /// The key the starter sent does not match the commitment of its `accept`.
    package static let mismatchedCommitment = VerificationCancelCode(rawValue: "m.mismatched_commitment")
    /// The people said the short codes differ.
    package static let mismatchedSAS = VerificationCancelCode(rawValue: "m.mismatched_sas")

    package var description: String { rawValue }
}

/// The verification method names on the wire.
package enum KeyVerificationMethod {
    /// Short authentication string (emoji, decimals).
    package static let sas = "m.sas.v1"
    /// What SymorvaKit offers in a request and a ready: SAS, and QR codes both ways (the app
    /// renders and scans the image; the SDK gives and takes the bytes).
    package static let ours = [sas, qrCodeShow, qrCodeScan, reciprocate]
    /// The methods of `ready` or `request` a flow can go on with: SAS, or a QR code either way.
    package static func haveOneInCommon(_ theirs: [String]) -> Bool {
        theirs.contains(sas) || theirs.contains(qrCodeShow) || theirs.contains(qrCodeScan)
    }
}

/// The crypto layer's check of a QR step: the scanner's comparison of a scanned code with the
/// keys it knows, or the shower's check of the `m.reciprocate.v1` secret.
package enum QRCheckOutcome: Sendable, Hashable {
    /// The keys match (or the secret is the code's): these keys are proven (the device key
    /// of our own other device, the other user's master key, or our own master key alone,
    /// which signs nothing but lets this device trust its identity).
    case proven(VerifiedKeys)
    /// They do not: the flow cancels with this code (`m.key_mismatch`, `m.unknown_transaction`).
    case mismatch(VerificationCancelCode)
}

/// A SAS key agreement protocol (`key_agreement_protocol`).
package enum SASKeyAgreement: String, Sendable, Hashable, CaseIterable {
    /// Curve25519 with the HKDF info of the current spec: the one to prefer.
    case curve25519HKDFSHA256 = "curve25519-hkdf-sha256"
    /// The original info string, still offered by older clients.
    case curve25519 = "curve25519"
}

/// A SAS message authentication code method (`message_authentication_code`).
package enum SASMACMethod: String, Sendable, Hashable, CaseIterable {
    /// HKDF + HMAC-SHA-256 with correct unpadded base64: the one to prefer.
    case hkdfHMACSHA256V2 = "hkdf-hmac-sha256.v2"
    /// The original method (libolm's historical base64 of the MAC), for older clients.
    case hkdfHMACSHA256 = "hkdf-hmac-sha256"
}

/// A way of showing the short authentication string (`short_authentication_string`).
package enum SASShortCodeMethod: String, Sendable, Hashable, CaseIterable {
    /// Three four-digit numbers (every client supports it).
    case decimal
    /// Seven emoji from the spec's table.
    case emoji
}

/// What the starter of a SAS offers: the lists of an `m.key.verification.start` (`m.sas.v1`).
package struct SASOffer: Sendable, Hashable {
    package var keyAgreementProtocols: [String]
    package var hashes: [String]
    package var macMethods: [String]
    package var shortCodeMethods: [String]

    package init(keyAgreementProtocols: [String], hashes: [String], macMethods: [String], shortCodeMethods: [String]) {
        self.keyAgreementProtocols = keyAgreementProtocols
        self.hashes = hashes
        self.macMethods = macMethods
        self.shortCodeMethods = shortCodeMethods
    }

    /// Everything SymorvaKit supports, best first.
    package static let ours = SASOffer(
        keyAgreementProtocols: SASKeyAgreement.allCases.map(\.rawValue), hashes: ["sha256"],
        macMethods: SASMACMethod.allCases.map(\.rawValue), shortCodeMethods: SASShortCodeMethod.allCases.map(\.rawValue)
    )
}

/// The methods both sides use: what an `m.key.verification.accept` names.
package struct SASAgreement: Sendable, Hashable {
    package var keyAgreement: SASKeyAgreement
    package var macMethod: SASMACMethod
    /// The short-code methods both support (always includes ``SASShortCodeMethod/decimal``).
    package var shortCodeMethods: [SASShortCodeMethod]

    package init(keyAgreement: SASKeyAgreement, macMethod: SASMACMethod, shortCodeMethods: [SASShortCodeMethod]) {
        self.keyAgreement = keyAgreement
        self.macMethod = macMethod
        self.shortCodeMethods = shortCodeMethods
    }

    /// The accepter's choice for `offer`: the first of our preferences the starter offers, in
    /// every list; `nil` when a list has nothing in common (the flow cancels `m.unknown_method`).
    package static func negotiate(_ offer: SASOffer) -> SASAgreement? {
        guard offer.hashes.contains("sha256"),
            let keyAgreement = SASKeyAgreement.allCases.first(where: {
                offer.keyAgreementProtocols.contains($0.rawValue)
            }),
            let mac = SASMACMethod.allCases.first(where: { offer.macMethods.contains($0.rawValue) })
        else { return nil }
        let codes = SASShortCodeMethod.allCases.filter { offer.shortCodeMethods.contains($0.rawValue) }
        guard codes.contains(.decimal) else { return nil }
        return SASAgreement(keyAgreement: keyAgreement, macMethod: mac, shortCodeMethods: codes)
    }

    /// Whether this accept chooses among what `offer` (ours) listed: a starter checks the accept.
    package func fits(_ offer: SASOffer) -> Bool {
        offer.keyAgreementProtocols.contains(keyAgreement.rawValue) && offer.macMethods.contains(macMethod.rawValue)
            && shortCodeMethods.allSatisfy { offer.shortCodeMethods.contains($0.rawValue) }
    }
}

/// One side of a flow: a user and (once known) one of their devices.
package struct VerificationParty: Sendable, Hashable, Comparable {
    package var userID: UserID
    package var deviceID: DeviceID

    package init(userID: UserID, deviceID: DeviceID) {
        self.userID = userID
        self.deviceID = deviceID
    }

    /// The spec's tie-break when both sides send `start`: the lexicographically smaller user ID
    /// wins, then the smaller device ID.
    package static func < (lhs: Self, rhs: Self) -> Bool {
        if lhs.userID != rhs.userID { return lhs.userID.rawValue < rhs.userID.rawValue }
        return lhs.deviceID.rawValue < rhs.deviceID.rawValue
    }
}

/// What a flow is: its transaction, the two sides and how it began.
package struct VerificationFlow: Sendable, Hashable {
    /// The `transaction_id` (to-device) or the request event's ID (in a room).
    package var transactionID: String
    /// This device.
    package var ourselves: VerificationParty
    /// The user verified.
    package var peerUserID: UserID
    /// The peer's device: known from the start for a flow with one device, learned from
    /// `m.key.verification.ready` when a request went to every device of the user.
    package var peerDeviceID: DeviceID?
    /// Whether the flow began with `m.key.verification.request` (and so ends with `done` from
    /// both sides); a flow opened by `start` alone (matrix-nio, older clients) ends at the MACs.
    package var usesRequest: Bool

    package init(
        transactionID: String, ourselves: VerificationParty, peerUserID: UserID, peerDeviceID: DeviceID?,
        usesRequest: Bool
    ) {
        self.transactionID = transactionID
        self.ourselves = ourselves
        self.peerUserID = peerUserID
        self.peerDeviceID = peerDeviceID
        self.usesRequest = usesRequest
    }

    /// The peer as a party, once its device is known.
    package var peer: VerificationParty? {
        peerDeviceID.map { VerificationParty(userID: peerUserID, deviceID: $0) }
    }
}

/// An `m.key.verification.ready` as the machine needs it.
package struct VerificationReady: Sendable, Hashable {
    package var fromDevice: DeviceID
    package var methods: [String]

    package init(fromDevice: DeviceID, methods: [String]) {
        self.fromDevice = fromDevice
        self.methods = methods
    }
}

/// An `m.key.verification.start` as the machine needs it.
package struct SASStart: Sendable, Hashable {
    package var fromDevice: DeviceID
    /// `m.sas.v1`, or a method SymorvaKit does not do (the flow cancels `m.unknown_method`).
    package var method: String
    package var offer: SASOffer

    package init(fromDevice: DeviceID, method: String, offer: SASOffer) {
        self.fromDevice = fromDevice
        self.method = method
        self.offer = offer
    }
}

/// An `m.key.verification.accept` as the machine needs it.
package struct SASAccept: Sendable, Hashable {
    /// The methods the accepter chose; `nil` when it named one that does not exist.
    package var agreement: SASAgreement?
    /// Its commitment: unpadded base64 of SHA-256(its public key ‖ canonical JSON of our start).
    package var commitment: String

    package init(agreement: SASAgreement?, commitment: String) {
        self.agreement = agreement
        self.commitment = commitment
    }
}

/// An `m.key.verification.key`, with what the crypto layer computed from it (the machine does
/// no cryptography: it compares).
package struct SASKeyFacts: Sendable, Hashable {
    /// The commitment this key gives: unpadded base64 of SHA-256(key ‖ canonical JSON of the
    /// start). Only a starter compares it, with the accept's.
    package var commitment: String
    /// The short code both devices now show.
    package var code: SASCode

    package init(commitment: String, code: SASCode) {
        self.commitment = commitment
        self.code = code
    }
}

/// What the peer's keys are once its MAC was checked: the keys to sign.
package struct VerifiedKeys: Sendable, Hashable {
    /// The peer device's Ed25519 key, when the MAC covered it.
    package var deviceKey: String?
    /// The peer user's master cross-signing key, when the MAC covered it.
    package var masterKey: String?

    package init(deviceKey: String?, masterKey: String?) {
        self.deviceKey = deviceKey
        self.masterKey = masterKey
    }
}

/// The crypto layer's check of an `m.key.verification.mac`.
package enum MACVerdict: Sendable, Hashable {
    /// Every MAC and the keys MAC match; these keys are proven.
    case valid(VerifiedKeys)
    /// A MAC differs, or it covers no key this device knows of the peer.
    case mismatch
}

/// The flow's two timeouts.
package enum VerificationTimeout: String, Sendable, Hashable {
    /// 10 minutes from the flow's beginning.
    case overall
    /// 2 minutes for a request to be answered (ready or accepted).
    case request
}

/// Everything a flow has agreed once a SAS started.
package struct SASProgress: Sendable, Hashable {
    package var flow: VerificationFlow
    /// Whether this device sent the `start` (it sends its key first, and checks the commitment).
    package var weStarted: Bool
    /// The start both sides use (ours or the peer's).
    package var start: SASStart
    /// The methods agreed (known to the starter once `accept` arrives).
    package var agreement: SASAgreement?
    /// The accepter's commitment, for a starter to check against its key.
    package var commitment: String?
    /// The short code, once both keys are known.
    package var code: SASCode?
    /// The peer's MAC when it arrived before the person confirmed.
    package var theirMAC: MACVerdict?

    package init(
        flow: VerificationFlow, weStarted: Bool, start: SASStart, agreement: SASAgreement? = nil,
        commitment: String? = nil, code: SASCode? = nil, theirMAC: MACVerdict? = nil
    ) {
        self.flow = flow
        self.weStarted = weStarted
        self.start = start
        self.agreement = agreement
        self.commitment = commitment
        self.code = code
        self.theirMAC = theirMAC
    }
}
