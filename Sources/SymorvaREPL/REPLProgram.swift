import Dispatch
import SymorvaRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The options of the `symorva` program.
package struct REPLCommandLineOptions: Sendable, Equatable {
    /// `--script FILE`: run the file's lines, stop at the first failure.
    package var scriptPath: String?
    /// `--config PATH`: the community manifest for feature commands.
    package var manifestPath: String?
    /// `--env-file PATH`: `KEY=VALUE` lines, usually written by `Scripts/dev-server`.
    package var environmentFilePath: String?
    /// `--help`: print the usage and exit.
    package var showsUsage = false

    /// No options: an interactive REPL (or standard input, when it is not a terminal).
    package init(scriptPath: String? = nil, manifestPath: String? = nil, environmentFilePath: String? = nil) {
        self.scriptPath = scriptPath
        self.manifestPath = manifestPath
        self.environmentFilePath = environmentFilePath
    }

    /// The program's usage text.
    package static let usage = """
        usage: symorva [--config PATH] [--env-file PATH] [--script FILE]

          --config PATH     community manifest (symorva.config.json); default: $SYMORVA_MANIFEST
          --env-file PATH   KEY=VALUE environment file; default: $SYMORVA_ENV_FILE (optional)
          --script FILE     run FILE's commands, stop at the first failure, exit 1 if one failed
          -h, --help        show this text

        Without --script, commands are read from standard input: with a prompt on a terminal,
        line by line otherwise (exit status 1 if any command failed). Type 'help' for commands.
        """

    /// Parses the program's arguments (without the program name). Accepts `--name value` and
    /// `--name=value`; anything else is an ``REPLError/usage(_:)`` error.
    package static func parse(_ arguments: [String]) throws(REPLError) -> REPLCommandLineOptions {
        var options = REPLCommandLineOptions()
        var index = 0
        func value(for name: String, inline: String?) throws(REPLError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count else { throw .invalidArgument("option \(name) needs a value") }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let name = parts[0]
            let inline = parts.count > 1 ? parts[1] : nil
            switch name {
            case "--script": options.scriptPath = try value(for: name, inline: inline)
            case "--config": options.manifestPath = try value(for: name, inline: inline)
            case "--env-file": options.environmentFilePath = try value(for: name, inline: inline)
            case "-h", "--help": options.showsUsage = true
            default: throw .invalidArgument("unknown option '\(argument)' — try 'symorva --help'")
            }
            index += 1
        }
        return options
    }
}

