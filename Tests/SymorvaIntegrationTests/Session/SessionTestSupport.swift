import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Synchronization
import Testing

@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaMatrix
@testable import SymorvaSession
@testable import SymorvaTransport

/// A fresh data folder under the system's temporary folder, deleted when the test is done.
final class TemporaryDataDirectory: Sendable {
    let path: String

    init(_ label: String = "session") {
        path = NSTemporaryDirectory() + "symorva-\(label)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Counts the requests that go through it by path, and can hold the responses of one path at a
/// gate (after the server answered, ignoring cancellation, like I/O that cannot be interrupted).
final class RecordingTransport: HTTPFileTransport {
    let base: any HTTPTransport
    private let counts = Lock<[String: Int]>([:])
    private let held = Lock<(path: String, gate: TestGate)?>(nil)

    init(_ base: any HTTPTransport) { self.base = base }

    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let path = request.url.path
        // Media transfers stream through the base when it can (the libcurl transport), never
        // with an empty body.
        if request.bodyFile != nil || request.responseFile != nil, !(base is any HTTPFileTransport) {
            throw .fileAccess
        }
        counts.withLock { $0[path, default: 0] += 1 }
        let response = try await base.send(request)
        if let (heldPath, gate) = held.withLock({ $0 }), path.hasSuffix(heldPath) {
            await gate.wait()
        }
        return response
    }

    /// How many requests went to a path ending in `suffix`.
    func count(_ suffix: String) -> Int {
        counts.withLock { counts in counts.filter { $0.key.hasSuffix(suffix) }.values.reduce(0, +) }
    }

    /// Every request so far.
    var total: Int { counts.withLock { $0.values.reduce(0, +) } }

    /// Holds responses of paths ending in `suffix` at `gate` from now on.
    func hold(_ suffix: String, at gate: TestGate) { held.withLock { $0 = (suffix, gate) } }
}

/// A transport that fails every request: proves that something needs no network.
final class OfflineTransport: HTTPTransport {
    private let attempts = Atomic<Int>(0)
    private let paths = Lock<[String]>([])
    var attemptCount: Int { attempts.load(ordering: .relaxed) }
    /// The paths of every attempted request, in order.
    var attemptedPaths: [String] { paths.withLock { $0 } }
    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        attempts.add(1, ordering: .relaxed)
        paths.withLock { $0.append(request.url.path) }
        throw .connectFailed
    }
}

/// A wall clock stopped at one instant: the client never believes a token expired.
struct FrozenWallClock: WallClock {
    let now: Timestamp
    init() { now = SystemWallClock().now }
}

extension DevEnvironment {
    /// The community manifest for the dev servers, built in code.
    var configuration: SymorvaConfiguration {
        SymorvaConfiguration(
            community: .init(name: "Integration"),
            homeserver: .init(url: HomeserverURL(homeserverURL.absoluteString)!, serverName: serverName),
            services: .init(url: servicesURL),
            modules: .init(
                meetings: .init(isEnabled: true), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
    }

    /// The manifest with the permissive room key policy (`allDevices`): for tests whose other
    /// participant has no cross-signing (matrix-nio), which the default policy (MSC4153's
    /// `crossSignedOnly`) sends no room key to and whose messages it does not show.
    var permissiveConfiguration: SymorvaConfiguration {
        var configuration = configuration
        configuration.encryption.roomKeyPolicy = .allDevices
        return configuration
    }

    /// The refreshable access token lifetime the dev servers run with, when it is short enough
    /// for refresh tests (at most a minute).
    static var shortTokenLifetime: Duration? {
        guard let text = ProcessInfo.processInfo.environment["SYMORVA_ACCESS_TOKEN_LIFETIME"], text.hasSuffix("s"),
            let seconds = Int(text.dropLast()), seconds <= 60
        else { return nil }
        return .seconds(seconds)
    }

    /// The server admin's credentials from the env file.
    static var admin: (user: String, password: String)? {
        let variables = ProcessInfo.processInfo.environment
        guard let user = variables["SYMORVA_ADMIN_USER"], let password = variables["SYMORVA_ADMIN_PASSWORD"] else {
            return nil
        }
        return (user, password)
    }
}

/// The communities a test made with ``CommunityFixture``, shut down when the test ends however
/// it ends (a community left running keeps syncing and refreshing tokens against the shared
/// servers for the rest of the run).
final class FixtureRun: Sendable {
    @TaskLocal static var current: FixtureRun?
    private let communities = Lock<[SymorvaCommunity]>([])

    func add(_ community: SymorvaCommunity) { communities.withLock { $0.append(community) } }

    /// Shuts every community down (a second shutdown of one the test shut down does nothing).
    func end() async {
        for community in communities.withLock({ $0 }) { await community.shutdown() }
    }
}

/// Runs each test of a suite in a ``FixtureRun``: `@Suite(…, .shutsDownCommunities)`.
struct ShutsDownCommunities: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite else { return try await function() }
        let run = FixtureRun()
        try await FixtureRun.$current.withValue(run) {
            do {
                try await function()
            } catch {
                await run.end()
                throw error
            }
            await run.end()
        }
    }
}

