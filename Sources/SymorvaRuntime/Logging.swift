import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// How important a log line is.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Every step of every machine (trace records); off unless asked for.
    case trace
    /// Detail for developers of the SDK.
    case debug
    /// What happened, in a line: signed in, synced, sent.
    case info
    /// Worth a look: a retry, a fallback, a late result dropped.
    case notice
    /// Something failed and was handled.
    case warning
    /// Something failed and the feature could not go on.
    case error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        }
    }

    /// The level called `name` (``description``, any case, blanks ignored), or `nil` when no
    /// level has that name.
    public init?(name: String) {
        let wanted = String(name.filter { $0 != " " && $0 != "\t" }).lowercased()
        guard let level = LogLevel.allCases.first(where: { $0.description == wanted }) else { return nil }
        self = level
    }
}

/// A value whose text is safe in a log: numbers, booleans, durations, Matrix IDs, case names.
///
/// Redaction is by type. Anything interpolated into a ``LogMessage`` that is not `LogSafe`
/// prints as `<private>`, and a ``Secret`` always prints as `<redacted>`, so a message body
/// or a token cannot reach a log by accident: to log a value, its type must say it is safe.
public protocol LogSafe {
    /// The text written to the log.
    var logDescription: String { get }
}

extension Int: LogSafe { public var logDescription: String { String(self) } }
extension Int64: LogSafe { public var logDescription: String { String(self) } }
extension UInt64: LogSafe { public var logDescription: String { String(self) } }
extension Int32: LogSafe { public var logDescription: String { String(self) } }
extension UInt32: LogSafe { public var logDescription: String { String(self) } }
extension Double: LogSafe { public var logDescription: String { String(self) } }
extension Bool: LogSafe { public var logDescription: String { String(self) } }
extension Duration: LogSafe { public var logDescription: String { String(describing: self) } }
extension EffectKey: LogSafe { public var logDescription: String { name } }
extension LogLevel: LogSafe { public var logDescription: String { description } }

/// A string that is safe to log because the program wrote it, not a user or a server:
/// use it for case names, command names and other fixed vocabulary.
public struct LogLabel: LogSafe, Sendable, ExpressibleByStringLiteral {
    public let logDescription: String
    /// Marks a program-chosen string as safe to log.
    public init(_ label: String) { self.logDescription = label }
    public init(stringLiteral value: String) { self.logDescription = value }
}

/// A log line built by string interpolation that redacts by type.
public struct LogMessage: ExpressibleByStringInterpolation, Sendable, CustomStringConvertible {
    /// The redacted text.
    public let description: String

    public init(stringLiteral value: String) { description = value }
    public init(stringInterpolation: StringInterpolation) { description = stringInterpolation.text }

    /// Builds the text of a ``LogMessage``.
    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""
        public init(literalCapacity: Int, interpolationCount: Int) { text.reserveCapacity(literalCapacity + 16) }
        public mutating func appendLiteral(_ literal: String) { text += literal }
        /// A value whose type declares it safe.
        public mutating func appendInterpolation<T: LogSafe>(_ value: T) { text += value.logDescription }
        /// An optional safe value.
        public mutating func appendInterpolation<T: LogSafe>(_ value: T?) {
            text += value.map(\.logDescription) ?? "nil"
        }
        /// A secret: always `<redacted>`.
        public mutating func appendInterpolation<T>(_ value: Secret<T>) { text += "<redacted>" }
        /// Anything else: `<private>`, whatever it contains.
        @_disfavoredOverload
        public mutating func appendInterpolation<T>(_ value: T) { text += "<private>" }
    }
}

/// One line handed to a ``LogSink``.
public struct LogRecord: Sendable {
    /// Severity.
    public var level: LogLevel
    /// The subsystem that wrote it (`transport`, `store`, `Login`).
    public var category: String
    /// The redacted text.
    public var message: String
}

/// Where log lines go: standard error, a file, a test's capture buffer.
public protocol LogSink: Sendable {
    /// Receives one line. Called on the writer's thread; must not block for long.
    func write(_ record: LogRecord)
}

/// The SDK's logging facade: categories, levels and type-based redaction.
///
/// Every log line of the SDK goes through a `Logger`, and every line a `Logger` writes is
/// built from a ``LogMessage``, so nothing reaches a sink without passing redaction.
public struct Logger: Sendable {
    /// The subsystem name printed with each line.
    public let category: String
    let center: LogCenter

