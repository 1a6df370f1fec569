import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import Synchronization

@testable import SymorvaCrypto
@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaSession

/// One simulated device: a real SymorvaKit account stack — `SymorvaCommunity` with the crypto and
/// chat modules as the product composes them, its SQLite files and key file in a folder of its
/// own, the libolm driver — talking to the ``SimHomeserver`` through a ``SimTransport``.
///
/// A restart shuts the community down and starts a new one (a new "process") over the same
/// folder. A kill is armed for one ``FaultPoint``: when the device's process reaches it, the
/// observer (called synchronously on the task at the point) cuts the incarnation's network and
/// copies its folder — the crash image (``CrashImage``), what a `SIGKILL` at that instant leaves
/// on disk. The driver later shuts the dead incarnation down and starts a new process over the
/// crash image.
///
/// The crash image is a folder of its own (`p<generation>`), never copied back over the dead
/// process's folder: the dead process's SQLite connections outlive the "kill" in this process,
/// and a connection that closes last for its file checkpoints and deletes its `-wal` *by path* —
/// the new process's WAL, had it the same path. A real kill closes nothing.
final class SimDevice: Sendable {
    let user: String
    let deviceID: String
    /// The device's folder; each crash image is a generation below it.
    let base: String
    let server: SimHomeserver

    struct Life: Sendable {
        var community: SymorvaCommunity?
        /// The fault point observer of the current process.
        var observer: FaultPointObserver?
        var number = 0
        var armed: FaultPoint?
        /// The point the current incarnation died at; its crash image is taken (or being taken).
        var killedAt: FaultPoint?
        /// Whether the crash image of the current kill is still being copied.
        var imaging = false
        /// Who waits for that copy to end (a stop, before it starts the next process on it).
        var imageWaiters: [CheckedContinuation<Void, Never>] = []
        /// Whether the current process is being shut down: a point it reaches then kills nothing.
        var stopping = false
        /// Every kill so far, by point.
        var kills: [FaultPoint] = []
        var restarts = 0
        /// The folder generation the current process runs on.
        var generation = 0
    }

    private let life = Lock(Life())

    init(user: String, deviceID: String, directory: String, server: SimHomeserver) {
        self.user = user
        self.deviceID = deviceID
        self.base = directory
        self.server = server
    }

    var key: String { SimHomeserver.key(user, deviceID) }
    var name: String { "\(user)/\(deviceID)" }
    /// The folder of the current process.
    var directory: String { folder(life.withLock { $0.generation }) }
    private func folder(_ generation: Int) -> String { "\(base)/p\(generation)" }
    var community: SymorvaCommunity? { life.withLock { $0.community } }
    var isDead: Bool { life.withLock { $0.killedAt != nil } }
    var history: Life { life.withLock { $0 } }

    private func keyProvider(_ directory: String) -> FileKeyProvider {
        FileKeyProvider(directory: directory + "/keys")
    }

    /// The first start: the account's session is stored as a sign-in would have left it.
    func create() async throws {
        let directory = directory
        let storage = AccountStorage(
            dataDirectory: directory, keyProvider: keyProvider(directory), migrations: .standard,
            logger: Logger(category: "sim", center: LogCenter(threshold: .error)))
        let session = Session(
            userID: UserID(user)!, deviceID: DeviceID(deviceID),
            homeserver: HomeserverInfo(
                baseURL: HomeserverURL(SimHomeserver.baseURL)!, serverName: SimHomeserver.serverName,
                versions: ServerVersions(versions: ["v1.11"])),
            tokens: SessionTokens(accessToken: Secret("sim-token-\(deviceID)")))
        try await storage.sessionStore(for: UserID(user)!).save(session, savedAt: Timestamp(millisecondsSince1970: 1))
        try await storage.record(session)
        try await storage.setActive(UserID(user)!)
        await start()
    }

