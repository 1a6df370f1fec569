import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// Room management beyond the join rule (name, topic, avatar, history visibility, power
    /// levels, knocking), one's own profile and the users one ignores: `chat.*` on the chat client. Each
    /// change checks the account's power level first and waits for the server (the Swift API's
    /// rules); nothing is optimistic.
    var roomManagementMethods: ContractMethods {
        let chat = community.chat
        var methods = ContractMethods()
        methods.asynchronous["chat.setRoomName"] = { call in
            let roomID = try call.params.roomID("roomID")
            let name = try call.params.string("name")
            try await mapping("chat") { try await chat.setRoomName(name, in: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.setRoomTopic"] = { call in
            let roomID = try call.params.roomID("roomID")
            let topic = try call.params.string("topic")
            try await mapping("chat") { try await chat.setRoomTopic(topic, in: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.setHistoryVisibility"] = { call in
            let roomID = try call.params.roomID("roomID")
            guard let visibility = HistoryVisibility(rawValue: try call.params.string("visibility")) else {
                throw ContractError.invalidParams("visibility", "world_readable, shared, invited or joined")
            }
            try await mapping("chat") { try await chat.setHistoryVisibility(visibility, roomID: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.setPowerLevel"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            guard let level = try call.params.optionalInt("level", in: -1_000_000...1_000_000) else {
                throw ContractError.invalidParams("level", "an integer in -1000000...1000000")
            }
            try await mapping("chat") { try await chat.setPowerLevel(level, for: userID, roomID: roomID) }
            return .object([:])
        }
        // The room's avatar from an image file of the host's (power level checked before the
        // upload); the answer is its mxc URI.
        methods.asynchronous["chat.setRoomAvatar"] = { call in
            let roomID = try call.params.roomID("roomID")
            let path = try call.params.string("path")
            let contentType = try call.params.string("contentType")
            let uri = try await mapping("chat") {
                try await chat.setRoomAvatar(fileAt: path, contentType: contentType, in: roomID)
            }
            return .object(["avatarURL": .string(uri.uriString)])
        }
        methods.asynchronous["chat.knock"] = { call in
            let target = try call.params.string("roomIDOrAlias")
            let reason = try call.params.optionalString("reason")
            let via = try call.params.optionalStrings("via") ?? []
            let roomID = try await mapping("chat") { try await chat.knock(target, reason: reason, via: via) }
            return .object(["roomID": .string(roomID.rawValue)])
        }
        methods.asynchronous["chat.knocks"] = { call in
            let roomID = try call.params.roomID("roomID")
            let users = try await mapping("chat") { try await chat.knocks(roomID: roomID) }
            return .object(["userIDs": .array(users.map { .string($0.rawValue) })])
        }
        methods.asynchronous["chat.acceptKnock"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            try await mapping("chat") { try await chat.acceptKnock(from: userID, roomID: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.denyKnock"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            let reason = try call.params.optionalString("reason")
            try await mapping("chat") { try await chat.denyKnock(from: userID, roomID: roomID, reason: reason) }
            return .object([:])
        }
        methods.asynchronous["chat.setDisplayName"] = { call in
            let name = try call.params.string("name")
            try await mapping("chat") { try await chat.setDisplayName(name) }
            return .object([:])
        }
        // The image is read from a file of the host's (as the Swift API's), uploaded, and made the
        // account's avatar; the answer is its mxc URI.
        methods.asynchronous["chat.setAvatar"] = { call in
            let path = try call.params.string("path")
            let contentType = try call.params.string("contentType")
            let uri = try await mapping("chat") { try await chat.setAvatar(fileAt: path, contentType: contentType) }
            return .object(["avatarURL": .string(uri.uriString)])
        }
        methods.asynchronous["chat.ignore"] = { call in
            let userID = try call.params.userID("userID")
            try await mapping("chat") { try await chat.ignore(userID) }
            return .object([:])
        }
        methods.asynchronous["chat.unignore"] = { call in
            let userID = try call.params.userID("userID")
            try await mapping("chat") { try await chat.unignore(userID) }
            return .object([:])
        }
        methods.asynchronous["chat.ignoredUsers"] = { _ in
            let users = try await mapping("chat") { try chat.ignoredUsers() }
            return .object(["userIDs": .array(users.map { .string($0.rawValue) })])
        }
        return methods
    }

    /// The account's devices: `session.devices`, `session.renameDevice`, `session.removeDevice`
    /// (behind the password stage; the password goes straight into a `Secret`).
    var deviceMethods: ContractMethods {
        let session = community.session
        var methods = ContractMethods()
        methods.asynchronous["session.devices"] = { _ in
            .array(try await mapping("session") { try await session.devices() }.map(Self.device))
        }
        methods.asynchronous["session.renameDevice"] = { call in
            let deviceID = try call.params.string("deviceID")
            let name = try call.params.string("name")
            try await mapping("session") { try await session.renameDevice(deviceID, to: name) }
            return .object([:])
        }
        methods.asynchronous["session.removeDevice"] = { call in
            let deviceID = try call.params.string("deviceID")
            let password = try call.params.secret("password")
            try await mapping("session") { try await session.removeDevice(deviceID, password: password) }
            return .object([:])
        }
        return methods
    }

    static func device(_ device: AccountDevice) -> JSONValue {
        .object([
            "deviceID": .string(device.deviceID), "displayName": device.displayName.map(JSONValue.string),
            "lastSeen": device.lastSeen.map { .number(Double($0.rawValue)) }, "isCurrent": .bool(device.isCurrent),
            "ed25519Key": device.ed25519Key.map(JSONValue.string), "keysChanged": .bool(device.keysChanged),
            "trust": device.trust.map { .string($0.rawValue) },
        ])
    }
}
