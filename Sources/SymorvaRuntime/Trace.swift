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

/// The records of one mailbox turn of a host, in order, as hosts hand them to sinks: together
/// when the turn ends, or earlier when a step starts effects (the records so far go first), and
/// always before the host publishes the turn's state. Each ``TraceRecord`` is built when it is
/// read: a sink that only counts, or that reads some records, pays nothing for the others. A
/// value like any other: safe to keep.
public struct TraceRecords: RandomAccessCollection, Sendable {
    @usableFromInline let batch: TraceBatch
    public let endIndex: Int

    @inlinable
    init(_ batch: TraceBatch) {
        self.batch = batch
        self.endIndex = batch.count
    }

    /// The machine's name, the same for every record.
    public var machine: String { batch.machine }
    /// The host's instance label, the same for every record.
    public var instance: String { batch.instance }

    @inlinable public var startIndex: Int { 0 }

    /// The record at `position`, built now.
    public subscript(position: Int) -> TraceRecord {
        precondition(indices.contains(position), "trace record index out of range")
        let entry = batch.entries[position]
        return TraceRecord(
            kind: entry.kind, machine: batch.machine, instance: batch.instance, from: name(entry.from),
            event: name(entry.event), to: name(entry.to),
            effects: entry.effects.isEmpty ? [] : batch.effectNames[entry.effects].map(name), epoch: entry.epoch)
    }

    private func name(_ name: TraceName) -> String { name.resolved(in: batch.strings) }
}

/// A host's buffer of traced steps.
///
/// The host appends to it during a mailbox turn and hands it to the sinks inside a
/// ``TraceRecords``. If no sink kept it, the host empties it and appends to it again; if one did,
/// the host starts a new batch: a batch that anyone but its host holds never changes again,
/// which is why it may be `Sendable`. Entries are trivial values in a buffer of its own, so
/// appending one is a store (the host writes through its copy of `entries`) and emptying the
/// batch is setting a count.
@usableFromInline
final class TraceBatch: @unchecked Sendable {
    @usableFromInline let machine: String
    @usableFromInline let instance: String
    // The same reasoning as the host's hot fields (`Host.swift`): only the host touches these,
    // synchronously on its executor, while the batch is uniquely referenced.
    @exclusivity(unchecked) @usableFromInline var entries: UnsafeMutablePointer<TraceEntry>
    @exclusivity(unchecked) @usableFromInline var count = 0
    @exclusivity(unchecked) @usableFromInline var capacity: Int
    /// The effects' names of the entries (each entry has a range of them).
    @exclusivity(unchecked) @usableFromInline var effectNames: [TraceName] = []
    /// The computed (not literal) names of the entries and effects.
    @exclusivity(unchecked) @usableFromInline var strings: [String] = []

    @usableFromInline
    init(machine: String, instance: String, capacity: Int = 16) {
        self.machine = machine
        self.instance = instance
        self.capacity = capacity
        self.entries = .allocate(capacity: capacity)
    }

    deinit { entries.deallocate() }

    /// Doubles the entry buffer, keeping the first `count` entries.
    @usableFromInline
    func grow() {
        let larger = UnsafeMutablePointer<TraceEntry>.allocate(capacity: capacity * 2)
        larger.moveInitialize(from: entries, count: count)
        entries.deallocate()
        entries = larger
        capacity *= 2
    }

    /// Forgets every entry, keeping the buffers.
    @inlinable
    func removeAll() {
        count = 0  // Entries are trivial: nothing to deinitialize.
        if !effectNames.isEmpty { effectNames.removeAll(keepingCapacity: true) }
        if !strings.isEmpty { strings.removeAll(keepingCapacity: true) }
    }
}

