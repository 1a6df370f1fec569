// The `symorva` REPL harness. Everything lives in SymorvaREPL so that tests can run the same
// session in-process; this file only hands it the process's arguments, environment and the
// features' commands.
import Foundation
import SymorvaREPL

let status = await REPLProgram.run(
    arguments: Array(CommandLine.arguments.dropFirst()),
    environment: ProcessInfo.processInfo.environment,
    commands: SessionCommands.all + WalletCommands.commands + ChatCommands.all + MeetingCommands.commands
        + DirectoryCommands.commands + PushCommands.commands + StudioCommands.commands + CryptoCommands.commands,
    launch: CommunitySlot.launchIfConfigured(in:))
exit(status)
