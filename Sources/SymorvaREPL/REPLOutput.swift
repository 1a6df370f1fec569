import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which stream a line of REPL output belongs to.
public enum REPLStream: Sendable, Equatable {
    /// Results of commands and trace lines (standard output).
    case standard
    /// Error reports (standard error).
    case error
}

/// Where the REPL writes: the terminal in the `symorva` program, a buffer in tests.
///
/// Lines may arrive from any thread (trace lines come from the hosts' executors), so an
/// output must keep each line whole and in the order it was written.
public protocol REPLOutput: Sendable {
    /// Writes one line; `line` has no trailing newline.
    func write(_ line: String, to stream: REPLStream)
}

extension REPLOutput {
    /// Writes a line of normal output.
    public func print(_ line: String) { write(line, to: .standard) }

    /// Writes a line to the error stream.
    public func printError(_ line: String) { write(line, to: .error) }

    /// Writes rows as two aligned columns: `  left  right`, the left column padded to the
    /// widest entry (at most `maximumWidth` characters; longer entries push their right text).
    public func printColumns(_ rows: [(String, String)], indent: String = "  ", maximumWidth: Int = 40) {
        let width = min(maximumWidth, rows.map(\.0.count).max() ?? 0)
        for (left, right) in rows {
            let padding = String(repeating: " ", count: max(0, width - left.count))
            print("\(indent)\(left)\(padding)  \(right)")
        }
    }
}

/// Writes to the process's standard output and standard error, unbuffered, a line at a time.
public struct StandardREPLOutput: REPLOutput {
    private static let lock = Mutex(())

    /// The process's standard streams.
    public init() {}

    public func write(_ line: String, to stream: REPLStream) {
        Self.lock.withLock { _ in
            Terminal.write(line + "\n", to: stream == .standard ? 1 : 2)
        }
    }
}

/// Keeps every line in memory, both streams interleaved in the order written.
///
/// Tests read ``lines`` to compare with a transcript; ``text`` is the same as one string.
public final class CapturingREPLOutput: REPLOutput {
    /// One captured line.
    public struct Line: Sendable, Equatable {
        /// The stream it was written to.
        public var stream: REPLStream
        /// Its text.
        public var text: String

        /// A captured line.
        public init(stream: REPLStream, text: String) {
            self.stream = stream
            self.text = text
        }
    }

    private let storage = Mutex<[Line]>([])

    /// An empty capture.
    public init() {}

    public func write(_ line: String, to stream: REPLStream) {
        // A multi-line write becomes several lines so that transcripts compare line by line.
        let parts = line.split(separator: "\n", omittingEmptySubsequences: false)
        storage.withLock { lines in
            for part in parts { lines.append(Line(stream: stream, text: String(part))) }
        }
    }

    /// Every line so far.
    public var lines: [Line] { storage.withLock { $0 } }

    /// Every line's text so far, both streams.
    public var texts: [String] { lines.map(\.text) }

    /// Everything so far, a line per entry.
    public var text: String { texts.joined(separator: "\n") }

    /// Forgets everything captured.
    public func reset() { storage.withLock { $0.removeAll() } }
}

/// The few terminal operations the REPL needs, on raw file descriptors.
enum Terminal {
    /// Whether standard input is a terminal (interactive use) rather than a pipe or a file.
    static var isStandardInputTerminal: Bool { isatty(0) == 1 }

    /// Writes all of `text` to `descriptor`, retrying short writes.
    static func write(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { buffer in
            guard var pointer = buffer.baseAddress else { return }
            var remaining = buffer.count
            while remaining > 0 {
                let written = systemWrite(descriptor, pointer, remaining)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                pointer += written
                remaining -= written
            }
        }
    }

    /// Runs `body` with the terminal's echo switched off, restoring the previous settings after.
    ///
    /// When standard input is not a terminal (or its settings cannot be read) `body` runs as is:
    /// there is no echo to hide on a pipe.
    static func withEchoDisabled<T>(_ body: () -> T) -> T {
        var original = termios()
        guard tcgetattr(0, &original) == 0 else { return body() }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        guard tcsetattr(0, TCSAFLUSH, &silent) == 0 else { return body() }
        defer { _ = tcsetattr(0, TCSAFLUSH, &original) }
        return body()
    }
}

private func systemWrite(_ descriptor: Int32, _ pointer: UnsafePointer<UInt8>, _ count: Int) -> Int {
    write(descriptor, pointer, count)
}
