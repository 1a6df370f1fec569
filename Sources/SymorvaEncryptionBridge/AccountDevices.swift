import SymorvaE2EE
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaSession

/// One of the account's devices: every sign-in is one (this app on this phone, a desktop
/// client, a browser), as the homeserver lists them, with what this device's encryption knows
/// of its keys.
///
/// The display name is user content: the textual form names the device ID only.
public struct AccountDevice: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// The device ID.
    public var id: String { deviceID }
    /// The device ID the homeserver assigned at sign-in.
    public var deviceID: String
    /// The name its owner (or the client that signed in) gave it.
    public var displayName: String?
    /// When the homeserver last saw it, if it says.
    public var lastSeen: MatrixTimestamp?
    /// Whether it is this device.
    public var isCurrent: Bool
    /// Its Ed25519 signing key, when its self-signed device keys are published and verified by
    /// this device (`nil` for a device without end-to-end encryption, or not queried yet).
    public var ed25519Key: String?
    /// The server once showed other keys for this known device: they were refused, and the
    /// device is not trusted until a human looks.
    public var keysChanged: Bool
    /// How far this device trusts it (cross-signed by the account's identity, verified with the
    /// master key this device holds, or neither); `nil` while its keys are not known here.
    public var trust: DeviceTrustLevel?

    /// The device ID only.
    public var description: String { "AccountDevice(\(deviceID))" }
}

extension SessionClient {
    /// The active account's devices, this one first, then by when they were last seen (most
    /// recent first): the homeserver's list (`GET /devices`) joined with the keys this device's
    /// encryption verified for each.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn`` when no account is active;
    ///   ``/SymorvaMachines/SessionError/unreachable(_:)`` and the server's refusal otherwise.
    public func devices() async throws(SessionError) -> [AccountDevice] {
        guard case .running(let context) = sessions.active.value else { throw .notSignedIn }
        let response: HTTPResponse
        do {
            response = try await context.requester.send(E2EEAPI.devices())
        } catch {
            switch error {
            case .transport(let transport): throw SessionError(transport: transport)
            case .notSignedIn: throw .notSignedIn
            case .invalidRequest: throw .invalidResponse(reason: "invalid request")
            case .matrix(let matrix):
                if matrix.code == .unknownToken || matrix.code == .missingToken {
                    throw .unknownToken(softLogout: matrix.isSoftLogout)
                }
                throw .serverError(status: matrix.status, errcode: matrix.code.errcode)
            }
        }
        guard case .object(let root)? = try? JSONValue(parsing: response.body),
            case .array(let listed)? = root["devices"]
        else { throw .invalidResponse(reason: "devices") }
        let crypto = context.modules.module(AccountCrypto.self)
        let verified = (try? await crypto?.ownDevices()) ?? []
        let keys = Dictionary(verified.map { ($0.deviceID, $0) }, uniquingKeysWith: { first, _ in first })
        var current = crypto?.deviceID.rawValue
        switch context.sessionHost.states.value {
        case .signedIn(let session), .authorizing(let session, _), .softLoggedOut(let session, _):
            current = session.deviceID.rawValue
        default: break
        }
        var devices: [AccountDevice] = []
        for entry in listed {
            guard case .object(let device) = entry, case .string(let deviceID)? = device["device_id"] else { continue }
            var displayName: String?
            if case .string(let name)? = device["display_name"], !name.isEmpty { displayName = name }
            var lastSeen: MatrixTimestamp?
            if let milliseconds = device["last_seen_ts"]?.integerValue {
                lastSeen = MatrixTimestamp(milliseconds: Int64(milliseconds))
            }
            let known = keys[deviceID]
            devices.append(
                AccountDevice(
                    deviceID: deviceID, displayName: displayName, lastSeen: lastSeen, isCurrent: deviceID == current,
                    ed25519Key: known?.ed25519, keysChanged: known?.keysChanged ?? false, trust: known?.trust))
        }
        return devices.sorted { lhs, rhs in
            if lhs.isCurrent != rhs.isCurrent { return lhs.isCurrent }
            let left = lhs.lastSeen?.rawValue ?? 0
            let right = rhs.lastSeen?.rawValue ?? 0
            return left != right ? left > right : lhs.deviceID < rhs.deviceID
        }
    }
}

extension SessionClient {
    /// "I lost my recovery key": replaces the active account's cross-signing identity with a
    /// new one and secret storage with a new key (`AccountCrypto.resetRecovery(passphrase:authorize:)`),
    /// completing the server's password stage with `password`. Every other device of the account
    /// must be restored again, every user who verified the account sees its identity change, and
    /// what the old secret storage held can no longer be read. Returns the new recovery key:
    /// show it once, never log it.
    ///
    /// - Throws: ``/SymorvaE2EE/RecoveryError/authorization(_:)`` for a wrong password or a
    ///   server that wants other stages, ``/SymorvaE2EE/RecoveryError/notReady`` without a
    ///   signed-in account with encryption, or a request's error.
    public func resetRecovery(password: Secret<String>, passphrase: Secret<String>? = nil)
        async throws(RecoveryError) -> Secret<String>
    {
        guard case .running(let context) = sessions.active.value,
            let crypto = context.modules.module(AccountCrypto.self)
        else { throw .notReady }
        return try await crypto.resetRecovery(passphrase: passphrase) { endpoint throws(RecoveryError) in
            do throws(SessionError) {
                return try await self.authorize(
                    method: endpoint.method.rawValue, path: endpoint.path, body: endpoint.body ?? [],
                    password: password)
            } catch {
                throw .authorization("\(error)")
            }
        }
    }
}
