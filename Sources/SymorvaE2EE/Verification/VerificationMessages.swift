import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix

/// The `m.key.verification.*` contents of a SAS flow (to-device form: each carries
/// `transaction_id`), written from the machine's effects and read into its events.
package enum VerificationMessages {
    /// The event types.
    package enum Kind: String, Sendable, CaseIterable {
        case request = "m.key.verification.request"
        case ready = "m.key.verification.ready"
        case start = "m.key.verification.start"
        case accept = "m.key.verification.accept"
        case key = "m.key.verification.key"
        case mac = "m.key.verification.mac"
        case done = "m.key.verification.done"
        case cancel = "m.key.verification.cancel"
    }

    // MARK: - Writing

    package static func request(_ flow: VerificationFlow, methods: [String], timestampMilliseconds: Int64) -> JSONValue
    {
        content(
            flow,
            [
                "from_device": .string(flow.ourselves.deviceID.rawValue), "methods": strings(methods),
                "timestamp": .number(Double(timestampMilliseconds)),
            ])
    }

    package static func ready(_ flow: VerificationFlow, methods: [String]) -> JSONValue {
        content(flow, ["from_device": .string(flow.ourselves.deviceID.rawValue), "methods": strings(methods)])
    }

    package static func start(_ flow: VerificationFlow, offer: SASOffer) -> JSONValue {
        content(
            flow,
            [
                "from_device": .string(flow.ourselves.deviceID.rawValue),
                "method": .string(KeyVerificationMethod.sas),
                "key_agreement_protocols": strings(offer.keyAgreementProtocols), "hashes": strings(offer.hashes),
                "message_authentication_codes": strings(offer.macMethods),
                "short_authentication_string": strings(offer.shortCodeMethods),
            ])
    }

    /// The scanner's `m.key.verification.start` after a good scan: `m.reciprocate.v1` with the
    /// code's shared secret (unpadded base64).
    package static func reciprocate(_ flow: VerificationFlow, secret: [UInt8]) -> JSONValue {
        content(
            flow,
            [
                "from_device": .string(flow.ourselves.deviceID.rawValue),
                "method": .string(KeyVerificationMethod.reciprocate), "secret": .string(UnpaddedBase64.encode(secret)),
            ])
    }

    /// The secret of an `m.reciprocate.v1` start (padding tolerated), `nil` when absent or not base64.
    package static func parseReciprocateSecret(_ content: JSONValue) -> [UInt8]? {
        string(content, "secret").flatMap(UnpaddedBase64.decode)
    }

    package static func accept(_ flow: VerificationFlow, agreement: SASAgreement, commitment: String) -> JSONValue {
        content(
            flow,
            [
                "method": .string(KeyVerificationMethod.sas),
                "key_agreement_protocol": .string(agreement.keyAgreement.rawValue), "hash": .string("sha256"),
                "message_authentication_code": .string(agreement.macMethod.rawValue),
                "short_authentication_string": strings(agreement.shortCodeMethods.map(\.rawValue)),
                "commitment": .string(commitment),
            ])
    }

    package static func key(_ flow: VerificationFlow, publicKey: String) -> JSONValue {
        content(flow, ["key": .string(publicKey)])
    }

    package static func mac(_ flow: VerificationFlow, macs: [String: String], keys: String) -> JSONValue {
        content(flow, ["mac": .object(macs.mapValues { .string($0) }), "keys": .string(keys)])
    }

    package static func done(_ flow: VerificationFlow) -> JSONValue { content(flow, [:]) }

    package static func cancel(_ flow: VerificationFlow, code: VerificationCancelCode) -> JSONValue {
        cancel(transactionID: flow.transactionID, code: code)
    }

    /// A cancel of `transactionID`, which may be no flow of ours (`m.unknown_transaction`).
    package static func cancel(transactionID: String, code: VerificationCancelCode) -> JSONValue {
        .object([
            "transaction_id": .string(transactionID), "code": .string(code.rawValue),
            "reason": .string(reason(code)),
        ])
    }

    // MARK: - Reading

    /// The flow a content belongs to.
    package static func transactionID(of content: JSONValue) -> String? {
        string(content, "transaction_id")
    }

    package static func parseRequest(_ content: JSONValue) -> (device: DeviceID, methods: [String], timestamp: Int64)? {
        guard let device = string(content, "from_device"), let methods = stringList(content, "methods"),
            case .object(let object) = content, let timestamp = object["timestamp"]?.integerValue
        else { return nil }
        return (DeviceID(device), methods, Int64(timestamp))
    }

    package static func parseReady(_ content: JSONValue) -> VerificationReady? {
        guard let device = string(content, "from_device"), let methods = stringList(content, "methods") else {
            return nil
        }
        return VerificationReady(fromDevice: DeviceID(device), methods: methods)
    }

    package static func parseStart(_ content: JSONValue) -> SASStart? {
        guard let device = string(content, "from_device"), let method = string(content, "method") else { return nil }
        let offer = SASOffer(
            keyAgreementProtocols: stringList(content, "key_agreement_protocols") ?? [],
            hashes: stringList(content, "hashes") ?? [],
            macMethods: stringList(content, "message_authentication_codes") ?? [],
            shortCodeMethods: stringList(content, "short_authentication_string") ?? [])
        return SASStart(fromDevice: DeviceID(device), method: method, offer: offer)
    }

    package static func parseAccept(_ content: JSONValue) -> SASAccept? {
        guard let commitment = string(content, "commitment") else { return nil }
        var agreement: SASAgreement?
        if string(content, "hash") == "sha256",
            let keyAgreement = string(content, "key_agreement_protocol").flatMap(SASKeyAgreement.init(rawValue:)),
            let mac = string(content, "message_authentication_code").flatMap(SASMACMethod.init(rawValue:)),
            let codes = stringList(content, "short_authentication_string")
        {
            let methods = codes.compactMap(SASShortCodeMethod.init(rawValue:))
            if methods.count == codes.count {
                agreement = SASAgreement(keyAgreement: keyAgreement, macMethod: mac, shortCodeMethods: methods)
            }
        }
        return SASAccept(agreement: agreement, commitment: commitment)
    }

    package static func parseKey(_ content: JSONValue) -> String? { string(content, "key") }

    package static func parseMAC(_ content: JSONValue) -> (macs: [String: String], keys: String)? {
        guard case .object(let object) = content, case .object(let macs)? = object["mac"],
            let keys = string(content, "keys")
        else { return nil }
        var result: [String: String] = [:]
        for (keyID, value) in macs {
            guard case .string(let mac) = value else { return nil }
            result[keyID] = mac
        }
        return (result, keys)
    }

    /// The `from_device` a request, ready or start names.
    package static func fromDevice(of content: JSONValue) -> DeviceID? {
        string(content, "from_device").map { DeviceID($0) }
    }

    package static func parseCancel(_ content: JSONValue) -> VerificationCancelCode {
        VerificationCancelCode(rawValue: string(content, "code") ?? VerificationCancelCode.user.rawValue)
    }

    // MARK: - Helpers

    private static func content(_ flow: VerificationFlow, _ fields: [String: JSONValue]) -> JSONValue {
        var fields = fields
        fields["transaction_id"] = .string(flow.transactionID)
        return .object(fields)
    }

    private static func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }

    private static func string(_ content: JSONValue, _ key: String) -> String? {
        guard case .object(let object) = content, case .string(let value)? = object[key] else { return nil }
        return value
    }

    private static func stringList(_ content: JSONValue, _ key: String) -> [String]? {
        guard case .object(let object) = content, case .array(let values)? = object[key] else { return nil }
        var result: [String] = []
        for value in values {
            guard case .string(let text) = value else { return nil }
            result.append(text)
        }
        return result
    }

    private static func reason(_ code: VerificationCancelCode) -> String {
        switch code {
        case .user: "The user cancelled the verification"
        case .timeout: "The verification timed out"
        case .unknownMethod: "No verification method in common"
        case .unexpectedMessage: "Unexpected verification message"
        case .keyMismatch: "The MAC did not match the keys"
        case .mismatchedCommitment: "The key did not match the commitment"
        case .mismatchedSAS: "The short authentication strings did not match"
        case .accepted: "Another device answered the request"
        case .unknownTransaction: "Unknown verification transaction"
        default: "The verification was cancelled"
        }
    }
}