    /// Starts a new process over the folder.
    func start() async {
        let number = life.withLock { life in
            life.number += 1
            life.killedAt = nil
            life.stopping = false
            return life.number
        }
        let incarnation = "\(key)#\(number)"
        let directory = directory
        let configuration = SymorvaConfiguration(
            community: .init(name: "Sim"),
            homeserver: .init(url: HomeserverURL(SimHomeserver.baseURL)!, serverName: SimHomeserver.serverName),
            services: .init(url: URL(string: "https://services.sim.example.org")!),
            modules: .init(
                meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
        let environment = SymorvaEnvironment(
            dataDirectory: directory,
            transport: SimTransport(server: server, device: key, incarnation: incarnation),
            keyProvider: keyProvider(directory), tracer: Tracer(), logCenter: Self.logCenter(),
            deviceDisplayName: nil)
        let community = SymorvaCommunity(
            configuration: configuration, environment: environment, modules: [.crypto, .chat])
        let observer = FaultPointObserver { [weak self] point in self?.reached(point, incarnation: incarnation) }
        await FaultPoint.$observer.withValue(observer) {
            await community.launch()
        }
        life.withLock { life in
            life.community = community
            life.observer = observer
        }
    }

    /// Runs `body` as the device's process: tasks it starts (a conversation's hosts, its send
    /// queue) inherit the process's fault point observer, so that a kill armed for
    /// `message.persisted` is heard there too.
    func inProcess<Result: Sendable>(_ body: @Sendable (SymorvaCommunity) async -> Result?) async -> Result? {
        let (community, observer) = life.withLock { ($0.community, $0.observer) }
        guard let community else { return nil }
        return await FaultPoint.$observer.withValue(observer) { await body(community) }
    }

    /// The devices' log: silent, or (with `SYMORVA_CRYPTO_SIM_LOG=1`, for replaying one seed) every
    /// line from debug up on standard error — redacted as everywhere, so an error such as a
    /// session that fails to start is seen.
    private static func logCenter() -> LogCenter {
        guard ProcessInfo.processInfo.environment["SYMORVA_CRYPTO_SIM_LOG"] == "1" else {
            return LogCenter(threshold: .error)
        }
        return LogCenter(threshold: .debug, sinks: [StandardErrorLogSink()])
    }

    /// Arms a kill at the next time this device reaches `point`.
    func arm(_ point: FaultPoint) { life.withLock { $0.armed = point } }

    func disarm() { life.withLock { $0.armed = nil } }

    private func reached(_ point: FaultPoint, incarnation: String) {
        let generation: Int? = life.withLock { life in
            guard life.armed == point, life.killedAt == nil, !life.stopping, "\(key)#\(life.number)" == incarnation
            else { return nil }
            life.armed = nil
            life.killedAt = point
            life.imaging = true
            life.kills.append(point)
            return life.generation
        }
        guard let generation else { return }
        server.cut(incarnation)
        CrashImage.copy(from: folder(generation), to: folder(generation + 1))
        let waiters = life.withLock { life in
            life.imaging = false
            defer { life.imageWaiters = [] }
            return life.imageWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once the current kill's crash image is complete (at once when none is being taken).
    ///
    /// The driver sees a device dead as soon as its kill is claimed, while the observer is still
    /// copying on the dead process's task; a restart that started the next process then would run
    /// it on a half-copied folder — the account's database missing, its session gone, the account
    /// signed out and wiped: a device that "shows nothing after a kill" (quick seed 256, under load).
    private func crashImageTaken() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = life.withLock { life -> Bool in
                guard life.imaging else { return true }
                life.imageWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Shuts the process down; after a kill, the next process runs on the crash image, so
    /// nothing the dead one did after the kill survives.
    func stop() async {
        // No kill is claimed from here on; one claimed before finishes its image first.
        life.withLock { $0.stopping = true }
        await crashImageTaken()
        let community = life.withLock { life in
            let community = life.community
            life.community = nil
            if life.killedAt != nil { life.generation += 1 }
            return community
        }
        await community?.shutdown()
    }

    /// A graceful restart, or the restart of a killed process from its crash image.
    func restart() async {
        await stop()
        life.withLock { $0.restarts += 1 }
        await start()
    }

    /// Every byte of the device's store files (databases, WAL, key files), of every generation.
    func storeBytes() -> [(path: String, bytes: Data)] {
        let files = FileManager.default
        guard let paths = files.enumerator(atPath: base)?.allObjects as? [String] else { return [] }
        return paths.sorted().compactMap { path in
            let full = base + "/" + path
            guard let data = files.contents(atPath: full) else { return nil }
            return (path, data)
        }
    }
}
