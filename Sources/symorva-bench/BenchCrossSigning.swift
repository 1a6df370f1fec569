import SymorvaCrypto
import SymorvaE2EE
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Cross-signing for bench accounts whose devices the bench made itself (keys uploaded by a bare
/// crypto engine): a new identity uploaded (an account's first needs no password) and every
/// device signed by its self-signing key, as a client that verified them would.
enum BenchCrossSigning {
    static func crossSign(
        _ userID: UserID, devices: [String: JSONValue], token: Secret<String>, base: HomeserverURL,
        transport: any HTTPTransport
    ) async throws {
        let keys = try CrossSigningKeys(newFor: userID, driver: OlmCryptoDriver())
        let identity = try await MatrixExchange.perform(
            try E2EEAPI.uploadSigningKeys(try keys.uploadBody()), on: base, token: token, timeout: nil,
            transport: transport)
        guard identity.isSuccess else { throw BenchFailure("keys/device_signing/upload answered \(identity.status)") }
        var signed: [String: JSONValue] = [:]
        for (deviceID, deviceKeys) in devices { signed[deviceID] = try keys.signDevice(deviceKeys) }
        let signatures = try await MatrixExchange.perform(
            try E2EEAPI.uploadSignatures([userID.rawValue: signed]), on: base, token: token, timeout: nil,
            transport: transport)
        guard signatures.isSuccess, case .object(let top)? = try? JSONValue(parsing: signatures.body),
            top["failures"] == nil || top["failures"] == .object([:])
        else { throw BenchFailure("keys/signatures/upload answered \(signatures.status)") }
    }
}