/// A case name as a buffered step keeps it: the type's literal (``CaseNamed/caseNameLiteral``),
/// or the position of a computed name in the batch's strings.
///
/// Trivial, so an entry holding three names is copied and destroyed without a retain or release
/// (half the cost of tracing a burst was names released one by one), and 16 bytes: a literal's
/// address and length, not the 24 a `StaticString` in an enum takes (entries are written at
/// tens of millions a second; a smaller entry is a cheaper one).
@usableFromInline
struct TraceName: Sendable {
    /// A literal's UTF-8 address, a literal's Unicode scalar, or a position in the batch's strings.
    @usableFromInline let bits: UInt
    /// A literal's UTF-8 length.
    @usableFromInline let count: UInt32
    @usableFromInline let form: Form

    @usableFromInline
    enum Form: UInt8, Sendable {
        case utf8, scalar, stored
    }

    @inlinable
    init(bits: UInt, count: UInt32, form: Form) {
        self.bits = bits
        self.count = count
        self.form = form
    }

    /// A literal name (literals live as long as the program).
    @inlinable
    static func literal(_ literal: StaticString) -> TraceName {
        literal.hasPointerRepresentation
            ? TraceName(
                bits: UInt(bitPattern: literal.utf8Start), count: UInt32(truncatingIfNeeded: literal.utf8CodeUnitCount),
                form: .utf8)
            : TraceName(bits: UInt(literal.unicodeScalar.value), count: 0, form: .scalar)
    }

    /// The computed name at `index` in the batch's strings.
    @inlinable
    static func stored(_ index: Int) -> TraceName { TraceName(bits: UInt(index), count: 0, form: .stored) }

    /// The name as a `String`.
    func resolved(in strings: [String]) -> String {
        switch form {
        case .utf8:
            let start = UnsafePointer<UInt8>(bitPattern: bits)
            return String(decoding: UnsafeBufferPointer(start: start, count: Int(count)), as: UTF8.self)
        case .scalar: return String(Character(Unicode.Scalar(UInt32(truncatingIfNeeded: bits)) ?? "?"))
        case .stored: return strings[Int(bits)]
        }
    }
}

/// One buffered step: a ``TraceRecord`` without the names every record of the host shares, and
/// with its effects' names kept aside (no array per step). Trivial: no reference inside.
@usableFromInline
struct TraceEntry: Sendable {
    @usableFromInline var kind: TraceRecord.Kind
    @usableFromInline var from: TraceName
    @usableFromInline var event: TraceName
    @usableFromInline var to: TraceName
    /// The effects' names, in the batch's effect names: `effectStart..<effectEnd`.
    @usableFromInline var effectStart: Int32
    @usableFromInline var effectEnd: Int32
    @usableFromInline var epoch: UInt64

    @inlinable
    init(
        kind: TraceRecord.Kind, from: TraceName, event: TraceName, to: TraceName, effects: Range<Int>,
        epoch: UInt64
    ) {
        self.kind = kind
        self.from = from
        self.event = event
        self.to = to
        self.effectStart = Int32(truncatingIfNeeded: effects.lowerBound)
        self.effectEnd = Int32(truncatingIfNeeded: effects.upperBound)
        self.epoch = epoch
    }

    /// The effects' names, in the batch's effect names.
    var effects: Range<Int> { Int(effectStart)..<Int(effectEnd) }
}

/// Receives trace records, in order for each host.
public protocol TraceSink: Sendable {
    /// Receives one step. Hosts call it only through the default ``record(contentsOf:)``;
    /// other code may call it directly (``Tracer/record(_:)``). Must not block.
    func record(_ record: TraceRecord)

    /// Receives the steps of a host's mailbox turn, in order, on the host's executor: when the
    /// turn ends, before a step's effects start, when 512 steps are waiting, and always before
    /// the host publishes a state. Must not block.
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
/// sink that writes transitions at `trace` level. When sinks are attached, a host buffers the
/// steps of each mailbox turn (case names only) and hands them over as one batch.
public final class Tracer: Sendable {
    private struct Sinks {
        var byID: [UInt64: any TraceSink] = [:]
        /// `byID`'s values, rebuilt when a sink comes or goes, so that recording only retains it.
        var snapshot: [any TraceSink] = []
    }
    private let sinks = Lock(Sinks())
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
    private let storage = Lock<[TraceRecord]>([])
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
