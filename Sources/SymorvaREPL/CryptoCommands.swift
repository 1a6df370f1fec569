import SymorvaChat
import SymorvaKit

/// The REPL's end-to-end encryption commands.
package enum CryptoCommands {
    /// Every command of this group.
    package static var commands: [REPLCommand] { [devices, encryption] }

    /// `encryption <room> [on|keys]`.
    package static let encryption = REPLCommand(
        "encryption", usage: "encryption <room> [on|keys]",
        summary:
            "whether a room is end-to-end encrypted; 'on' turns encryption on for good, 'keys' asks the account's other devices again for missing keys",
        parse: { arguments throws(REPLError) -> (String, String?) in
            let room = try arguments.next()
            let rest = try arguments.rest()
            guard rest.isEmpty || rest == ["on"] || rest == ["keys"] else {
                throw .invalidArgument("expected 'on', 'keys' or nothing")
            }
            return (room, rest.first)
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try ChatCommands.client(context)
            let roomID = try ChatCommands.resolveRoom(arguments.0, context)
            let conversation = try await ChatCommands.failing { () async throws(ChatError) in
                try await chat.conversation(id: roomID)
            }
            switch arguments.1 {
            case "on":
                try await ChatCommands.failing { () async throws(ChatError) in try await conversation.enableEncryption()
                }
            case "keys":
                let count = try await ChatCommands.failing { () async throws(ChatError) in
                    try await conversation.requestMissingKeys()
                }
                context.output.print("\(roomID): \(count) key request(s) sent again")
                return
            default:
                break
            }
            context.output.print("\(roomID): \(conversation.encryption.value)")
        })

    /// `devices [<@user>]`.
    package static let devices = REPLCommand(
        "devices", usage: "devices [<@user>] | devices rename <device> <name>… | devices remove <device>",
        summary: "the account's own devices, or a user's, with their keys (* marks this device, ! a changed key)",
        parse: { arguments throws(REPLError) -> [String] in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            // `rename` and `remove` live in AccountCommands.swift.
            if let first = words.first, DeviceManagementCommands.subcommands.contains(first) {
                try await DeviceManagementCommands.run(words, context)
                return
            }
            var user: UserID?
            if let word = words.first {
                guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
                user = userID
            }
            let community = try await CommunitySlot.community(in: context)
            guard let crypto = community.module(AccountCrypto.self) else {
                throw .commandFailed("not signed in")
            }
            guard let user, user != crypto.userID else {
                // The account's own: every device the homeserver lists, with the keys verified here.
                let own: [AccountDevice]
                do throws(SessionError) { own = try await community.session.devices() } catch {
                    throw .commandFailed("devices not read: \(error)")
                }
                for device in own {
                    let name = device.displayName.map { " \"\(TerminalText.escaped($0))\"" } ?? ""
                    let key = device.ed25519Key.map { " ed25519:\($0)" } ?? " (no verified keys)"
                    let flag = device.keysChanged ? " !keys changed" : ""
                    context.output.print("\(device.isCurrent ? "*" : " ") \(device.deviceID)\(name)\(key)\(flag)")
                }
                return
            }
            let listed: [CryptoDevice]
            do throws(CryptoError) {
                listed = try await crypto.devices(of: user)
            } catch {
                throw .commandFailed("devices not read: \(error)")
            }
            guard !listed.isEmpty else {
                context.output.print("no devices known for \(user)")
                return
            }
            for device in listed {
                let flag = device.keysChanged ? " !keys changed" : ""
                let name = device.displayName.map { " \"\(TerminalText.escaped($0))\"" } ?? ""
                context.output.print("  \(device.deviceID)\(name) ed25519:\(device.ed25519)\(flag)")
            }
        })
}
