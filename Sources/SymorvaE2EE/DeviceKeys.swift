import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix

/// Reading the devices of a `keys/query` answer: a device is kept only when its keys object is
/// consistent (its `user_id` and `device_id` are the ones it is listed under, it has one
/// Curve25519 and one Ed25519 key for that device) and carries a valid self-signature, by its
/// own Ed25519 key, over its canonical JSON without `signatures` and `unsigned`.
package enum DeviceKeys {
    /// The verified devices of the answer, by user, and how many devices were refused.
    package static func verifiedDevices(in answer: JSONValue, driver: any CryptoDriver) -> (
        [UserID: [CryptoStore.Device]], Int
    ) {
        guard case .object(let top) = answer, case .object(let users)? = top["device_keys"] else { return ([:], 0) }
        var result: [UserID: [CryptoStore.Device]] = [:]
        var refused = 0
        for (userText, devicesValue) in users {
            guard let user = UserID(userText), case .object(let devices) = devicesValue else { continue }
            var verified: [CryptoStore.Device] = []
            for (deviceID, object) in devices {
                if let device = verify(object, user: user, deviceID: deviceID, driver: driver) {
                    verified.append(device)
                } else {
                    refused += 1
                }
            }
            result[user] = verified
        }
        return (result, refused)
    }

    /// Those of `users` the `keys/query` answer speaks for: listed under `device_keys` (with no
    /// devices, as the case may be) and not on a server named in `failures`. The others stay
    /// outdated with their devices as they were: a server that could not be reached says nothing
    /// about who has which device.
    package static func answeredUsers(in answer: JSONValue, among users: [UserID]) -> [UserID] {
        guard case .object(let top) = answer, case .object(let listed)? = top["device_keys"] else { return [] }
        var unreachable: Set<String> = []
        if case .object(let failures)? = top["failures"] { unreachable = Set(failures.keys) }
        return users.filter { listed[$0.rawValue] != nil && !unreachable.contains($0.serverName) }
    }

    /// The device described by `object` when it is consistent and self-signed, else `nil`.
    package static func verify(_ object: JSONValue, user: UserID, deviceID: String, driver: any CryptoDriver)
        -> CryptoStore.Device?
    {
        guard case .object(var members) = object,
            members["user_id"] == .string(user.rawValue), members["device_id"] == .string(deviceID),
            case .object(let keys)? = members["keys"],
            case .string(let curve25519)? = keys["curve25519:\(deviceID)"],
            case .string(let ed25519)? = keys["ed25519:\(deviceID)"],
            case .object(let signatures)? = members["signatures"],
            case .object(let byUser)? = signatures[user.rawValue],
            case .string(let signature)? = byUser["ed25519:\(deviceID)"]
        else { return nil }
        var displayName: String?
        if case .object(let unsigned)? = members["unsigned"], case .string(let name)? = unsigned["device_display_name"]
        {
            displayName = name
        }
        members["signatures"] = nil
        members["unsigned"] = nil
        guard let canonical = try? JSONValue.object(members).canonicalEncoding(),
            (try? driver.verifyEd25519(signature: signature, of: canonical, key: ed25519)) != nil,
            (try? Ed25519Check.keyBytes(curve25519)) != nil
        else { return nil }
        return CryptoStore.Device(
            userID: user, deviceID: deviceID, curve25519: curve25519, ed25519: ed25519, displayName: displayName,
            keyChanged: false)
    }
}
