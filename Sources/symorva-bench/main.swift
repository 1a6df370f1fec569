// symorva-bench: programs that print figures (see docs/benchmarks.md).
//
// `symorva-bench MODE [ARGUMENTS…]` runs one benchmark mode from ``BenchmarkModes/all``.
// An unknown or missing mode prints the usage and exits with status 2.

import Dispatch

/// Runs the selected mode in a detached task and exits with its status.
///
/// The main thread only waits on a semaphore. An `async` top level would park it in
/// `dispatch_main`, whose `sigsuspend` crashes valgrind 3.19, and callgrind instruction counts
/// are how the runtime's hot path is compared (`Scripts/runtime-callgrind`).
func main(_ arguments: [String]) -> Never {
    guard let name = arguments.first, let mode = BenchmarkModes.mode(named: name) else {
        BenchmarkModes.printUsage(unknown: arguments.first)
        exitProcess(2)
    }
    let modeArguments = Array(arguments.dropFirst())
    Task.detached {
        exitProcess(await mode.run(arguments: modeArguments))
    }
    while true { DispatchSemaphore(value: 0).wait() }
}

main(Array(CommandLine.arguments.dropFirst()))
