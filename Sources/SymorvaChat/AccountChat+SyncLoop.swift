import SymorvaChatStore
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// The protocol an account's chat syncs with.
///
/// Either way the since-token (v2) or the connection position (sliding) moves only in the
/// transaction that stored what it covers, and the conversation list, timelines, send queues,
/// crypto and push work the same on top of it.
public enum SyncMode: String, Sendable, Hashable {
    /// Simplified sliding sync (MSC4186): the first window of the conversation list first, then
    /// the rest in growing ranges, and a room subscription for each open conversation.
    case sliding
    /// `/sync` v2: every room in each response.
    case v2

    /// The mode for the manifest's `sync.mode` and the homeserver's `/versions`: `auto` takes
    /// sliding sync only when the server advertises `org.matrix.simplified_msc3575` (unknown
    /// versions: v2).
    package static func choose(_ choice: SymorvaConfiguration.Sync.Mode, versions: ServerVersions?) -> SyncMode {
        switch choice {
        case .sliding: .sliding
        case .v2: .v2
        case .automatic: versions?.supportsSimplifiedSlidingSync == true ? .sliding : .v2
        }
    }
}

/// The sync loop an ``AccountChat`` hosts: one of the two machines with its interpreter.
enum SyncLoop: Sendable {
    case v2(MachineHost<SyncMachine>, SyncInterpreter)
    case sliding(MachineHost<SlidingSyncMachine>, SlidingSyncInterpreter)

    var mode: SyncMode {
        switch self {
        case .v2: .v2
        case .sliding: .sliding
        }
    }

    /// Where the crypto module's share of each response goes.
    func setInbox(_ writer: @escaping SyncInboxWriter) {
        switch self {
        case .v2(_, let interpreter): interpreter.setInbox(writer)
        case .sliding(_, let interpreter): interpreter.setInbox(writer)
        }
    }

    func setDelegate(_ delegate: any SyncInterpreterDelegate) {
        switch self {
        case .v2(_, let interpreter): interpreter.setDelegate(delegate)
        case .sliding(_, let interpreter): interpreter.setDelegate(delegate)
        }
    }

    func networkChanged() async {
        switch self {
        case .v2(let host, _): await host.send(.networkChanged)
        case .sliding(let host, _): await host.send(.networkChanged)
        }
    }

    func tokenRefreshed() async {
        switch self {
        case .v2(let host, _): await host.send(.tokenRefreshed)
        case .sliding(let host, _): await host.send(.tokenRefreshed)
        }
    }

    func stop() async {
        switch self {
        case .v2(let host, _):
            await host.send(.stopped)
            await host.stop()
        case .sliding(let host, _):
            await host.send(.stopped)
            await host.stop()
        }
    }
}

extension SyncState {
    /// The app-facing state of a sliding sync loop: the first window is the initial sync,
    /// growing the range is catching up. ``SyncProgress/since`` holds the connection's `pos`.
    init(_ state: SlidingSyncState) {
        func progress(_ progress: SlidingSyncProgress) -> SyncProgress {
            SyncProgress(
                since: progress.pos.map { SyncToken($0.rawValue) }, filterID: nil,
                pendingBatch: progress.pending.map { SyncToken($0.pos.rawValue) },
                consecutiveFailures: progress.consecutiveFailures, jitter: progress.jitter)
        }
        switch state {
        case .stopped: self = .stopped
        case .firstWindow(let value): self = .initialSync(progress(value))
        case .growing(let value): self = .catchingUp(progress(value))
        case .live(let value): self = .live(progress(value))
        case .backingOff(let value, let attempt, let after):
            self = .backingOff(progress(value), attempt: attempt, after: after)
        case .awaitingToken(let value): self = .awaitingToken(progress(value))
        case .failed(let error): self = .failed(error)
        }
    }
}

/// What `sync status` shows: the mode, how much of the list the loop has loaded, and when the
/// last response was committed.
package struct SyncStatus: Sendable, Equatable {
    /// The protocol.
    package var mode: SyncMode
    /// Sliding sync: the rows the list's range covers (`0…rangeEnd`) and the list's size on the
    /// server, once known; `nil` for v2 or before the first response.
    package var window: (rangeEnd: Int, roomCount: Int?)?
    /// When the last response (and its position) was committed; `nil` before one in this run.
    package var lastCommit: Timestamp?

    package static func == (lhs: SyncStatus, rhs: SyncStatus) -> Bool {
        lhs.mode == rhs.mode && lhs.window?.rangeEnd == rhs.window?.rangeEnd
            && lhs.window?.roomCount == rhs.window?.roomCount && lhs.lastCommit == rhs.lastCommit
    }
}
