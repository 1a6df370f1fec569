// symorva-bench: programs that print figures (see docs/benchmarks.md).
//
// `symorva-bench MODE [ARGUMENTS…]` runs one benchmark mode from ``BenchmarkModes/all``.
// An unknown or missing mode prints the usage and exits with status 2.

let arguments = Array(CommandLine.arguments.dropFirst())
guard let name = arguments.first, let mode = BenchmarkModes.mode(named: name) else {
    BenchmarkModes.printUsage(unknown: arguments.first)
    exitProcess(2)
}
let status = await mode.run(arguments: Array(arguments.dropFirst()))
exitProcess(status)
