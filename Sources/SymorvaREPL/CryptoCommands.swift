import SymorvaKit

/// The REPL's end-to-end encryption commands.
public enum CryptoCommands {
    /// Every command of this group.
    public static var commands: [REPLCommand] { [devices] }

    /// `devices [<@user>]`.
    public static let devices = REPLCommand(
        "devices", usage: "devices [<@user>]",
        summary: "the account's own devices, or a user's, with their keys (* marks this device, ! a changed key)",
        parse: { arguments throws(REPLError) -> UserID? in
            guard let word = try arguments.rest().first else { return nil }
            guard let userID = UserID(word) else { throw .invalidArgument("'\(word)' is not a user ID") }
            return userID
        },
        run: { user, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            guard let crypto = community.module(AccountCrypto.self) else {
                throw .commandFailed("not signed in")
            }
            let listed: [CryptoDevice]
            do throws(CryptoError) {
                listed = try await crypto.devices(of: user ?? crypto.userID)
            } catch {
                throw .commandFailed("devices not read: \(error)")
            }
            guard !listed.isEmpty else {
                context.output.print(user == nil ? "no devices known yet" : "no devices known for \(user!)")
                return
            }
            for device in listed {
                let mark = device.userID == crypto.userID && device.deviceID == crypto.deviceID.rawValue ? "*" : " "
                let flag = device.keysChanged ? " !keys changed" : ""
                let name = device.displayName.map { " \"\(TerminalText.escaped($0))\"" } ?? ""
                context.output.print("\(mark) \(device.deviceID)\(name) ed25519:\(device.ed25519)\(flag)")
            }
        })
}
