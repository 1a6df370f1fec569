/// The keys this device knows when it scans a verification QR code (or shows one): what the
/// code's keys are compared with. Raw 32-byte Ed25519 public keys (the crypto layer decodes the
/// unpadded base64 of `keys/query`).
package struct QRKnownKeys: Sendable, Hashable {
    /// Whether the flow is with another device of our own user (modes `0x01` and `0x02`) rather
    /// than with another user (mode `0x00`).
    package var selfVerification: Bool
    /// This device's Ed25519 key.
    package var ourDeviceKey: [UInt8]
    /// Our user's master cross-signing key as `keys/query` gave it, if any.
    package var ourMasterKey: [UInt8]?
    /// Whether this device trusts ``ourMasterKey`` (it holds the private cross-signing keys, or
    /// verified the master key before).
    package var ourMasterKeyTrusted: Bool
    /// The other user's master key as `keys/query` gave it (verifying another user).
    package var peerMasterKey: [UInt8]?
    /// The other device's Ed25519 key as `keys/query` gave it (self-verification).
    package var peerDeviceKey: [UInt8]?

    package init(
        selfVerification: Bool, ourDeviceKey: [UInt8], ourMasterKey: [UInt8]?, ourMasterKeyTrusted: Bool,
        peerMasterKey: [UInt8]?, peerDeviceKey: [UInt8]?
    ) {
        self.selfVerification = selfVerification
        self.ourDeviceKey = ourDeviceKey
        self.ourMasterKey = ourMasterKey
        self.ourMasterKeyTrusted = ourMasterKeyTrusted
        self.peerMasterKey = peerMasterKey
        self.peerDeviceKey = peerDeviceKey
    }
}

/// What a QR verification proves to one side, and so what it signs.
package enum QRVerificationProof: Sendable, Hashable {
    /// The other user's master key: sign it with our user-signing key.
    case peerMasterKey([UInt8])
    /// The other device's Ed25519 key (our own user): sign it with our self-signing key.
    case peerDeviceKey([UInt8])
    /// Our own master key, which this device did not trust yet: trust it (and what it signs).
    case ourMasterKey([UInt8])
}

/// Why a scanned code does not verify: each answers with an `m.key.verification.cancel`.
package enum QRVerificationMismatch: Sendable, Hashable {
    /// The code names another flow (transaction ID or request event ID).
    case flowID
    /// The mode does not fit the flow: a self-verification mode with another user, or mode
    /// `0x00` with our own user.
    case modeNotForThisFlow
    /// Mode `0x02` (the shower does not trust the master key) scanned by a device that does
    /// not trust it either: nobody vouches for the master key.
    case masterKeyNotTrusted
    /// A key this device needs to compare is unknown to it.
    case keyUnknown
    /// The first key is not what this device knows.
    case firstKey
    /// The second key (what the shower thinks) is not what this device knows.
    case secondKey
    /// The `m.reciprocate.v1` secret is not the shown code's.
    case sharedSecret

    /// The cancel code to send: `m.unknown_transaction` for another flow, `m.key_mismatch`
    /// otherwise (the spec's "the keys do not match", which covers a code that cannot match).
    package var cancelCode: VerificationCancelCode {
        switch self {
        case .flowID: .unknownTransaction
        case .modeNotForThisFlow, .masterKeyNotTrusted, .keyUnknown, .firstKey, .secondKey, .sharedSecret:
            .keyMismatch
        }
    }
}

/// The outcome of comparing a QR code's keys, or a reciprocate's secret, with what we know.
package enum QRVerificationCheck: Sendable, Hashable {
    /// Everything matches: this is proven (once the person confirms, on the showing side).
    case match(QRVerificationProof)
    /// Cancel the flow with ``QRVerificationMismatch/cancelCode``.
    case mismatch(QRVerificationMismatch)
}

extension QRVerificationPayload {
    /// The scanner's check (the spec's step "ensures that the keys encoded in the QR code match
    /// the expected values"), for a flow whose ID is `flowID`:
    ///
    /// - `0x00` (another user): the first key is the other user's master key, the second is our
    ///   master key. Proves the other user's master key.
    /// - `0x01` (our device that trusts the master key): the first key is our master key, the
    ///   second this device's key. Proves our master key to this device.
    /// - `0x02` (our device that does not trust it): this device must trust the master key; the
    ///   first key is the other device's key, the second our master key. Proves that device.
    package func scannerCheck(flowID expected: String, known: QRKnownKeys) -> QRVerificationCheck {
        guard flowID == expected else { return .mismatch(.flowID) }
        guard known.selfVerification == (mode != .verifyingAnotherUser) else { return .mismatch(.modeNotForThisFlow) }
        if mode == .selfVerifyingUntrustedMasterKey, !known.ourMasterKeyTrusted {
            return .mismatch(.masterKeyNotTrusted)
        }
        let (first, second): ([UInt8]?, [UInt8]?) =
            switch mode {
            case .verifyingAnotherUser: (known.peerMasterKey, known.ourMasterKey)
            case .selfVerifyingTrustedMasterKey: (known.ourMasterKey, known.ourDeviceKey)
            case .selfVerifyingUntrustedMasterKey: (known.peerDeviceKey, known.ourMasterKey)
            }
        guard let first, let second else { return .mismatch(.keyUnknown) }
        guard firstKey == first else { return .mismatch(.firstKey) }
        guard secondKey == second else { return .mismatch(.secondKey) }
        switch mode {
        case .verifyingAnotherUser: return .match(.peerMasterKey(firstKey))
        case .selfVerifyingTrustedMasterKey: return .match(.ourMasterKey(firstKey))
        case .selfVerifyingUntrustedMasterKey: return .match(.peerDeviceKey(firstKey))
        }
    }

    /// The showing side's check of an `m.reciprocate.v1` start (its `secret`, decoded): the
    /// secret must be this code's, compared in constant time. What it then proves, once the
    /// person confirms the other side scanned, is the second key: the other user's master key
    /// (`0x00`), the other device's key (`0x01`) or our master key (`0x02`).
    package func reciprocateCheck(secret: [UInt8]) -> QRVerificationCheck {
        var difference = UInt8(truncatingIfNeeded: secret.count ^ sharedSecret.count)
        for index in sharedSecret.indices {
            difference |= sharedSecret[index] ^ (index < secret.count ? secret[index] : ~sharedSecret[index])
        }
        guard difference == 0, secret.count == sharedSecret.count else { return .mismatch(.sharedSecret) }
        switch mode {
        case .verifyingAnotherUser: return .match(.peerMasterKey(secondKey))
        case .selfVerifyingTrustedMasterKey: return .match(.peerDeviceKey(secondKey))
        case .selfVerifyingUntrustedMasterKey: return .match(.ourMasterKey(secondKey))
        }
    }
}