/// The `symorva` program: reads its options, loads the configuration, runs a session.
///
/// `main.swift` is one call to ``run(arguments:environment:commands:output:launch:)``; feature
/// modules add their commands by passing them in `commands`, and `launch` prepares the context
/// before the first command (the `symorva` program restores the community's signed-in account).
package enum REPLProgram {
    /// Runs the program and returns its exit status: `0` when every command succeeded (and
    /// always for an interactive terminal session, whose errors a person has already seen), `1`
    /// when a command of a script or of piped input failed, `2` when the command line or the
    /// script file was unusable.
    package static func run(
        arguments: [String],
        environment: [String: String],
        commands: [REPLCommand] = [],
        output: any REPLOutput = StandardREPLOutput(),
        launch: (@Sendable (REPLContext) async -> Void)? = nil
    ) async -> Int32 {
        let options: REPLCommandLineOptions
        do {
            options = try REPLCommandLineOptions.parse(arguments)
        } catch {
            output.printError("error: \(error)")
            return 2
        }
        if options.showsUsage {
            output.print(REPLCommandLineOptions.usage)
            return 0
        }

        let configuration = loadConfiguration(options, environment: environment, output: output)
        let session = REPLSession(
            context: REPLContext(output: output, configuration: configuration), commands: commands)
        defer { session.context.stopTracing() }
        // Like an app's launch: restore what the device already has before the first command.
        await launch?(session.context)

        if let scriptPath = options.scriptPath {
            let text: String
            do {
                text = try TextFile.read(path: scriptPath)
            } catch {
                output.printError("error: \(error)")
                return 2
            }
            let input = REPLLinesInput(text: text, secrets: StandardREPLInput())
            return await session.run(input, options: .script(named: scriptPath)).exitStatus
        }

        let input = StandardREPLInput()
        if input.isTerminal {
            // A person saw each error as it happened: leaving the REPL is not a failure.
            output.print("symorva — type 'help' for commands, 'quit' to leave")
            _ = await session.run(input, options: .interactive)
            return 0
        }
        return await session.run(input, options: REPLRunOptions(sourceName: "<stdin>")).exitStatus
    }

    /// Builds the configuration: the process environment over the environment file, which is
    /// optional. A missing file is reported as a warning, never a failure, so the REPL starts
    /// before the development servers have ever run.
    package static func loadConfiguration(
        _ options: REPLCommandLineOptions, environment: [String: String], output: any REPLOutput
    ) -> REPLConfiguration {
        let path = options.environmentFilePath ?? environment[REPLEnvironment.environmentFileKey]
        var fileValues: [String: String] = [:]
        var loadedPath: String?
        if let path, !path.isEmpty {
            do {
                fileValues = REPLEnvironment.parseFile(try TextFile.read(path: path))
                loadedPath = path
            } catch {
                output.printError("warning: \(error); continuing without an environment file")
            }
        }
        let environment = REPLEnvironment(processValues: environment, fileValues: fileValues)
        if let manifest = options.manifestPath, !TextFile.exists(manifest) {
            output.printError("warning: manifest '\(manifest)' does not exist")
        }
        return REPLConfiguration(
            manifestPath: options.manifestPath, environmentFilePath: loadedPath, environment: environment)
    }
}

/// One line of REPL input and where it came from.
package struct REPLLine: Sendable, Equatable {
    /// The line's number in its source, from 1.
    package var number: Int
    /// The text, without its newline.
    package var text: String

    /// A numbered line.
    package init(number: Int, text: String) {
        self.number = number
        self.text = text
    }
}

/// Where a session reads command lines and secrets from.
///
/// The session asks for one line at a time and only after the previous command has finished,
/// so an input may print a prompt before reading.
package protocol REPLInput: Sendable {
    /// The next command line, or `nil` at the end of the input.
    func nextLine() async -> REPLLine?

    /// Reads a secret (password, PIN) for a running command, without echoing it where the
    /// input is a terminal. `nil` when the input has ended.
    func readSecret(prompt: String) async -> String?
}

/// Lines held in memory: tests, transcripts, `--script` files.
///
/// A secret is read from `secrets` when one is given, else it is the next line: a transcript
/// writes the secret as an input line right after the command that asks for it.
package final class REPLLinesInput: REPLInput {
    private let state: Lock<(lines: [String], next: Int)>
    private let secrets: (any REPLInput)?

    /// Reads `lines` in order, numbering them from 1; secrets come from `secrets` or the lines.
    package init(_ lines: [String], secrets: (any REPLInput)? = nil) {
        self.state = Lock((lines, 0))
        self.secrets = secrets
    }

    /// Splits `text` into lines (a final newline does not make an extra empty line).
    package convenience init(text: String, secrets: (any REPLInput)? = nil) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
        }
        if lines.last == "" { lines.removeLast() }
        self.init(lines, secrets: secrets)
    }

    package func nextLine() async -> REPLLine? { take() }

    package func readSecret(prompt: String) async -> String? {
        if let secrets { return await secrets.readSecret(prompt: prompt) }
        return take()?.text
    }

    private func take() -> REPLLine? {
        state.withLock { state in
            guard state.next < state.lines.count else { return nil }
            defer { state.next += 1 }
            return REPLLine(number: state.next + 1, text: state.lines[state.next])
        }
    }
}

