import Foundation
import SymorvaCrypto
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaRuntime
import SymorvaTransport

/// Everything a `SymorvaCommunity` (SymorvaKit) needs from the world it runs in: where to keep data, how to
/// talk HTTP, where the keys that protect secrets come from, the clocks, and where traces and
/// logs go.
///
/// The defaults suit an app or the REPL; tests pass their own temporary data directory, a fake
/// or wrapped transport, a manual clock, and a private tracer and log center.
public struct SymorvaEnvironment: Sendable {
    /// The folder of the SDK's data: `accounts.json`, one folder per account under `accounts/`,
    /// and (with the default key provider) the key files under `keys/`.
    public var dataDirectory: String
    /// The HTTP transport for the homeserver and the community services.
    public var transport: any HTTPTransport
    /// Supplies the per-account key that encrypts tokens at rest.
    public var keyProvider: any KeyProvider
    /// The monotonic clock timers sleep on (refresh before expiry, rate-limit waits).
    public var clock: any RuntimeClock
    /// The wall clock that stamps token expiry.
    public var wallClock: any WallClock
    /// Where every host of the community traces its transitions.
    public var tracer: Tracer
    /// Where the community's log lines go.
    public var logCenter: LogCenter
    /// The name new devices get (other members see it in their device lists); `nil` lets the
    /// server choose.
    public var deviceDisplayName: String?

    /// An environment; every argument left out takes its default.
    ///
    /// - Parameters:
    ///   - dataDirectory: defaults to ``defaultDataDirectory(environment:)``.
    ///   - transport: defaults to a ``/SymorvaTransport/CurlTransport`` logging to `logCenter`.
    ///   - keyProvider: defaults to a ``/SymorvaCrypto/FileKeyProvider`` in `<dataDirectory>/keys` (key files
    ///     with mode 0600). Apple apps pass a Keychain-backed provider.
    public init(
        dataDirectory: String? = nil,
        transport: (any HTTPTransport)? = nil,
        keyProvider: (any KeyProvider)? = nil,
        clock: any RuntimeClock = SystemClock(),
        wallClock: any WallClock = SystemWallClock(),
        tracer: Tracer = .shared,
        logCenter: LogCenter = .shared,
        deviceDisplayName: String? = "SymorvaKit"
    ) {
        let directory = dataDirectory ?? Self.defaultDataDirectory()
        self.dataDirectory = directory
        self.transport =
            transport ?? CurlTransport(logger: Logger(category: "transport", center: logCenter))
        self.keyProvider = keyProvider ?? FileKeyProvider(directory: directory + "/keys")
        self.clock = clock
        self.wallClock = wallClock
        self.tracer = tracer
        self.logCenter = logCenter
        self.deviceDisplayName = deviceDisplayName
    }

    /// The SDK's default data folder.
    ///
    /// - Linux and other non-Apple systems: `$XDG_DATA_HOME/symorva`, else
    ///   `$HOME/.local/share/symorva` (the XDG base directory specification).
    /// - Apple platforms: `Application Support/symorva` of the app's container.
    public static func defaultDataDirectory(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String {
        #if canImport(Darwin)
            if let support = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask).first {
                return support.appendingPathComponent("symorva").path
            }
        #endif
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return trimmingTrailingSlashes(xdg) + "/symorva"
        }
        let home = environment["HOME"].map(trimmingTrailingSlashes) ?? NSHomeDirectory()
        return home + "/.local/share/symorva"
    }

    /// A logger for `category` writing to this environment's log center.
    package func logger(_ category: String) -> Logger { Logger(category: category, center: logCenter) }

    private static func trimmingTrailingSlashes(_ path: String) -> String {
        var path = path
        while path.count > 1 && path.hasSuffix("/") { path.removeLast() }
        return path
    }
}
