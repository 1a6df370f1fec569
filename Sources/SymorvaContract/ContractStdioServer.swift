import Foundation
import SymorvaKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `symorva serve --stdio`: the contract over the process's standard streams, for a shell in any
/// language that runs the SDK as a child process.
///
/// Framing is JSON lines: one request per line on standard input (UTF-8, `\n`-terminated; blank
/// lines are skipped), one message per line on standard output (the engine never writes a raw
/// newline inside a message). A line longer than ``ContractEngine/maximumRequestSize`` is
/// answered `contract.requestTooLarge` (with `id` null) and skipped to its end. At the end of
/// standard input the client closes: `{"closed": true}` is the last line, and the process exits
/// 0. Log lines go to standard error, at the `--log-level` given (default `warning`; never a
/// parameter, a password or a message body).
package enum ContractStdioServer {
    /// The program's usage text.
    package static let usage = """
        usage: symorva serve --stdio [--config PATH] [--data-dir PATH] [--log-level LEVEL]

          --stdio           the contract as JSON lines on standard input and output (docs/contract.md)
          --config PATH     community manifest; default: $SYMORVA_MANIFEST
          --data-dir PATH   where accounts are kept; default: $SYMORVA_DATA_DIR, else the platform's data folder
          --log-level LEVEL trace, debug, info, notice, warning (default) or error, to standard error
        """

    /// Runs the server until standard input ends; returns the exit status (2 for a bad command line
    /// or manifest).
    package static func run(arguments: [String], environment: [String: String]) async -> Int32 {
        var options: [String: String] = [:]
        var stdio = false
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--stdio": stdio = true
            case "--config", "--data-dir", "--log-level":
                guard index + 1 < arguments.count else { return fail("option \(argument) needs a value") }
                options[argument] = arguments[index + 1]
                index += 1
            case "-h", "--help":
                print(usage)
                return 0
            default: return fail("unknown option '\(argument)'")
            }
            index += 1
        }
        guard stdio else { return fail("serve needs --stdio (the only transport)") }
        guard let manifest = options["--config"] ?? environment["SYMORVA_MANIFEST"], !manifest.isEmpty else {
            return fail("no community manifest: pass --config PATH or set SYMORVA_MANIFEST")
        }
        let dataDirectory =
            options["--data-dir"] ?? environment["SYMORVA_DATA_DIR"] ?? SymorvaEnvironment.defaultDataDirectory()
        let level = LogCenter.threshold(environmentValue: options["--log-level"])
        let logCenter = LogCenter(threshold: level, sinks: [StandardErrorLogSink()])
        let client: ContractClient
        do {
            client = try await ContractClient.open(
                manifestPath: manifest, dataDirectory: dataDirectory, logCenter: logCenter,
                deviceDisplayName: "symorva serve")
        } catch {
            return fail(error.message)
        }
        signal(SIGPIPE, SIG_IGN)
        let writer = Thread { writeMessages(from: client.engine.outbox) }
        writer.start()
        await readRequests(into: client.engine)
        await client.close()
        // The writer ends once the outbox is closed and drained.
        while !writerDone.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(5)) }
        return 0
    }

    private static let writerDone = Lock(false)

    private static func fail(_ message: String) -> Int32 {
        FileHandle.standardError.write(Data("symorva serve: \(message)\n".utf8))
        return 2
    }

    /// Writes every message of `outbox` as a line on standard output until it closes.
    private static func writeMessages(from outbox: ContractOutbox) {
        while true {
            guard var message = outbox.receive(timeout: .seconds(1)) else {
                if outbox.isClosed && outbox.count == 0 { break }
                continue
            }
            message.append(UInt8(ascii: "\n"))
            writeAll(message)
        }
        writerDone.withLock { $0 = true }
    }

    private static func writeAll(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // the host went away; reading will end too
                }
                offset += written
            }
        }
    }

    /// Reads lines from standard input on a thread of its own and hands each to the engine.
    private static func readRequests(into engine: ContractEngine) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let reader = Thread {
                var splitter = ContractLineSplitter(limit: ContractEngine.maximumRequestSize)
                var chunk = [UInt8](repeating: 0, count: 64 * 1024)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    splitter.feed(chunk[0..<count]) { line in deliver(line, to: engine) }
                }
                splitter.finish { line in deliver(line, to: engine) }
                continuation.resume()
            }
            reader.start()
        }
    }

    private static func deliver(_ line: ContractLineSplitter.Line, to engine: ContractEngine) {
        switch line {
        case .request(let bytes): engine.send(bytes)
        case .tooLong: engine.refuseTooLarge()
        }
    }
}

/// Cuts a byte stream into `\n`-terminated lines of at most `limit` bytes (a `\r` before the
/// `\n` is dropped, blank lines are skipped); a longer line is reported once as ``Line/tooLong``
/// and its bytes are dropped as they come, so memory stays bounded.
package struct ContractLineSplitter {
    /// What the splitter found.
    package enum Line: Equatable {
        /// A complete line.
        case request([UInt8])
        /// A line over the limit, dropped.
        case tooLong
    }

    private let limit: Int
    private var buffer: [UInt8] = []
    private var isDiscarding = false

    /// A splitter for lines of at most `limit` bytes.
    package init(limit: Int) { self.limit = limit }

    /// Takes the next bytes; `emit` gets every line they complete.
    package mutating func feed(_ bytes: some Collection<UInt8>, emit: (Line) -> Void) {
        var start = bytes.startIndex
        while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
            append(bytes[start..<newline])
            endLine(emit)
            start = bytes.index(after: newline)
        }
        append(bytes[start...])
    }

    /// The input ended: a last line without `\n` counts.
    package mutating func finish(emit: (Line) -> Void) { endLine(emit) }

    private mutating func append(_ bytes: some Collection<UInt8>) {
        guard !isDiscarding else { return }
        if buffer.count + bytes.count > limit + 1 {
            isDiscarding = true
            buffer = []
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    private mutating func endLine(_ emit: (Line) -> Void) {
        defer {
            buffer.removeAll(keepingCapacity: buffer.count < 1 << 16)
            isDiscarding = false
        }
        if isDiscarding {
            emit(.tooLong)
            return
        }
        if buffer.last == UInt8(ascii: "\r") { buffer.removeLast() }
        guard buffer.contains(where: { ![0x20, 0x09].contains($0) }) else { return }
        if buffer.count > limit {
            emit(.tooLong)
        } else {
            emit(.request(buffer))
        }
    }
}
