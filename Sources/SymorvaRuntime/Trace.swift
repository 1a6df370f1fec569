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

/// The records of one burst of a host (`send(contentsOf:)`), in order, as hosts hand them to
/// sinks: together when the burst ends, or earlier when a step starts effects (the records so
/// far go first), and always before the host publishes the burst's state. Each ``TraceRecord`` is built when it is read: a sink that only counts, or that
/// reads some records, pays nothing for the others. A value like any other: safe to keep.
public struct TraceRecords: RandomAccessCollection, Sendable {
    @usableFromInline let origin: TraceOrigin
    @usableFromInline let entries: [TraceEntry]
    @usableFromInline let effectNames: [String]

    @inlinable
    init(origin: TraceOrigin, entries: [TraceEntry], effectNames: [String]) {
        self.origin = origin
        self.entries = entries
        self.effectNames = effectNames
    }

    /// The machine's name, the same for every record.
    public var machine: String { origin.machine }
    /// The host's instance label, the same for every record.
    public var instance: String { origin.instance }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { entries.count }

    /// The record at `position`, built now.
    @inlinable
    public subscript(position: Int) -> TraceRecord {
        let entry = entries[position]
        return TraceRecord(
            kind: entry.kind, machine: origin.machine, instance: origin.instance, from: entry.from,
            event: entry.event, to: entry.to,
            effects: entry.effects.isEmpty ? [] : Array(effectNames[entry.effects]), epoch: entry.epoch)
    }
}

/// The names every record of a host shares, built once per host.
@usableFromInline
final class TraceOrigin: Sendable {
    @usableFromInline let machine: String
    @usableFromInline let instance: String

    @usableFromInline
    init(machine: String, instance: String) {
        self.machine = machine
        self.instance = instance
    }
}

/// One buffered step: a ``TraceRecord`` without the names every record of the host shares, and
/// with its effects' names kept aside (no array per step).
@usableFromInline
struct TraceEntry: Sendable {
    @usableFromInline var kind: TraceRecord.Kind
    @usableFromInline var from: String
    @usableFromInline var event: String
    @usableFromInline var to: String
    /// The effects' names, in the batch's effect names.
    @usableFromInline var effects: Range<Int>
    @usableFromInline var epoch: UInt64

    @inlinable
    init(kind: TraceRecord.Kind, from: String, event: String, to: String, effects: Range<Int>, epoch: UInt64) {
        self.kind = kind
        self.from = from
        self.event = event
        self.to = to
        self.effects = effects
        self.epoch = epoch
    }
}

/// Receives trace records, in order for each host.
public protocol TraceSink: Sendable {
    /// Receives one step, on the host's executor, right after it; must not block.
    func record(_ record: TraceRecord)

    /// Receives the steps of a burst, in order, on the host's executor, when the burst ends (and
    /// before a step's effects start, and before the host publishes a state); must not block.
    ///
    /// The default calls ``record(_:)`` for each record. A sink that can take many records at
    /// once (one lock, one counter update) or needs only some of them should implement it:
    /// records are built only when read.
    func record(contentsOf records: TraceRecords)
}

extension TraceSink {
    public func record(contentsOf records: TraceRecords) {
        for record in records { self.record(record) }
    }
}

/// The one hook every transition of every host goes through.
///
/// When no sink is attached, hosts skip tracing altogether (one atomic load per event), so
/// tracing costs nothing until someone listens — `trace on` in the REPL, a test, or the log
/// sink that writes transitions at `trace` level. When sinks are attached, a host hands each
/// step to them at once, except in bursts, whose steps it buffers (case names only) and hands
/// over as one batch.
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

    /// Hands a batch of records to every sink.
    public func record(contentsOf records: TraceRecords) {
        let current = sinks.withLock { $0.snapshot }
        for sink in current { sink.record(contentsOf: records) }
    }

    /// The sinks as one isolation domain (a host) last saw them.
    @usableFromInline
    struct Cache {
        @usableFromInline var generation: UInt64 = .max
        @usableFromInline var sinks: [any TraceSink] = []
        @inlinable init() {}
    }

    /// Hands a burst's records to every sink, through `cache`: no lock and no retain of the
    /// sink array while no sink comes or goes. A sink detached before the host's turn began
    /// (happens-before) never sees them.
    @inlinable
    func record(contentsOf records: TraceRecords, cache: inout Cache) {
        if generation.load(ordering: .acquiring) != cache.generation { refresh(&cache) }
        // Borrowed from the cache: the array is not retained.
        cache.sinks.withUnsafeBufferPointer { sinks in
            for index in sinks.indices { sinks[index].record(contentsOf: records) }
        }
    }

    /// Hands one record to every sink, through `cache`, the same way.
    @inlinable
    func record(_ record: TraceRecord, cache: inout Cache) {
        if generation.load(ordering: .acquiring) != cache.generation { refresh(&cache) }
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
    public func record(contentsOf records: TraceRecords) { storage.withLock { $0.append(contentsOf: records) } }
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