extension Trait where Self == ShutsDownCommunities {
    /// Shuts down, after each test, every community the test made with ``CommunityFixture``.
    static var shutsDownCommunities: Self { ShutsDownCommunities() }
}

/// A community on the dev servers with its own data folder, tracer and log capture. Made inside
/// a suite with the ``ShutsDownCommunities`` trait, it is shut down when the test ends.
struct CommunityFixture {
    let environment = DevEnvironment.current!
    let data: TemporaryDataDirectory
    let transport: RecordingTransport
    let tracer = Tracer()
    let trace = ObservableTraceRecorder()
    let logs = CapturingLogSink()
    let logCenter = LogCenter(threshold: .trace)
    let community: SymorvaCommunity

    init(
        data: TemporaryDataDirectory = TemporaryDataDirectory(), transport: (any HTTPTransport)? = nil,
        clock: any RuntimeClock = SystemClock(), wallClock: any WallClock = SystemWallClock(),
        modules: [AccountModuleFactory] = AccountModuleFactory.standard, configuration: SymorvaConfiguration? = nil
    ) {
        self.data = data
        let recording = RecordingTransport(transport ?? CurlTransport())
        self.transport = recording
        tracer.addSink(trace)
        tracer.addSink(LoggingTraceSink(logger: Logger(category: "trace", center: logCenter)))
        logCenter.addSink(logs)
        community = SymorvaCommunity(
            configuration: configuration ?? environment.configuration,
            environment: SymorvaEnvironment(
                dataDirectory: data.path, transport: recording, clock: clock, wallClock: wallClock, tracer: tracer,
                logCenter: logCenter),
            modules: modules)
        FixtureRun.current?.add(community)
    }

    /// The running session host of the active account.
    var activeContext: AccountContext? {
        if case .running(let context) = community.sessions.active.value { return context }
        return nil
    }

    /// The active account's current access token (tests use it to talk to the server directly).
    var accessToken: Secret<String>? {
        activeContext.flatMap { SessionRequester.activeToken(in: $0.sessionHost.states.value) }
    }

    /// `GET /account/whoami` with `token`, bypassing the SDK's session.
    func rawWhoAmI(_ token: Secret<String>) async throws(MatrixRequestError) -> UserID {
        let requester = FixedTokenMatrixRequester(
            homeserverURL: environment.configuration.homeserver.url, userID: UserID("@x:localhost"),
            accessToken: token, transport: CurlTransport())
        let response = try await requester.send(AuthAPI.whoami())
        return try! AuthAPI.decode(WhoAmIResponse.self, from: response.body).userID
    }

    /// The account's devices as the server lists them (`GET /devices`), read with `token`.
    func rawDeviceIDs(_ token: Secret<String>) async throws -> [DeviceID] {
        struct Devices: Decodable {
            struct Device: Decodable { let device_id: String }
            let devices: [Device]
        }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: environment.configuration.homeserver.url, userID: UserID("@x:localhost"),
            accessToken: token, transport: CurlTransport())
        let response = try await requester.send(
            MatrixEndpoint(method: .get, path: "/_matrix/client/v3/devices", requiresAuth: true))
        return try JSONDecoder().decode(Devices.self, from: Data(response.body)).devices.map { DeviceID($0.device_id) }
    }
}

/// A password for test accounts.
let testPassword = Secret("correct horse battery staple")