    /// A logger for `category` writing to `center`.
    public init(category: String, center: LogCenter = .shared) {
        self.category = category
        self.center = center
    }

    /// Writes a line at `level` when the center's threshold lets it through.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> LogMessage) {
        guard center.isEnabled(level) else { return }
        center.write(LogRecord(level: level, category: category, message: message().description))
    }

    /// Writes a debug line.
    public func debug(_ message: @autoclosure () -> LogMessage) { log(.debug, message()) }
    /// Writes an informational line.
    public func info(_ message: @autoclosure () -> LogMessage) { log(.info, message()) }
    /// Writes a notice.
    public func notice(_ message: @autoclosure () -> LogMessage) { log(.notice, message()) }
    /// Writes a warning.
    public func warning(_ message: @autoclosure () -> LogMessage) { log(.warning, message()) }
    /// Writes an error line.
    public func error(_ message: @autoclosure () -> LogMessage) { log(.error, message()) }
}

/// The set of sinks log lines go to, and the level below which lines are dropped unformatted.
public final class LogCenter: Sendable {
    private struct Configuration {
        var threshold: LogLevel
        var sinks: [UInt64: any LogSink] = [:]
        var nextID: UInt64 = 0
    }
    private let configuration: Lock<Configuration>
    private let thresholdRaw: Atomic<Int>

    /// The process-wide center: standard error, at the level the `SYMORVA_LOG` environment
    /// variable names (`trace`, `debug`, `info`, `notice`, `warning`, `error`), else `warning`.
    public static let shared = LogCenter(
        threshold: threshold(environmentValue: getenv("SYMORVA_LOG").map { String(cString: $0) }),
        sinks: [StandardErrorLogSink()])

    /// The threshold a `SYMORVA_LOG` value asks for: the level it names, else `warning` (an
    /// unknown name is not an error: logging must never stop the SDK).
    public static func threshold(environmentValue: String?) -> LogLevel {
        environmentValue.flatMap(LogLevel.init(name:)) ?? .warning
    }

    /// A center with its own sinks (tests use one to capture lines).
    public init(threshold: LogLevel, sinks: [any LogSink] = []) {
        var configuration = Configuration(threshold: threshold)
        for sink in sinks {
            configuration.sinks[configuration.nextID] = sink
            configuration.nextID += 1
        }
        self.configuration = Lock(configuration)
        self.thresholdRaw = Atomic(threshold.rawValue)
    }

    /// Lines below this level are never formatted.
    public var threshold: LogLevel {
        get { LogLevel(rawValue: thresholdRaw.load(ordering: .relaxed)) ?? .warning }
        set {
            configuration.withLock { $0.threshold = newValue }
            thresholdRaw.store(newValue.rawValue, ordering: .relaxed)
        }
    }

    /// Whether a line at `level` would be written.
    public func isEnabled(_ level: LogLevel) -> Bool { level.rawValue >= thresholdRaw.load(ordering: .relaxed) }

    /// Adds a sink; returns a function that removes it.
    @discardableResult
    public func addSink(_ sink: any LogSink) -> @Sendable () -> Void {
        let id = configuration.withLock { configuration -> UInt64 in
            defer { configuration.nextID += 1 }
            configuration.sinks[configuration.nextID] = sink
            return configuration.nextID
        }
        return { [weak self] in _ = self?.configuration.withLock { $0.sinks.removeValue(forKey: id) } }
    }

    func write(_ record: LogRecord) {
        let sinks = configuration.withLock { Array($0.sinks.values) }
        for sink in sinks { sink.write(record) }
    }
}

/// Writes `level category: message` lines to standard error.
public struct StandardErrorLogSink: LogSink {
    /// Creates the sink.
    public init() {}
    public func write(_ record: LogRecord) {
        let line = "\(record.level) \(record.category): \(record.message)\n"
        StandardError.write(line)
    }
}

/// A sink that keeps every line in memory, for tests and the REPL's `log` command.
public final class CapturingLogSink: LogSink {
    private let lines = Lock<[LogRecord]>([])
    /// Creates an empty capture.
    public init() {}
    public func write(_ record: LogRecord) { lines.withLock { $0.append(record) } }
    /// Everything captured so far.
    public var records: [LogRecord] { lines.withLock { $0 } }
    /// Everything captured so far as one text, a line per record.
    public var text: String { records.map { "\($0.level) \($0.category): \($0.message)" }.joined(separator: "\n") }
}
