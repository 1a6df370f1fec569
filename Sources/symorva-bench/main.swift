// symorva-bench: programs that print figures.
//
// A stand-in until the mode dispatcher of the `bench` branch is merged: it runs the one mode
// this branch adds, `symorva-bench wallet [--transfers N] [--warmup N]`. When merging, keep the
// dispatcher's main.swift and register `WalletBenchmark()` in `BenchmarkModes.all`.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
let wallet = WalletBenchmark()
guard arguments.first == wallet.name else {
    print("usage: symorva-bench \(wallet.name) \(wallet.argumentsSynopsis)")
    exit(2)
}
exit(await wallet.run(arguments: Array(arguments.dropFirst())))