/// The process's standard input.
///
/// On a terminal it prints `prompt` before each line and reads secrets with echo off
/// (termios). On a pipe or a file it prints no prompt and a secret is simply the next line,
/// so `printf 'login alice\nhunter2\n' | symorva` works. Reads happen on one serial queue,
/// never on the concurrency pool, so a waiting REPL does not hold up the hosts.
package final class StandardREPLInput: REPLInput {
    /// Whether standard input is a terminal.
    package let isTerminal: Bool
    /// What is printed before each command line on a terminal.
    package let prompt: String

    private let queue = DispatchQueue(label: "symorva.repl.stdin")
    private let lineCount = Lock(0)

    /// Standard input, with `prompt` shown on a terminal.
    package init(prompt: String = "symorva> ") {
        self.isTerminal = Terminal.isStandardInputTerminal
        self.prompt = prompt
    }

    package func nextLine() async -> REPLLine? {
        let prompt = isTerminal ? self.prompt : nil
        guard let text = await read(prompt: prompt, hidden: false) else { return nil }
        let number = lineCount.withLock { count in
            count += 1
            return count
        }
        return REPLLine(number: number, text: text)
    }

    package func readSecret(prompt: String) async -> String? {
        guard isTerminal else {
            let line = await read(prompt: nil, hidden: false)
            if line != nil { lineCount.withLock { $0 += 1 } }
            return line
        }
        return await read(prompt: prompt, hidden: true)
    }

    private func read(prompt: String?, hidden: Bool) async -> String? {
        await withCheckedContinuation { continuation in
            queue.async {
                if let prompt { Terminal.write(prompt, to: 1) }
                let line: String?
                if hidden {
                    line = Terminal.withEchoDisabled { readLine(strippingNewline: true) }
                    // The user's Return was not echoed: end the prompt's line ourselves.
                    Terminal.write("\n", to: 1)
                } else {
                    line = readLine(strippingNewline: true)
                    if line == nil, prompt != nil { Terminal.write("\n", to: 1) }
                }
                continuation.resume(returning: line)
            }
        }
    }
}

