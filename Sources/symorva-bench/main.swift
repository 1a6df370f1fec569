// symorva-bench: programs that print figures. `symorva-bench MODE [ARGUMENTS…]`.
//
// A minimal dispatcher until the benchmark branch's `BenchmarkModes` registry lands; a mode is
// a type with `name`, `argumentsSynopsis`, `summary` and `run(arguments:) async -> Int32`.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
let loginRestore = LoginRestoreBenchmark()
switch arguments.first {
case loginRestore.name:
    exit(await loginRestore.run(arguments: Array(arguments.dropFirst())))
default:
    FileHandle.standardError.write(
        Data(
            """
            usage: symorva-bench MODE [ARGUMENTS…]

            modes:
              \(loginRestore.name) \(loginRestore.argumentsSynopsis)  \(loginRestore.summary)

            """.utf8))
    exit(2)
}
