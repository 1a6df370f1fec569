import SymorvaMachines

/// The Matrix client-server endpoints of end-to-end encryption (spec v1.11, "End-to-End
/// Encryption"), as pure request builders. Bodies are built as ``JSONValue`` and sent in
/// canonical JSON, so that what is signed and what is sent are the same bytes.
package enum E2EEAPI {
    static let prefix = AuthAPI.clientPrefix

    /// `POST /keys/upload` with any of device keys, one-time keys and fallback keys (each
    /// `nil` to leave out). The answer holds `one_time_key_counts`.
    package static func upload(
        deviceKeys: JSONValue?, oneTimeKeys: [String: JSONValue], fallbackKeys: [String: JSONValue]
    ) throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint {
        var body: [String: JSONValue] = [:]
        if let deviceKeys { body["device_keys"] = deviceKeys }
        if !oneTimeKeys.isEmpty { body["one_time_keys"] = .object(oneTimeKeys) }
        if !fallbackKeys.isEmpty { body["fallback_keys"] = .object(fallbackKeys) }
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/keys/upload", body: try JSONValue.object(body).canonicalEncoding(),
            requiresAuth: true)
    }

    /// `POST /keys/query` for every device of `users`.
    package static func query(users: [UserID]) throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint {
        let devices = Dictionary(uniqueKeysWithValues: users.map { ($0.rawValue, JSONValue.array([])) })
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/keys/query",
            body: try JSONValue.object(["device_keys": .object(devices), "timeout": .number(10_000)])
                .canonicalEncoding(),
            requiresAuth: true)
    }

    /// `POST /keys/claim`: one `signed_curve25519` key for each (user, device).
    package static func claim(_ devices: [UserID: [String]]) throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint {
        var keys: [String: JSONValue] = [:]
        for (user, deviceIDs) in devices {
            keys[user.rawValue] = .object(
                Dictionary(uniqueKeysWithValues: deviceIDs.map { ($0, JSONValue.string("signed_curve25519")) }))
        }
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/keys/claim",
            body: try JSONValue.object(["one_time_keys": .object(keys), "timeout": .number(10_000)])
                .canonicalEncoding(),
            requiresAuth: true)
    }

    /// `PUT /sendToDevice/{eventType}/{txnId}` with `messages` (user → device → content):
    /// idempotent for one transaction ID.
    package static func sendToDevice(
        eventType: String, transactionID: TransactionID, messages: [String: [String: JSONValue]]
    ) throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint {
        let body = JSONValue.object(["messages": .object(messages.mapValues { .object($0) })])
        return MatrixEndpoint(
            method: .put,
            path:
                "\(prefix)/sendToDevice/\(percentEncoded(eventType))/\(percentEncoded(transactionID.rawValue))",
            body: try body.canonicalEncoding(), requiresAuth: true)
    }
}

extension E2EEAPI {
    /// `POST /keys/device_signing/upload`: the account's cross-signing public keys
    /// (`master_key`, `self_signing_key`, `user_signing_key`), with `auth` for user-interactive
    /// authentication when the server asks for it (replacing an existing identity).
    package static func uploadSigningKeys(_ keys: [String: JSONValue], auth: JSONValue? = nil)
        throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint
    {
        var body = keys
        if let auth { body["auth"] = auth }
        return MatrixEndpoint(
            method: .post, path: "\(prefix)/keys/device_signing/upload",
            body: try JSONValue.object(body).canonicalEncoding(), requiresAuth: true)
    }

    /// `POST /keys/signatures/upload`: signed objects (device keys or cross-signing keys), by
    /// user and then device ID or public key. The answer's `failures` names each refused one.
    package static func uploadSignatures(_ signed: [String: [String: JSONValue]])
        throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint
    {
        MatrixEndpoint(
            method: .post, path: "\(prefix)/keys/signatures/upload",
            body: try JSONValue.object(signed.mapValues { .object($0) }).canonicalEncoding(), requiresAuth: true)
    }

    /// `GET /devices`: the account's devices with their display names and when each was last seen.
    package static func devices() -> MatrixEndpoint {
        MatrixEndpoint(method: .get, path: "\(prefix)/devices", requiresAuth: true)
    }
}

extension E2EEAPI {
    /// `GET /user/{userId}/account_data/{type}`: the account's global account data of `type`
    /// (`M_NOT_FOUND` when there is none). Secret storage keeps its keys and secrets there.
    package static func accountData(user: UserID, type: String) -> MatrixEndpoint {
        MatrixEndpoint(
            method: .get, path: "\(prefix)/user/\(percentEncoded(user.rawValue))/account_data/\(percentEncoded(type))",
            requiresAuth: true)
    }

    /// `PUT /user/{userId}/account_data/{type}` with `content` (replacing what was there).
    package static func setAccountData(user: UserID, type: String, content: JSONValue)
        throws(JSONValue.CanonicalJSONError) -> MatrixEndpoint
    {
        MatrixEndpoint(
            method: .put, path: "\(prefix)/user/\(percentEncoded(user.rawValue))/account_data/\(percentEncoded(type))",
            body: try content.canonicalEncoding(), requiresAuth: true)
    }
}
