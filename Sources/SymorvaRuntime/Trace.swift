import Synchronization

/// One line of a machine's history: what happened to which machine, by names only.
///
/// Records carry case names, never payloads, so they are safe to print, log and keep.
public struct TraceRecord: Sendable, Equatable, CustomStringConvertible {
    /// What kind of step this was.
    public enum Kind: String, Sendable, Equatable {
        /// The machine moved or stayed and asked for effects.
        case transition
        /// The event had no meaning in the current state.
        case ignored
        /// An effect result arrived for an ended scope epoch and was dropped.
        case stale
        /// An effect result arrived for an effect that had been cancelled or replaced.
        case cancelled
    }

    /// The kind of step.
    public var kind: Kind
    /// The machine's name (`AppFlow`, `Login`).
    public var machine: String
    /// The host's instance label (an account, a room), or empty.
    public var instance: String
    /// The state case before the event.
    public var from: String
    /// The event case.
    public var event: String
    /// The state case after the event (equal to `from` for stay, ignored, stale and cancelled).
    public var to: String
    /// The effect cases the transition asked for.
    public var effects: [String]
    /// The scope epoch the host was in.
    public var epoch: UInt64

    /// Creates a record.
    public init(
        kind: Kind, machine: String, instance: String = "", from: String, event: String, to: String,
        effects: [String] = [], epoch: UInt64 = 0
    ) {
        self.kind = kind
        self.machine = machine
        self.instance = instance
        self.from = from
        self.event = event
        self.to = to
        self.effects = effects
        self.epoch = epoch
    }

    /// `Machine from=<state> event=<event> to=<state> effects=[…]`, with the kind when it is not a transition.
    public var description: String {
        let name = instance.isEmpty ? machine : "\(machine)[\(instance)]"
        let suffix = kind == .transition ? "" : " (\(kind.rawValue))"
        return "\(name) from=\(from) event=\(event) to=\(to) effects=[\(effects.joined(separator: ", "))]\(suffix)"
    }
}

/// Receives trace records, in order for each host.
public protocol TraceSink: Sendable {
    /// Called on the host's executor right after the step; must not block.
    func record(_ record: TraceRecord)
}

/// The one hook every transition of every host goes through.
///
/// When no sink is attached, hosts skip building records altogether (one atomic load per
/// event), so tracing costs nothing until someone listens — `trace on` in the REPL, a test,
/// or the log sink that writes transitions at `trace` level.
public final class Tracer: Sendable {
    private struct Sinks {
        var byID: [UInt64: any TraceSink] = [:]
        /// `byID`'s values, rebuilt when a sink comes or goes, so that recording only retains it.
        var snapshot: [any TraceSink] = []
    }
    private let sinks = Mutex(Sinks())
    private let nextID = Atomic<UInt64>(0)
    @usableFromInline let sinkCount = Atomic<Int>(0)
    /// Bumped (under the lock) whenever a sink comes or goes: a ``Cache`` whose generation is
    /// still current holds the right sinks, and recording through it takes no lock.
    @usableFromInline let generation = Atomic<UInt64>(0)

    /// The process-wide tracer that hosts use unless given another.
    public static let shared = Tracer()

    /// Creates a tracer with no sinks.
    public init() {}

    /// Whether any sink is attached.
    @inlinable
    public var isEnabled: Bool { sinkCount.load(ordering: .relaxed) > 0 }

    /// Attaches a sink; returns a function that detaches it.
    @discardableResult
    public func addSink(_ sink: any TraceSink) -> @Sendable () -> Void {
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        sinks.withLock { sinks in
            sinks.byID[id] = sink
            publish(&sinks)
        }
        return { [weak self] in
            guard let self else { return }
            self.sinks.withLock { sinks in
                sinks.byID.removeValue(forKey: id)
                self.publish(&sinks)
            }
        }
    }

    private func publish(_ sinks: inout Sinks) {
        sinks.snapshot = Array(sinks.byID.values)
        sinkCount.store(sinks.byID.count, ordering: .relaxed)
        generation.wrappingAdd(1, ordering: .releasing)
    }

    /// Hands a record to every sink.
    public func record(_ record: TraceRecord) {
        let current = sinks.withLock { $0.snapshot }
        for sink in current { sink.record(record) }
    }

    /// The sinks as one isolation domain (a host) last saw them.
    @usableFromInline
    struct Cache {
        @usableFromInline var generation: UInt64 = .max
        @usableFromInline var sinks: [any TraceSink] = []
        @inlinable init() {}
    }

    /// Hands a record to every sink, through `cache`: no lock and no retain of the sink array
    /// while no sink comes or goes. A sink detached before the record's host turn began (happens-before)
    /// never sees it, as with ``record(_:)``.
    @inlinable
    func record(_ record: TraceRecord, cache: inout Cache) {
        if generation.load(ordering: .acquiring) != cache.generation { refresh(&cache) }
        // Borrowed from the cache: the array is not retained.
        cache.sinks.withUnsafeBufferPointer { sinks in
            for index in sinks.indices { sinks[index].record(record) }
        }
    }

    @usableFromInline
    func refresh(_ cache: inout Cache) {
        sinks.withLock { sinks in
            cache.generation = generation.load(ordering: .relaxed)
            cache.sinks = sinks.snapshot
        }
    }
}

/// Keeps trace records in memory (tests, the REPL's `trace` history).
public final class TraceRecorder: TraceSink {
    private let storage = Mutex<[TraceRecord]>([])
    /// Creates an empty recorder.
    public init() {}
    public func record(_ record: TraceRecord) { storage.withLock { $0.append(record) } }
    /// Every record so far.
    public var records: [TraceRecord] { storage.withLock { $0 } }
    /// Forgets everything recorded.
    public func reset() { storage.withLock { $0.removeAll() } }
}

/// Writes each trace record to a ``Logger`` at `trace` level.
public struct LoggingTraceSink: TraceSink {
    let logger: Logger
    /// A sink writing to `logger`.
    public init(logger: Logger = Logger(category: "trace")) { self.logger = logger }
    public func record(_ record: TraceRecord) {
        logger.log(.trace, "\(LogLabel(record.description))")
    }
}

/// Calls a closure for each record (the REPL's `trace on`).
public struct ClosureTraceSink: TraceSink {
    let body: @Sendable (TraceRecord) -> Void
    /// A sink calling `body`.
    public init(_ body: @escaping @Sendable (TraceRecord) -> Void) { self.body = body }
    public func record(_ record: TraceRecord) { body(record) }
}