/// Reads a whole text file, for `--script` and environment files.
enum TextFile {
    /// The file's contents as UTF-8 (invalid bytes are repaired), or why it could not be read.
    static func read(path: String) throws(REPLError) -> String {
        guard let file = fopen(path, "rb") else {
            throw .unreadableFile(path: path, reason: String(cString: strerror(errno)))
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes.append(contentsOf: buffer[0..<count])
            if count < buffer.count {
                if ferror(file) != 0 { throw .unreadableFile(path: path, reason: "read error") }
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether a regular file or a directory exists at `path`.
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}

/// Which stream a line of REPL output belongs to.
package enum REPLStream: Sendable, Equatable {
    /// Results of commands and trace lines (standard output).
    case standard
    /// Error reports (standard error).
    case error
}

/// Where the REPL writes: the terminal in the `symorva` program, a buffer in tests.
///
/// Lines may arrive from any thread (trace lines come from the hosts' executors), so an
/// output must keep each line whole and in the order it was written.
package protocol REPLOutput: Sendable {
    /// Writes one line; `line` has no trailing newline.
    func write(_ line: String, to stream: REPLStream)
}

extension REPLOutput {
    /// Writes a line of normal output, its control characters escaped
    /// (``TerminalText/sanitizedLine(_:)``).
    package func print(_ line: String) { write(TerminalText.sanitizedLine(line), to: .standard) }

    /// Writes a line to the error stream, its control characters escaped
    /// (``TerminalText/sanitizedLine(_:)``).
    package func printError(_ line: String) { write(TerminalText.sanitizedLine(line), to: .error) }

    /// Writes rows as two aligned columns: `  left  right`, the left column padded to the
    /// widest entry (at most `maximumWidth` characters; longer entries push their right text).
    /// Each cell is one line: its control characters, line breaks included, are escaped
    /// (``TerminalText/escaped(_:)``).
    package func printColumns(_ rows: [(String, String)], indent: String = "  ", maximumWidth: Int = 40) {
        let rows = rows.map { (TerminalText.escaped($0.0), TerminalText.escaped($0.1)) }
        let width = min(maximumWidth, rows.map(\.0.count).max() ?? 0)
        for (left, right) in rows {
            let padding = String(repeating: " ", count: max(0, width - left.count))
            print("\(indent)\(left)\(padding)  \(right)")
        }
    }
}

/// Writes to the process's standard output and standard error, unbuffered, a line at a time.
package struct StandardREPLOutput: REPLOutput {
    private static let lock = Lock(())

    /// The process's standard streams.
    package init() {}

    package func write(_ line: String, to stream: REPLStream) {
        Self.lock.withLock { _ in
            Terminal.write(line + "\n", to: stream == .standard ? 1 : 2)
        }
    }
}

/// Keeps every line in memory, both streams interleaved in the order written.
///
/// Tests read ``lines`` to compare with a transcript; ``text`` is the same as one string.
package final class CapturingREPLOutput: REPLOutput {
    /// One captured line.
    package struct Line: Sendable, Equatable {
        /// The stream it was written to.
        package var stream: REPLStream
        /// Its text.
        package var text: String

        /// A captured line.
        package init(stream: REPLStream, text: String) {
            self.stream = stream
            self.text = text
        }
    }

    private let storage = Lock<[Line]>([])

    /// An empty capture.
    package init() {}

    package func write(_ line: String, to stream: REPLStream) {
        // A multi-line write becomes several lines so that transcripts compare line by line.
        let parts = line.split(separator: "\n", omittingEmptySubsequences: false)
        storage.withLock { lines in
            for part in parts { lines.append(Line(stream: stream, text: String(part))) }
        }
    }

    /// Every line so far.
    package var lines: [Line] { storage.withLock { $0 } }

    /// Every line's text so far, both streams.
    package var texts: [String] { lines.map(\.text) }

    /// Everything so far, a line per entry.
    package var text: String { texts.joined(separator: "\n") }

    /// Forgets everything captured.
    package func reset() { storage.withLock { $0.removeAll() } }
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

    /// Runs `body` with the terminal's echo switched off, restoring the previous settings after —
    /// also when Ctrl-C, a hang-up or a termination signal ends the process at the prompt: a
    /// handler puts the settings back and lets the signal end the process as it would have.
    ///
    /// When standard input is not a terminal (or its settings cannot be read) `body` runs as is:
    /// there is no echo to hide on a pipe.
    static func withEchoDisabled<T>(_ body: () -> T) -> T {
        var original = termios()
        guard tcgetattr(0, &original) == 0 else { return body() }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        savedTerminalSettings = original
        let previous = endingSignals.map { ($0, signal($0, restoreTerminalAndReraise)) }
        defer {
            for (number, handler) in previous { signal(number, handler) }
        }
        guard tcsetattr(0, TCSAFLUSH, &silent) == 0 else { return body() }
        defer { _ = tcsetattr(0, TCSAFLUSH, &original) }
        return body()
    }

    /// The signals whose default action ends the process while a secret is being typed.
    private static let endingSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]
}

/// The terminal settings to put back when a signal ends the process at a secret prompt.
///
/// Written by `Terminal.withEchoDisabled` before it installs the handler and read only by the
/// handler; secret prompts run one at a time on the input's serial queue, so there is never a
/// concurrent write (the one reason `nonisolated(unsafe)` is needed: a C signal handler can
/// reach no actor or lock).
nonisolated(unsafe) private var savedTerminalSettings = termios()

/// Restores the terminal, then ends the process with `number` as the default action would.
/// Only async-signal-safe calls: `tcsetattr`, `signal`, `raise`.
private func restoreTerminalAndReraise(_ number: Int32) {
    _ = tcsetattr(0, TCSANOW, &savedTerminalSettings)
    signal(number, SIG_DFL)
    raise(number)
}

private func systemWrite(_ descriptor: Int32, _ pointer: UnsafePointer<UInt8>, _ count: Int) -> Int {
    write(descriptor, pointer, count)
}
