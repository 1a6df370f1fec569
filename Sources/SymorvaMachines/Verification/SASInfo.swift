/// The HKDF `info` strings of `m.sas.v1` (the spec's "SAS HKDF calculation" and "MAC
/// calculation"): pure string building, kept beside the machine so that both ends of a test
/// and the crypto layer build them one way.
package enum SASInfo {
    /// The info for the short code's bytes. `starter` sent the `start`, `accepter` the `accept`;
    /// the keys are the ones each sent in `m.key.verification.key` (unpadded base64).
    package static func shortCode(
        _ keyAgreement: SASKeyAgreement, starter: VerificationParty, starterKey: String,
        accepter: VerificationParty, accepterKey: String, transactionID: String
    ) -> String {
        switch keyAgreement {
        case .curve25519HKDFSHA256:
            [
                "MATRIX_KEY_VERIFICATION_SAS", starter.userID.rawValue, starter.deviceID.rawValue, starterKey,
                accepter.userID.rawValue, accepter.deviceID.rawValue, accepterKey, transactionID,
            ].joined(separator: "|")
        case .curve25519:
            "MATRIX_KEY_VERIFICATION_SAS" + starter.userID.rawValue + starter.deviceID.rawValue
                + accepter.userID.rawValue + accepter.deviceID.rawValue + transactionID
        }
    }

    /// The info for the MAC of one key (`keyID`, `ed25519:DEVICE`) or of the key list
    /// (``keyIDsItem``), sent by `sender` to `receiver`.
    package static func mac(
        sender: VerificationParty, receiver: VerificationParty, transactionID: String, keyID: String
    ) -> String {
        "MATRIX_KEY_VERIFICATION_MAC" + sender.userID.rawValue + sender.deviceID.rawValue + receiver.userID.rawValue
            + receiver.deviceID.rawValue + transactionID + keyID
    }

    /// The item name of the key list's MAC.
    package static let keyIDsItem = "KEY_IDS"

    /// The key list a MAC covers: the key IDs sorted and comma-separated.
    package static func keyList(_ keyIDs: some Sequence<String>) -> String {
        keyIDs.sorted().joined(separator: ",")
    }
}
