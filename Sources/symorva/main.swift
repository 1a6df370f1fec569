// The `symorva` REPL harness. Everything lives in SymorvaREPL so that tests can run the same
// session in-process; this file only hands it the process's arguments and environment.
import Foundation
import SymorvaREPL

let status = await REPLProgram.run(
    arguments: Array(CommandLine.arguments.dropFirst()),
    environment: ProcessInfo.processInfo.environment,
    commands: WalletCommands.commands + ChatCommands.all)
exit(status)
