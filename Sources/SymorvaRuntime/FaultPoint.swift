import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A named point in the SDK where a debug build can die on purpose, so that tests learn what
/// survives a crash at exactly that point (`docs/testing.md`, "Faults at chosen points").
///
/// The environment variable `SYMORVA_FAULT_POINT` arms one point: `name` kills the process the
/// first time that point is reached, `name@N` the N-th time. Reaching an armed point writes
/// `symorva: fault point <name> reached` to standard error and sends the process `SIGKILL`:
/// no handler, `defer` or `atexit` runs, no buffer is flushed, exactly what the OS killing an
/// app does. Release builds contain none of this (``reach()`` is empty there) and never read
/// the variable.
package enum FaultPoint: String, CaseIterable, Sendable {
    /// A message is in the account's send queue (committed) and its request has not left.
    case messagePersisted = "message.persisted"
    /// A wallet command is stored (committed) and its confirm request has not left.
    case walletCommandPersisted = "wallet.persisted"
    /// A `/sync` ingest transaction has written its rooms but neither the top level nor the
    /// new token (reached only by responses with at least one room).
    case syncIngest = "sync.ingest"
    /// An account wipe has marked the account pending and deleted its folder, but kept its key
    /// and its registry entry.
    case accountWipe = "account.wipe"
    /// A `keys/upload` was answered by the server, and the device has not yet recorded its keys
    /// as published.
    case keysUploadAnswered = "keys.upload"
    /// A `/sync` batch that carried to-device events is committed with its token, and the
    /// crypto module has not processed them yet.
    case toDeviceCommitted = "todevice.committed"
    /// An ingest transaction (v2 or sliding sync) has written a response that carries to-device
    /// events — its rooms, the events into the crypto inbox, the token or position — and has
    /// not committed: the kill undoes all of it, and the server must deliver the events again.
    case toDeviceIngest = "todevice.ingest"
    /// A `PUT room_keys/keys` was answered by the server, and the uploaded keys are still in the
    /// key backup's outbox.
    case backupUploadAnswered = "backup.upload"

    /// The variable that arms a point.
    package static let environmentVariable = "SYMORVA_FAULT_POINT"

    /// Kills the process when this point is the armed one and this is the armed hit, and tells
    /// the task's ``observer`` (debug builds only).
    @inline(__always)
    package func reach() {
        #if DEBUG
            FaultPointArming.shared.reached(self)
            Self.observer?.reached(self)
        #endif
    }
}

/// Who hears of fault points reached in-process: the crypto simulation
/// (`Tests/SymorvaKitTests/CryptoSimulation`) runs many devices in one process and "kills" one
/// by taking a crash image of its files and cutting its network at the point, instead of
/// killing the process. Only debug builds call it, like the points themselves.
package final class FaultPointObserver: Sendable {
    /// Called synchronously, on the task that reached the point, before it goes on.
    package let reached: @Sendable (FaultPoint) -> Void

    /// An observer calling `reached` for every point reached.
    package init(_ reached: @escaping @Sendable (FaultPoint) -> Void) { self.reached = reached }
}

extension FaultPoint {
    /// The observer of the current task and the tasks it starts (`nil` outside a simulation).
    @TaskLocal package static var observer: FaultPointObserver?
}

#if DEBUG
    /// The armed point, read from the environment once.
    private final class FaultPointArming: Sendable {
        static let shared = FaultPointArming()

        private let armed: (point: FaultPoint, hit: Int)?
        private let hits = Atomic<Int>(0)

        private init() {
            guard let raw = getenv(FaultPoint.environmentVariable).map({ String(cString: $0) }), !raw.isEmpty else {
                armed = nil
                return
            }
            let parts = raw.split(separator: "@", maxSplits: 1).map(String.init)
            guard let point = FaultPoint(rawValue: parts[0]) else {
                StandardError.write("symorva: \(FaultPoint.environmentVariable) names no fault point: \(parts[0])\n")
                armed = nil
                return
            }
            let hit = parts.count == 2 ? Int(parts[1]) ?? 1 : 1
            armed = (point, max(hit, 1))
        }

        func reached(_ point: FaultPoint) {
            guard let armed, armed.point == point else { return }
            let hit = hits.add(1, ordering: .sequentiallyConsistent).newValue
            guard hit == armed.hit else { return }
            StandardError.write("symorva: fault point \(point.rawValue) reached\n")
            kill(getpid(), SIGKILL)
        }
    }
#endif
