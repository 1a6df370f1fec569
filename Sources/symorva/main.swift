// The `symorva` program: the REPL harness, or with `serve --stdio` the language-neutral contract
// over standard streams (docs/contract.md). Everything lives in SymorvaREPL and SymorvaContract
// so that tests can run the same code in-process; this file only hands them the process's
// arguments, environment and the features' commands.
import Foundation
import SymorvaContract
import SymorvaREPL

let arguments = Array(CommandLine.arguments.dropFirst())
let status: Int32
if arguments.first == "serve" {
    status = await ContractStdioServer.run(
        arguments: Array(arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
} else {
    status = await REPLProgram.run(
        arguments: arguments,
        environment: ProcessInfo.processInfo.environment,
        commands: SessionCommands.all + WalletCommands.commands + ChatCommands.all + MeetingCommands.commands
            + DirectoryCommands.commands + PushCommands.commands + StudioCommands.commands + CryptoCommands.commands
            + DeviceManagementCommands.all,
        launch: CommunitySlot.launchIfConfigured(in:))
}
exit(status)
