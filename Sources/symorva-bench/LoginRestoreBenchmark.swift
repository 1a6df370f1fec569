import Foundation
import SymorvaFeatureKit
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `login-restore`: time from process start to "signed in" restored from the store.
///
/// The parent prepares a data folder with one signed-in account (registered through a
/// scripted homeserver, so no server is needed), then spawns itself with `--child`
/// `runs` times (plus one warm-up run that is not counted). Each child builds a
/// `SymorvaCommunity` with the default environment (libcurl transport, key files, SQLite)
/// pointed at a homeserver that is not there, calls `launch()` and prints `signed in` as soon
/// as the session state says so. The figure is the wall time from `posix_spawn` in the parent
/// to reading that line: process start, dynamic loading, opening the account's database,
/// decrypting the tokens — everything a relaunched app does before it can show the account.
struct LoginRestoreBenchmark: BenchmarkMode {
    /// The mode's name on the command line.
    var name: String { "login-restore" }
    /// Its arguments.
    var argumentsSynopsis: String { "[--runs N]" }
    /// What it measures.
    var summary: String { "process start → signed in, restored from the store (median, p90)" }

    /// Runs the parent (or, with `--child --data DIR`, one measured child).
    func run(arguments: [String]) async -> Int32 {
        if arguments.first == "--child" {
            guard arguments.count == 3, arguments[1] == "--data" else { return 2 }
            return await Self.child(dataDirectory: arguments[2])
        }
        var runs = 20
        if arguments.count == 2, arguments[0] == "--runs", let value = Int(arguments[1]), value > 0 {
            runs = value
        } else if !arguments.isEmpty {
            FileHandle.standardError.write(Data("usage: symorva-bench \(name) \(argumentsSynopsis)\n".utf8))
            return 2
        }
        return await parent(runs: runs)
    }

    /// The manifest of the benchmark community: a homeserver nobody answers at.
    static let configuration = SymorvaConfiguration(
        community: .init(name: "Benchmark"),
        homeserver: .init(url: HomeserverURL("http://127.0.0.1:9")!, serverName: "localhost"),
        services: .init(url: URL(string: "http://127.0.0.1:9")!),
        modules: .init(
            meetings: .init(isEnabled: true), aiStudio: .init(isEnabled: false),
            wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))

    private static func child(dataDirectory: String) async -> Int32 {
        let community = SymorvaCommunity(
            configuration: configuration, environment: SymorvaEnvironment(dataDirectory: dataDirectory))
        await community.launch()
        guard case .signedIn = community.session.state.value else {
            print("not signed in: \(community.session.state.value)")
            return 1
        }
        // Unbuffered: the parent stops its clock when it reads this line.
        FileHandle.standardOutput.write(Data("signed in\n".utf8))
        return 0
    }

    private func parent(runs: Int) async -> Int32 {
        let folder = NSTemporaryDirectory() + "symorva-bench-restore-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let preparation = SymorvaCommunity(
            configuration: Self.configuration,
            environment: SymorvaEnvironment(
                dataDirectory: folder, transport: ScriptedHTTPTransport.registrationServer()))
        do {
            let account = try await preparation.session.register(username: "bench", password: Secret("bench"))
            print("prepared \(account) in \(folder)")
        } catch {
            print("preparing the data folder failed: \(error)")
            return 1
        }
        await preparation.shutdown()
        guard let executable = Bundle.main.executablePath else { return 1 }

        var milliseconds: [Double] = []
        for run in 0...runs {
            guard let elapsed = Self.timeChild(executable: executable, arguments: [name, "--child", "--data", folder])
            else {
                print("run \(run): the child did not print 'signed in'")
                return 1
            }
            if run > 0 { milliseconds.append(elapsed) }  // run 0 warms the page cache
        }
        let sorted = milliseconds.sorted()
        func rank(_ fraction: Double) -> Double {
            sorted[min(sorted.count, max(1, Int((fraction * Double(sorted.count)).rounded(.up)))) - 1]
        }
        let median =
            sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        print(
            "login-restore: runs=\(runs) median=\(Self.format(median)) ms p90=\(Self.format(rank(0.9))) ms "
                + "min=\(Self.format(sorted.first!)) ms max=\(Self.format(sorted.last!)) ms (goal: median < 50 ms)")
        return 0
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    /// Spawns `executable` and returns the milliseconds until it printed `signed in`.
    private static func timeChild(executable: String, arguments: [String]) -> Double? {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t?
        #else
            var actions = posix_spawn_file_actions_t()
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }

        var pid: pid_t = 0
        let start = ContinuousClock.now
        guard posix_spawn(&pid, executable, &actions, nil, argv, environ) == 0 else { return nil }
        close(fds[1])
        var output: [UInt8] = []
        var elapsed: Duration?
        var buffer = [UInt8](repeating: 0, count: 256)
        while elapsed == nil {
            let count = buffer.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, $0.count) }
            if count <= 0 { break }
            output += buffer[0..<count]
            if String(decoding: output, as: UTF8.self).contains("signed in\n") { elapsed = ContinuousClock.now - start }
        }
        close(fds[0])
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        guard let elapsed else { return nil }
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) * 1000 + Double(attoseconds) / 1e15
    }
}

extension ScriptedHTTPTransport {
    /// Just enough of a homeserver to register one account: `/versions` and the two `/register`
    /// calls of user-interactive authentication, answered from a script.
    static func registrationServer() -> ScriptedHTTPTransport {
        let transport = ScriptedHTTPTransport(fallback: { _ in .json(404, #"{"errcode":"M_UNRECOGNIZED"}"#) })
        transport.on("GET", "/_matrix/client/versions") { _ in .json(200, #"{"versions":["v1.11"]}"#) }
        transport.on("POST", "/_matrix/client/v3/register") { request in
            guard String(decoding: request.body, as: UTF8.self).contains("\"auth\"") else {
                return .json(401, #"{"flows":[{"stages":["m.login.dummy"]}],"session":"bench","params":{}}"#)
            }
            return .json(
                200,
                #"{"user_id":"@bench:localhost","device_id":"BENCHDEVICE","access_token":"syt_bench_access","#
                    + #""refresh_token":"syr_bench_refresh","expires_in_ms":86400000}"#)
        }
        return transport
    }
}
