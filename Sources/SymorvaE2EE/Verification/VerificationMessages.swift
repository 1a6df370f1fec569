import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix

/// The `m.key.verification.*` contents of a SAS flow (to-device form: each carries
/// `transaction_id`), written from the machine's effects and read into its events; the in-room
/// form (``inRoom(_:)``, ``roomRequest(fromDevice:to:methods:)``, ``roomMessage(type:content:eventID:)``)
/// threads the flow with an `m.reference` to the request event instead.
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

    /// A request's device, methods and `timestamp` (`nil` in a room, where the event's
    /// `origin_server_ts` dates it); `nil` when the to-device form has no timestamp.
    package static func parseRequest(_ content: JSONValue) -> (device: DeviceID, methods: [String], timestamp: Int64?)?
    {
        guard let device = string(content, "from_device"), let methods = stringList(content, "methods"),
            case .object(let object) = content
        else { return nil }
        guard let timestamp = object["timestamp"]?.integerValue else {
            return string(content, "msgtype") == Kind.request.rawValue ? (DeviceID(device), methods, nil) : nil
        }
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

    // MARK: - In a room

    /// The request as an `m.room.message` (`msgtype` `m.key.verification.request`) to `user`:
    /// no `transaction_id` (the event's ID becomes the flow's) and no `timestamp` (the event's
    /// `origin_server_ts` dates it), with a `body` for clients that do not verify.
    package static func roomRequest(fromDevice device: DeviceID, to user: UserID, methods: [String]) -> JSONValue {
        .object([
            "msgtype": .string(Kind.request.rawValue), "from_device": .string(device.rawValue),
            "methods": strings(methods), "to": .string(user.rawValue),
            "body": .string("is requesting to verify your key, but your client does not support in-chat verification."),
        ])
    }

    /// A to-device content in its room form: `transaction_id` (the request event's ID) becomes
    /// `m.relates_to` `{rel_type: m.reference, event_id}`; a content without one is unchanged.
    package static func inRoom(_ content: JSONValue) -> JSONValue {
        guard case .object(var fields) = content, case .string(let requestID)? = fields["transaction_id"] else {
            return content
        }
        fields["transaction_id"] = nil
        fields["m.relates_to"] = .object(["rel_type": .string("m.reference"), "event_id": .string(requestID)])
        return .object(fields)
    }

    /// What a room event of `type` is for verification: the request (an `m.room.message` of
    /// msgtype `m.key.verification.request`, its flow the event's own ID) or a step of a flow
    /// (an `m.key.verification.*` event whose `m.relates_to` is an `m.reference` to the request);
    /// `nil` for anything else.
    package static func roomMessage(type: String, content: JSONValue, eventID: String) -> (
        kind: Kind, transactionID: String
    )? {
        if type == "m.room.message" {
            return string(content, "msgtype") == Kind.request.rawValue ? (.request, eventID) : nil
        }
        guard let kind = Kind(rawValue: type), kind != .request, case .object(let fields) = content,
            case .object(let relation)? = fields["m.relates_to"], relation["rel_type"] == .string("m.reference"),
            case .string(let requestID)? = relation["event_id"]
        else { return nil }
        return (kind, requestID)
    }

    /// The user an in-room request is for (`to`).
    package static func requestRecipient(_ content: JSONValue) -> UserID? {
        string(content, "to").flatMap { UserID($0) }
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
