import Foundation
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTransport

/// `symorva-bench verify [--flows N]`: interactive verifications (SAS over to-device messages)
/// between two SymorvaKit accounts against the local dev servers (`Scripts/dev-server start
/// --test`; `source "$(Scripts/dev-server envfile)"`). Each flow goes request → ready → SAS →
/// both show the code; measured: from "match" confirmed on both sides to both showing verified
/// (both MACs, the cross-signing signature uploaded, `done` both ways). p50 and max over
/// `--flows` flows (default 20).
struct VerificationBenchmark: DevServerBenchmark {
    /// The mode's word on the command line.
    let name = "verify"
    /// The mode's arguments for the usage text.
    let argumentsSynopsis = "[--flows N]"
    /// What the mode measures.
    let summary = "SAS verification: both confirmed → both verified, p50/max (SYMORVA_* env)"

    let optionNames: Set<String> = ["flows"]

    func settings(from options: inout Options) -> Int { options.integer("flows", default: 20) }

    func measure(_ flows: Int, homeserver: URL, services: URL) async throws {
        let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else { throw BenchFailure("bad URL") }
        let transport = CurlTransport()
        var devices: [RecoveryBenchmark.Device] = []
        var users: [UserID] = []
        for prefix in ["bench-verify-a", "bench-verify-b"] {
            let username = BenchMember.uniqueName(prefix)
            let (user, _) = try await BenchMember.register(username, homeserver: homeserver, transport: transport)
            guard let userID = UserID(user) else { throw BenchFailure("registration gave '\(user)'") }
            users.append(userID)
            devices.append(
                try await RecoveryBenchmark.device(
                    username, homeserver: homeserverURL, services: services, serverName: serverName))
        }
        let (alice, bob) = (devices[0], devices[1])
        let roomID = try await alice.community.chat.createRoom(
            name: "Verify", invitees: [users[1]], isEncrypted: true)
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                _ = try await bob.community.chat.join(roomIDOrAlias: roomID.rawValue)
                break
            } catch {
                guard ContinuousClock.now < deadline else { throw BenchFailure("Bob could not join: \(error)") }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        _ = try await alice.crypto.setUpRecovery()
        _ = try await bob.crypto.setUpRecovery()

        let clock = ContinuousClock()
        var durations: [Double] = []
        for _ in 0..<flows {
            let outgoing = try await startFlow(alice.crypto, to: users[1], device: bob.crypto.deviceID)
            _ = try await bob.crypto.incomingVerification.wait(timeout: .seconds(60)) {
                $0?.transactionID == outgoing.transactionID
            }
            guard let incoming = bob.crypto.incomingVerification.value else { throw BenchFailure("no request") }
            await incoming.accept()
            _ = try await outgoing.state.wait(timeout: .seconds(60)) { $0 == .ready }
            await outgoing.startSAS()
            for verification in [outgoing, incoming] {
                let shown = try await verification.state.wait(timeout: .seconds(60)) {
                    if case .showingCode = $0 { return true }
                    if case .cancelled = $0 { return true }
                    return false
                }
                guard case .showingCode = shown else { throw BenchFailure("flow ended: \(shown)") }
            }
            let start = clock.now
            async let first: Void = outgoing.confirm()
            async let second: Void = incoming.confirm()
            _ = await (first, second)
            for verification in [outgoing, incoming] {
                let end = try await verification.state.wait(timeout: .seconds(60)) {
                    if case .cancelled = $0 { return true }
                    return $0 == .verified
                }
                guard end == .verified else { throw BenchFailure("flow ended: \(end)") }
            }
            durations.append((clock.now - start).seconds * 1000)
        }
        await alice.community.shutdown()
        await bob.community.shutdown()
        let sorted = durations.sorted()
        print(
            "verify: \(flows) flows, both confirmed → both verified: p50 \(fixed(percentile(sorted, 0.5), 1)) ms, "
                + "max \(fixed(sorted.last ?? .nan, 1)) ms; load average \(MegolmBenchmark.loadAverage())")
    }

    /// Starts a flow, once Alice's crypto knows Bob's device (retried until it does).
    private func startFlow(_ crypto: AccountCrypto, to user: UserID, device: DeviceID) async throws
        -> SASVerification
    {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try await crypto.verify(user, device: device)
            } catch {
                guard ContinuousClock.now < deadline else { throw BenchFailure("verification not started: \(error)") }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }
}
