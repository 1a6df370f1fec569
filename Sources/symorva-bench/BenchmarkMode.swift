import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One benchmark program: `symorva-bench <name> [arguments…]`.
///
/// Adding a mode is one new file with a type conforming to this protocol, plus its line in
/// ``BenchmarkModes/all``.
protocol BenchmarkMode: Sendable {
    /// The word that selects the mode on the command line (`runtime`, `ingest`).
    var name: String { get }
    /// The mode's arguments for the usage text (`FILE`, `[--events N]`), or empty.
    var argumentsSynopsis: String { get }
    /// One line saying what the mode measures.
    var summary: String { get }
    /// Runs the benchmark and prints its figures; returns the process exit status (2 for bad
    /// arguments, after printing the mode's usage).
    func run(arguments: [String]) async -> Int32
}

/// The registry of benchmark modes.
enum BenchmarkModes {
    /// Every mode, in the order the usage lists them. Add new modes here.
    static let all: [any BenchmarkMode] =
        [
            RuntimeBenchmark(),
            StaticBenchmarkMode(IngestBenchmark.self),
            StaticBenchmarkMode(GenerateSyncBenchmark.self),
            StaticBenchmarkMode(ColdStartBenchmark.self),
            StaticBenchmarkMode(TimelineBenchmark.self),
            StaticBenchmarkMode(ThreadListBenchmark.self),
            StaticBenchmarkMode(StoreWriteBenchmark.self),
            WalletBenchmark(),
            LoginRestoreBenchmark(),
            MeetingsBenchmark(),
            DirectoryBenchmark(),
            FirstListBenchmark(),
            HierarchyBenchmark(),
            StudioBenchmark(),
            MegolmBenchmark(),
            E2EESendBenchmark(),
            BackupLagBenchmark(),
            RecoveryBenchmark(),
            VerificationBenchmark(),
            LockBenchmark(),
            PushBenchmark(),
            PushRulesBenchmark(),
            ContractBenchmark(),
            ContractSendBenchmark(),
            MediaUploadBenchmark(),
        ] + platformModes

    #if os(Linux)
        /// Modes that need the Linux media engine.
        static let platformModes: [any BenchmarkMode] = [MediaBenchmark()]
    #else
        static let platformModes: [any BenchmarkMode] = []
    #endif

    /// The mode called `name`, if any.
    static func mode(named name: String) -> (any BenchmarkMode)? {
        all.first { $0.name == name }
    }

    /// Prints the usage to standard error.
    static func printUsage(unknown: String?) {
        var text = ""
        if let unknown { text += "symorva-bench: unknown mode '\(unknown)'\n" }
        text += "usage: symorva-bench MODE [ARGUMENTS…]\n\nmodes:\n"
        let width = all.map { ($0.name + " " + $0.argumentsSynopsis).count }.max() ?? 0
        for mode in all {
            let head = mode.name + " " + mode.argumentsSynopsis
            text += "  " + head + String(repeating: " ", count: width - head.count + 2) + mode.summary + "\n"
        }
        writeStandardError(text)
    }
}

/// Writes `text` to standard error.
func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { buffer in
        guard let base = buffer.baseAddress else { return }
        _ = write(2, base, buffer.count)
    }
}

/// Ends the process with `status`.
func exitProcess(_ status: Int32) -> Never {
    exit(status)
}

/// A mode written as a type with static members (the chat store modes).
protocol StaticBenchmark {
    /// The word that selects the mode.
    static var name: String { get }
    /// The mode's arguments for the usage text.
    static var argumentsSynopsis: String { get }
    /// One line saying what the mode measures.
    static var summary: String { get }
    /// Runs the benchmark; returns the exit status.
    static func run(arguments: [String]) async -> Int32
}

/// Adapts a ``StaticBenchmark`` type to ``BenchmarkMode``.
struct StaticBenchmarkMode<Mode: StaticBenchmark>: BenchmarkMode {
    init(_ mode: Mode.Type) {}
    var name: String { Mode.name }
    var argumentsSynopsis: String { Mode.argumentsSynopsis }
    var summary: String { Mode.summary }
    func run(arguments: [String]) async -> Int32 { await Mode.run(arguments: arguments) }
}

/// The dev servers a benchmark measures against, from the environment that
/// `source "$(Scripts/dev-server envfile)"` sets.
/// A benchmark mode against the dev servers (`SYMORVA_*` env) whose arguments are `--name N`
/// options: it reads them into its settings, prints its usage after a bad one (exit status 2),
/// and measures.
protocol DevServerBenchmark: BenchmarkMode {
    /// What the options set.
    associatedtype Settings: Sendable
    /// The `--name` options the mode takes.
    var optionNames: Set<String> { get }
    /// The settings from `options` (a bad value goes to `options.problems`).
    func settings(from options: inout Options) -> Settings
    /// Measures and prints the figures.
    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws
}

extension DevServerBenchmark {
    func run(arguments: [String]) async -> Int32 {
        var options = Options(arguments, known: optionNames)
        let settings = settings(from: &options)
        guard options.problems.isEmpty else {
            print("usage: symorva-bench \(name) \(argumentsSynopsis)  (\(options.problems.joined(separator: "; ")))")
            return 2
        }
        return await DevServers.run(name) { homeserver, services in
            try await measure(settings, homeserver: homeserver, services: services)
        }
    }
}

enum DevServers {
    /// Runs `body` with the homeserver's and the services' URLs: exit status 0 when it
    /// succeeds, 1 when it throws, 2 when the variables are missing (each said on the output,
    /// prefixed with the mode's name).
    static func run(_ mode: String, _ body: (URL, URL) async throws -> Void) async -> Int32 {
        let variables = ProcessInfo.processInfo.environment
        guard let homeserver = variables["SYMORVA_HOMESERVER_URL"].flatMap(URL.init(string:)),
            let services = variables["SYMORVA_SERVICES_URL"].flatMap(URL.init(string:))
        else {
            print("\(mode): set SYMORVA_HOMESERVER_URL and SYMORVA_SERVICES_URL (source Scripts/dev-server envfile)")
            return 2
        }
        do {
            try await body(homeserver, services)
            return 0
        } catch {
            print("\(mode): failed: \(error)")
            return 1
        }
    }
}
