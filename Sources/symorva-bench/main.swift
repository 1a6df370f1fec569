// symorva-bench: programs that print figures (see docs/benchmarks.md).
//
// `symorva-bench MODE [ARGUMENTS…]`. Each mode is one type with a
// `static func run(arguments:) async -> Int32`; this switch picks it. (The `bench` branch
// brings a `BenchmarkMode` registry; the chat store modes move into it when both land.)

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let arguments = Array(CommandLine.arguments.dropFirst())
let rest = Array(arguments.dropFirst())
let status: Int32
switch arguments.first {
case IngestBenchmark.name: status = await IngestBenchmark.run(arguments: rest)
case GenerateSyncBenchmark.name: status = await GenerateSyncBenchmark.run(arguments: rest)
case ColdStartBenchmark.name: status = await ColdStartBenchmark.run(arguments: rest)
case TimelineBenchmark.name: status = await TimelineBenchmark.run(arguments: rest)
case StoreWriteBenchmark.name: status = await StoreWriteBenchmark.run(arguments: rest)
default:
    var usage = "usage: symorva-bench MODE [ARGUMENTS…]\n\nmodes:\n"
    for (name, synopsis, summary) in [
        (IngestBenchmark.name, IngestBenchmark.argumentsSynopsis, IngestBenchmark.summary),
        (GenerateSyncBenchmark.name, GenerateSyncBenchmark.argumentsSynopsis, GenerateSyncBenchmark.summary),
        (ColdStartBenchmark.name, ColdStartBenchmark.argumentsSynopsis, ColdStartBenchmark.summary),
        (TimelineBenchmark.name, TimelineBenchmark.argumentsSynopsis, TimelineBenchmark.summary),
        (StoreWriteBenchmark.name, StoreWriteBenchmark.argumentsSynopsis, StoreWriteBenchmark.summary),
    ] {
        usage += "  \(name) \(synopsis)\n      \(summary)\n"
    }
    print(usage)
    status = 2
}
exit(status)
