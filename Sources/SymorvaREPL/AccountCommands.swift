import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// `account deactivate`, and the `devices rename|remove` subcommands (kept here, apart from the
/// crypto module's `devices` listing, which dispatches to ``DeviceManagementCommands/run(_:_:)``).
package enum DeviceManagementCommands {
    /// The words after `devices` that this file handles.
    static let subcommands: Set<String> = ["rename", "remove"]

    /// `account deactivate [--password-stdin]`.
    package static var all: [REPLCommand] {
        [.group("account", summary: "the signed-in account", subcommands: [deactivate])]
    }

    static let deactivate = REPLCommand(
        "deactivate", usage: "account deactivate [--password-stdin]",
        summary: "deactivate the account for good (asks for the password) and wipe its data here",
        parse: { arguments throws(REPLError) in try promptless(&arguments) },
        run: { promptless, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            guard let account = community.session.state.value.account else { throw .commandFailed("not signed in") }
            let password = try await context.readSecret(prompt: promptless ? "" : "Password: ")
            do throws(SessionError) { try await community.session.deactivateAccount(password: password) } catch {
                throw .commandFailed("not deactivated: \(error)")
            }
            CommunitySlot.updateModuleSlots(in: context)
            context.output.print("deactivated \(account.userID); its data on this device is wiped")
            if let next = community.session.state.value.account { context.output.print("now active: \(next)") }
        })

    /// `devices rename <device> <name>…` and `devices remove <device> [--password-stdin]`.
    static func run(_ words: [String], _ context: REPLContext) async throws(REPLError) {
        let community = try await CommunitySlot.community(in: context)
        switch (words.first, words.count) {
        case ("rename", 3...):
            let name = words.dropFirst(2).joined(separator: " ")
            do throws(SessionError) { try await community.session.renameDevice(words[1], to: name) } catch {
                throw .commandFailed("not renamed: \(error)")
            }
            context.output.print("renamed \(words[1])")
        case ("remove", 2), ("remove", 3):
            if words.count == 3, words[2] != "--password-stdin" { throw .usage(usage) }
            let password = try await context.readSecret(prompt: words.count == 3 ? "" : "Password: ")
            do throws(SessionError) { try await community.session.removeDevice(words[1], password: password) } catch {
                throw .commandFailed("not removed: \(error)")
            }
            context.output.print("removed \(words[1])")
        default:
            throw .usage(usage)
        }
    }

    static let usage = "devices rename <device> <name>… | devices remove <device> [--password-stdin]"

    private static func promptless(_ arguments: inout REPLArguments) throws(REPLError) -> Bool {
        guard let flag = arguments.optional() else { return false }
        guard flag == "--password-stdin" else { throw arguments.usageError }
        return true
    }
}
