import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// `directory.*`: one member's entry, the member's own profile refreshed, and roles (admins);
    /// `contract.moduleDisabled` when the manifest disables the directory. Searches (paged
    /// `DirectorySearch` values) are not in the protocol yet.
    var directoryMethods: ContractMethods {
        let directory = community.directory
        var methods = ContractMethods()
        methods.asynchronous["directory.member"] = { call in
            let directory = try Self.required(directory, "directory")
            let userID = try call.params.userID("userID")
            return Self.member(try await mapping("directory") { try await directory.member(userID) })
        }
        methods.asynchronous["directory.refreshOwnProfile"] = { _ in
            let directory = try Self.required(directory, "directory")
            return Self.member(try await mapping("directory") { try await directory.refreshOwnProfile() })
        }
        methods.asynchronous["directory.assignRole"] = { call in
            let directory = try Self.required(directory, "directory")
            let role = try call.params.string("role")
            let userID = try call.params.userID("userID")
            let changed = try await mapping("directory") { try await directory.assignRole(role, to: userID) }
            return .object(["changed": .bool(changed)])
        }
        methods.asynchronous["directory.removeRole"] = { call in
            let directory = try Self.required(directory, "directory")
            let role = try call.params.string("role")
            let userID = try call.params.userID("userID")
            let changed = try await mapping("directory") { try await directory.removeRole(role, from: userID) }
            return .object(["changed": .bool(changed)])
        }
        return methods
    }

    static func member(_ member: DirectoryMember) -> JSONValue {
        .object([
            "userID": .string(member.userID.rawValue), "displayName": member.displayName.map(JSONValue.string),
            "avatarURL": member.avatarURL.map(JSONValue.string), "roles": .array(member.roles.map(JSONValue.string)),
        ])
    }
}
