import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTransport

/// `symorva-bench backup-lag [--keys N] [--interval-ms N]`: how long a room key waits between
/// its arrival on a device and its upload to the key backup being confirmed, under steady
/// traffic, against the local dev servers (`Scripts/dev-server start --test`;
/// `source "$(Scripts/dev-server envfile)"`).
///
/// Alice (a ``SymorvaCommunity`` with the crypto and chat modules) creates a backup. Bob, another
/// community, then starts a new encrypted room with Alice invited and sends one message in it
/// every `--interval-ms` (250): each brings Alice a new Megolm session over Olm. The lag of
/// each key is measured by the SDK's own code path: from the transaction that stored the
/// session (and put it in the backup outbox) to the answer of the `PUT room_keys/keys` that
/// carried it (`AccountCrypto.observeBackupUploads`). Goal: p95 ≤ 2 s.
struct BackupLagBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "backup-lag"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--keys N] [--interval-ms N]"
    /// What the mode measures.
    let summary = "room key arrival → backup upload confirmed, p95 under steady traffic (SYMORVA_* env)"

    let optionNames: Set<String> = ["keys", "interval-ms"]

    struct Settings {
        var keys: Int
        var interval: Duration
    }

    func settings(from options: inout Options) -> Settings {
        Settings(
            keys: options.integer("keys", default: 60),
            interval: .milliseconds(options.integer("interval-ms", default: 250)))
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
        let alice = try await Self.member(
            "bench-backup", homeserver: homeserver, services: services, serverName: serverName)
        let bob = try await Self.member(
            "bench-sharer", homeserver: homeserver, services: services, serverName: serverName)
        defer {
            Task {
                await alice.community.shutdown()
                await bob.community.shutdown()
            }
        }
        _ = try await alice.crypto.createBackup()
        _ = try await alice.crypto.backupState.wait(timeout: .seconds(60)) { $0 == .upToDate }
        let lags = Lock<[Int64]>([])
        alice.crypto.observeBackupUploads { batch in lags.withLock { $0 += batch } }
        let baseline = lags.withLock { $0.count }

        let clock = ContinuousClock()
        let start = clock.now
        for index in 0..<settings.keys {
            let due = start + settings.interval * index
            if clock.now < due { try await Task.sleep(until: due, clock: clock) }
            let roomID = try await bob.community.chat.createRoom(
                name: "Backup lag \(index)", invitees: [alice.userID], isEncrypted: true)
            let receipt = try await bob.community.chat.conversation(id: roomID).send(.text("key \(index)"))
            _ = try await receipt.state.wait(timeout: .seconds(60)) { state in
                if case .sent = state { return true }
                if case .failed = state { return true }
                return false
            }
        }
        let sent = clock.now - start
        let deadline = clock.now + .seconds(120)
        while lags.withLock({ $0.count }) - baseline < settings.keys, clock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        let measured = lags.withLock { Array($0.dropFirst(baseline)) }.map(Double.init).sorted()
        guard !measured.isEmpty else { throw BenchFailure("no key reached the backup") }
        print(
            "backup-lag: \(settings.keys) room keys from another user, one every \(settings.interval) "
                + "(sent in \(fixed(sent.seconds, 1)) s); load average \(MegolmBenchmark.loadAverage())")
        print(
            "  \(measured.count) keys uploaded: arrival → upload confirmed p50 \(fixed(percentile(measured, 0.5), 0)) ms, "
                + "p95 \(fixed(percentile(measured, 0.95), 0)) ms, max \(fixed(measured.last ?? 0, 0)) ms (goal p95 ≤ 2000 ms)"
        )
    }

    struct Member {
        let community: SymorvaCommunity
        let crypto: AccountCrypto
        let userID: UserID
    }

    static func member(_ prefix: String, homeserver: URL, services: URL, serverName: String) async throws -> Member {
        let folder = NSTemporaryDirectory() + "symorva-bench-backup-\(UUID().uuidString)"
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else { throw BenchFailure("bad URL") }
        let community = Self.chatCommunity(
            homeserver: homeserverURL, serverName: serverName, services: services, folder: folder)
        let account = try await community.session.register(
            username: BenchMember.uniqueName(prefix), password: Secret("correct horse battery staple"))
        guard let crypto = community.module(AccountCrypto.self) else { throw BenchFailure("no crypto module") }
        _ = try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        return Member(community: community, crypto: crypto, userID: account.userID)
    }
}

extension BackupLagBenchmark {
    /// A community with only the crypto and chat modules on the dev servers, its data in
    /// `folder` (the backup-lag and recovery benchmarks' devices).
    static func chatCommunity(
        homeserver: HomeserverURL, serverName: String, services: URL, folder: String
    ) -> SymorvaCommunity {
        let configuration = SymorvaConfiguration(
            community: .init(name: "Benchmark"),
            homeserver: .init(url: homeserver, serverName: serverName),
            services: .init(url: services),
            modules: .init(
                meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
        return SymorvaCommunity(
            configuration: configuration,
            environment: SymorvaEnvironment(dataDirectory: folder, transport: CurlTransport()),
            modules: [.crypto, .chat])
    }
}
