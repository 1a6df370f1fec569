import Foundation
import SymorvaRuntime
import SymorvaTesting

#if canImport(Glibc)
    import Glibc
#endif

/// The built `symorva` program running as a child process: the test writes command lines to
/// its standard input one at a time and waits for the lines it prints, then lets it quit or
/// kills it with `SIGKILL` (no chance to clean up: what a crash or the OS killing an app does).
///
/// The environment is the test's own (so the dev servers' variables reach it) plus `extra`:
/// `SYMORVA_DATA_DIR` decides which data folder it uses, so two processes run one after the
/// other on the same folder are a restart.
final class REPLProcess: Sendable {
    /// What the program printed so far, and whether it has exited.
    struct Transcript: Sendable {
        /// Standard output lines.
        var output: [String] = []
        /// Standard error lines.
        var errors: [String] = []
        /// Whether the program has exited (or was killed).
        var hasExited = false
    }

    /// Publishes the transcript; changes come from three threads, one at a time.
    private final class Recorder: Sendable {
        let publisher = ObservableValue<Transcript>.Publisher(Transcript())
        private let lock = Lock(())

        func update(_ change: @Sendable (inout Transcript) -> Void) {
            lock.withLock { _ in publisher.update(change) }
        }
    }

    /// Everything so far, observable: each new line and the exit publish it.
    var transcript: ObservableValue<Transcript> { recorder.publisher.observable }
    /// Standard output lines so far.
    var output: [String] { recorder.publisher.value.output }

    private let recorder = Recorder()
    private let processID: Int32
    private let input: FileHandle
    private let process: Lock<Process?>

    /// Starts `symorva` (piped mode: no prompt; secrets are the next input line).
    init(environment extra: [String: String], arguments: [String] = []) throws {
        guard let binary = Self.binary else {
            throw IntegrationFailure("the symorva binary is not built next to the test bundle (swift build)")
        }
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(extra) { _, new in new }
        let inputPipe = Pipe()
        let outputPipe = Pipe()
        let errorPipe = Pipe()
        process.standardInput = inputPipe
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        let recorder = self.recorder
        process.terminationHandler = { _ in recorder.update { $0.hasExited = true } }
        try process.run()
        processID = process.processIdentifier
        input = inputPipe.fileHandleForWriting
        self.process = Lock(process)
        Self.collectLines(from: outputPipe.fileHandleForReading) { lines in
            recorder.update { $0.output += lines }
        }
        Self.collectLines(from: errorPipe.fileHandleForReading) { lines in
            recorder.update { $0.errors += lines }
        }
    }

    deinit {
        if !recorder.publisher.value.hasExited { _ = Glibc.kill(processID, SIGKILL) }
    }

    /// Writes `line` (a command, or the secret a command asks for) to the program's input.
    func send(_ line: String) {
        input.write(Data((line + "\n").utf8))
    }

    /// Waits for the first output line that satisfies `predicate` and returns it. Fails at once
    /// with what the program printed when it reports a failed command or exits first, unless
    /// `errorLine` accepts that error line as the answer.
    @discardableResult
    func waitForLine(
        timeout: Duration = .seconds(60), accepting errorLine: @escaping @Sendable (String) -> Bool = { _ in false },
        fileID: String = #fileID, line: Int = #line, _ predicate: @escaping @Sendable (String) -> Bool
    ) async throws -> String {
        let transcript = try await transcript.wait(
            timeout: timeout,
            until: { transcript in
                transcript.output.contains(where: predicate) || transcript.errors.contains(where: Self.isError)
                    || transcript.hasExited
            }, fileID: fileID, line: line)
        if let found = transcript.output.first(where: predicate) ?? transcript.errors.first(where: errorLine) {
            return found
        }
        throw IntegrationFailure(
            "symorva \(transcript.hasExited ? "exited" : "reported an error") first:\n"
                + (transcript.output + transcript.errors).joined(separator: "\n"))
    }

    /// Sends `SIGKILL` and waits until the process is gone.
    func kill() async throws {
        _ = Glibc.kill(processID, SIGKILL)
        try await transcript.wait(timeout: .seconds(30)) { $0.hasExited }
    }

    /// Waits until the program killed itself at the fault point armed by its environment
    /// (`SYMORVA_FAULT_POINT`, see `FaultPoint`): it printed that it reached `point` and died
    /// of `SIGKILL`. Fails when it exits any other way or prints nothing of the kind in time.
    func waitForFaultPoint(_ point: FaultPoint, timeout: Duration = .seconds(120)) async throws {
        let mark = "symorva: fault point \(point.rawValue) reached"
        let transcript = try await transcript.wait(timeout: timeout) { $0.hasExited }
        // Standard error is read on a thread of its own: the line may trail the exit a little.
        let marked = try? await self.transcript.wait(timeout: .seconds(5)) { $0.errors.contains(mark) }
        let (reason, status) = process.withLock { ($0?.terminationReason, $0?.terminationStatus) }
        guard marked != nil, reason == .uncaughtSignal, status == SIGKILL else {
            throw IntegrationFailure(
                "symorva did not die at \(point.rawValue) (status \(status.map(String.init) ?? "?")):\n"
                    + (transcript.output + transcript.errors).joined(separator: "\n"))
        }
    }

    /// Closes the input (the program quits at its end) and waits for the exit status.
    func finish() async throws -> Int32 {
        try? input.close()
        try await transcript.wait(timeout: .seconds(60)) { $0.hasExited }
        return process.withLock { $0?.terminationStatus } ?? -1
    }

    /// Lines that report a failed command (`<stdin>:N: error: …`), not warnings or logs.
    private static func isError(_ line: String) -> Bool { line.contains("error: ") }

    /// Reads `handle` to its end on a thread of its own, handing over the complete lines.
    private static func collectLines(from handle: FileHandle, _ deliver: @escaping @Sendable ([String]) -> Void) {
        let thread = Thread {
            var pending: [UInt8] = []
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += data
                var lines: [String] = []
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
                if !lines.isEmpty { deliver(lines) }
            }
            if !pending.isEmpty { deliver([String(decoding: pending, as: UTF8.self)]) }
        }
        thread.start()
    }

    /// The `symorva` binary built next to the test bundle (`.build/<triple>/debug/`), found
    /// the way `REPLProgramTests` finds it.
    static var binary: URL? { BuiltExecutable.url(named: "symorva") }
}
