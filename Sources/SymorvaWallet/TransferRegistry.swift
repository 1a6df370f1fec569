import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

/// The live transfer hosts of one ``AccountWallet``, and its pending commands.
///
/// A host stays here from its creation until its transfer is final: an unknown command's host
/// must outlive every handle the member holds, or its query timer would die with it. The
/// registry watches each host's states and keeps ``pendingCommands`` equal to the hosts that
/// are `unknown` or `querying`.
///
/// Command IDs are **claimed** once per process — by a confirmation before it is stored, by a
/// restore before it queries — so that a restore never queries (and so fences) a command this
/// process is still sending, and two restores never resolve one command twice.
final class TransferRegistry: Sendable {
    private struct Entry {
        let host: MachineHost<TransferMachine>
        var unsubscribe: ObservableValue<TransferMachine.State>.Unsubscribe?
        var commandIDs: Set<CommandID> = []
    }

    private struct State {
        var hosts: [ObjectIdentifier: Entry] = [:]
        var pending: [CommandID: PendingTransfer] = [:]
        var pendingOrder: [CommandID] = []
        var claimed: Set<CommandID> = []
        var markedUnknown: Set<CommandID> = []
        var isClosed = false
        var onSettled: (@Sendable () -> Void)?
    }

    private let state = Lock(State())
    /// Serialises publications so that the last one always carries the newest list.
    private let publishing = Lock(())
    private let publisher = ObservableValue<[PendingTransfer]>.Publisher([])
    private let store: WalletStore
    private let logger = Logger(category: "wallet")

    init(store: WalletStore) {
        self.store = store
    }

    /// The pending commands, oldest first.
    var pendingCommands: ObservableValue<[PendingTransfer]> { publisher.observable }

    /// Called (outside any lock) each time a transfer settles.
    var onSettled: (@Sendable () -> Void)? {
        get { state.withLock { $0.onSettled } }
        set { state.withLock { $0.onSettled = newValue } }
    }

    /// Whether the registry is closed: its wallet was shut down or its account's scope ended.
    var isClosed: Bool { state.withLock { $0.isClosed } }

    // MARK: Hosts

    /// Starts watching `host`; `false` when the registry is closed (the scope ended).
    func adopt(_ host: MachineHost<TransferMachine>) -> Bool {
        let id = ObjectIdentifier(host)
        let adopted = state.withLock { state -> Bool in
            guard !state.isClosed else { return false }
            state.hosts[id] = Entry(host: host)
            return true
        }
        guard adopted else { return false }
        let unsubscribe = host.states.subscribe { [weak self] newState in
            self?.observe(newState, of: id)
        }
        let isGone = state.withLock { state -> Bool in
            guard state.hosts[id] != nil else { return true }
            state.hosts[id]?.unsubscribe = unsubscribe
            return false
        }
        if isGone { unsubscribe() }
        return true
    }

    /// Claims `commandID` for this process; `false` when it is already claimed.
    @discardableResult
    func claim(_ commandID: CommandID) -> Bool {
        state.withLock { $0.claimed.insert(commandID).inserted }
    }

    /// Stops every host and forgets them. `closing` also refuses new hosts (the scope ended);
    /// otherwise (a cache clear) the client stays usable.
    func stopAll(closing: Bool) {
        let entries = state.withLock { state -> [Entry] in
            if closing { state.isClosed = true }
            defer {
                state.hosts.removeAll()
                state.pending.removeAll()
                state.pendingOrder.removeAll()
                state.claimed.removeAll()
            }
            return Array(state.hosts.values)
        }
        for entry in entries { entry.unsubscribe?() }
        publishPending()
        let hosts = entries.map(\.host)
        Task {
            for host in hosts { await host.stop() }
        }
    }

    // MARK: Pending commands

    /// The handle of `pending`, created (and published) the first time it is asked for.
    func pendingTransfer(for pending: PendingCommand, host: MachineHost<TransferMachine>) -> PendingTransfer {
        let (handle, isNew) = state.withLock { state -> (PendingTransfer, Bool) in
            if let existing = state.pending[pending.commandID] { return (existing, false) }
            let handle = PendingTransfer(pending, host: host, registry: self)
            state.pending[pending.commandID] = handle
            state.pendingOrder.append(pending.commandID)
            state.hosts[ObjectIdentifier(host)]?.commandIDs.insert(pending.commandID)
            return (handle, true)
        }
        if isNew { publishPending() }
        return handle
    }

    /// The outcome a resting state stands for.
    func outcome(
        of state: TransferMachine.State, host: MachineHost<TransferMachine>, event: String
    ) throws(TransferError) -> TransferOutcome {
        switch state {
        case .settled(let transfer):
            return .settled(transfer)
        case .failed(let failure, _):
            return .failed(failure)
        case .expired:
            return .failed(.draftExpired)
        case .drafted(let drafted):
            // Back at the draft: this confirmation was refused and another may follow.
            return .failed(drafted.rejection ?? .rejected(code: "refused"))
        case .unknown(let pending, _), .querying(let pending, _):
            return .unknown(pendingTransfer(for: pending, host: host))
        case .idle, .preparing, .verifying, .persisting, .confirming, .cancelled:
            throw .invalidTransition(state: state.caseName, event: event)
        }
    }

    // MARK: Watching

    private func observe(_ newState: TransferMachine.State, of id: ObjectIdentifier) {
        if let pending = newState.pendingCommand {
            guard let host = state.withLock({ $0.hosts[id]?.host }) else { return }
            _ = pendingTransfer(for: pending, host: host)
            if case .unknown = newState { markUnknown(pending.commandID) }
        }
        guard newState.isFinal else { return }
        let (entry, onSettled) = state.withLock { state -> (Entry?, (@Sendable () -> Void)?) in
            guard let entry = state.hosts.removeValue(forKey: id) else { return (nil, nil) }
            for commandID in entry.commandIDs { state.pending[commandID] = nil }
            state.pendingOrder.removeAll { entry.commandIDs.contains($0) }
            return (entry, state.onSettled)
        }
        guard let entry else { return }
        entry.unsubscribe?()
        if !entry.commandIDs.isEmpty { publishPending() }
        if case .settled = newState { onSettled?() }
    }

    private func markUnknown(_ commandID: CommandID) {
        let isFirst = state.withLock { $0.markedUnknown.insert(commandID).inserted }
        guard isFirst else { return }
        let store = self.store
        let logger = self.logger
        Task {
            do throws(StoreError) {
                try await store.markUnknown(commandID)
            } catch {
                logger.warning("could not mark a wallet command unknown error=\(error)")
            }
        }
    }

    private func publishPending() {
        publishing.withLock { _ in
            let list = state.withLock { state in state.pendingOrder.compactMap { state.pending[$0] } }
            publisher.publish(list)
        }
    }
}
