import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why the cryptography of a SAS flow could not be done (a malformed key or content); the
/// flow then cancels (`m.invalid_message` / `m.key_mismatch`).
package enum SASExchangeError: Error, Sendable, Hashable {
    /// The libolm SAS refused a key or failed.
    case driver(CryptoDriverError)
    /// The start content has no canonical JSON (a non-integer number).
    case startNotCanonical
    /// A key or MAC arrived before what it needs (the start, or the peer's key).
    case outOfOrder
}

/// The cryptography of one SAS flow, for the ``VerificationMachine`` that decides it: our
/// ephemeral key (libolm `OlmSAS`), the commitment, the short code's bytes, our MACs and the
/// check of the peer's. Not thread-safe: the actor hosting the flow owns it.
package final class SASExchange {
    private let driver: any CryptoDriver
    private let sas: any SASSession
    /// The `m.key.verification.start` content both sides use (ours or the peer's), as on the wire.
    package var startContent: JSONValue?

    package init(driver: any CryptoDriver) throws(SASExchangeError) {
        self.driver = driver
        do { sas = try driver.newSAS() } catch { throw .driver(error) }
    }

    /// Our SAS public key (the `key` we send).
    package var publicKey: String { sas.publicKey }

    /// The commitment to `key` and the start: unpadded base64 SHA-256 of the key followed by
    /// the start content's canonical JSON.
    package func commitment(to key: String) throws(SASExchangeError) -> String {
        guard let startContent else { throw .outOfOrder }
        let canonical: [UInt8]
        do { canonical = try startContent.canonicalEncoding() } catch { throw .startNotCanonical }
        return driver.sha256(Array(key.utf8) + canonical)
    }

    /// The peer's key arrived: the shared secret, its commitment and the short code.
    package func keyReceived(_ theirKey: String, progress: SASProgress) throws(SASExchangeError) -> SASKeyFacts {
        guard let agreement = progress.agreement, let peer = progress.flow.peer else { throw .outOfOrder }
        do { try sas.setTheirKey(theirKey) } catch { throw .driver(error) }
        let (starter, starterKey, accepter, accepterKey) =
            progress.weStarted
            ? (progress.flow.ourselves, sas.publicKey, peer, theirKey)
            : (peer, theirKey, progress.flow.ourselves, sas.publicKey)
        let info = SASInfo.shortCode(
            agreement.keyAgreement, starter: starter, starterKey: starterKey, accepter: accepter,
            accepterKey: accepterKey, transactionID: progress.flow.transactionID)
        let bytes: [UInt8]
        do { bytes = try sas.generateBytes(info: info, count: 6) } catch { throw .driver(error) }
        guard let code = SASCode(bytes: bytes) else { throw .outOfOrder }
        return SASKeyFacts(commitment: try commitment(to: theirKey), code: code)
    }

    /// Our `m.key.verification.mac` content over `keys` (key ID → public key: our device's
    /// Ed25519 key, and our master key when we have one).
    package func macContent(
        _ flow: VerificationFlow, method: SASMACMethod, keys: [String: String]
    ) throws(SASExchangeError) -> JSONValue {
        guard let peer = flow.peer else { throw .outOfOrder }
        var macs: [String: String] = [:]
        for (keyID, key) in keys {
            let info = SASInfo.mac(
                sender: flow.ourselves, receiver: peer, transactionID: flow.transactionID, keyID: keyID)
            macs[keyID] = try mac(key, info: info, method: method)
        }
        let listInfo = SASInfo.mac(
            sender: flow.ourselves, receiver: peer, transactionID: flow.transactionID, keyID: SASInfo.keyIDsItem)
        let list = try mac(SASInfo.keyList(keys.keys), info: listInfo, method: method)
        return VerificationMessages.mac(flow, macs: macs, keys: list)
    }

    /// Checks the peer's MAC content against the keys this device knows of the peer: its
    /// device's Ed25519 key and (when known) its master key. Valid only when the key list's MAC
    /// matches, every known key's MAC matches, and the device key is among them; a key ID this
    /// device does not know is skipped (the spec's rule), never trusted.
    package func check(
        _ content: JSONValue, progress: SASProgress, deviceKey: String?, masterKey: String?
    ) -> MACVerdict {
        guard let agreement = progress.agreement, let peer = progress.flow.peer, sas.hasTheirKey,
            let (macs, keysMAC) = VerificationMessages.parseMAC(content)
        else { return .mismatch }
        let flow = progress.flow
        func expected(_ input: String, _ keyID: String) -> String? {
            let info = SASInfo.mac(
                sender: peer, receiver: flow.ourselves, transactionID: flow.transactionID, keyID: keyID)
            return try? mac(input, info: info, method: agreement.macMethod)
        }
        guard let listMAC = expected(SASInfo.keyList(macs.keys), SASInfo.keyIDsItem), listMAC == keysMAC else {
            return .mismatch
        }
        let deviceKeyID = "ed25519:\(peer.deviceID.rawValue)"
        var verified = VerifiedKeys(deviceKey: nil, masterKey: nil)
        for (keyID, value) in macs {
            if keyID == deviceKeyID, let deviceKey {
                guard expected(deviceKey, keyID) == value else { return .mismatch }
                verified.deviceKey = deviceKey
            } else if let masterKey, keyID == "ed25519:\(masterKey)" {
                guard expected(masterKey, keyID) == value else { return .mismatch }
                verified.masterKey = masterKey
            }
        }
        return verified.deviceKey == nil ? .mismatch : .valid(verified)
    }

    private func mac(_ input: String, info: String, method: SASMACMethod) throws(SASExchangeError) -> String {
        let encoding: SASMACEncoding =
            switch method {
            case .hkdfHMACSHA256V2: .fixedBase64
            case .hkdfHMACSHA256: .legacyBase64
            }
        do { return try sas.mac(input, info: info, encoding: encoding) } catch { throw .driver(error) }
    }
}
