/// How a session reports failures and whether it goes on after one.
public struct REPLRunOptions: Sendable, Equatable {
    /// The name errors are located in (`demo.symorva`, `<stdin>`): errors print as
    /// `<source>:<line>: error: …`. `nil` prints plain `error: …`, as at a terminal.
    public var sourceName: String?
    /// Whether the first failing command ends the run (script mode).
    public var stopsOnFailure: Bool

    /// Options for a run.
    public init(sourceName: String? = nil, stopsOnFailure: Bool = false) {
        self.sourceName = sourceName
        self.stopsOnFailure = stopsOnFailure
    }

    /// A person at a terminal: plain errors, keep going.
    public static let interactive = REPLRunOptions()

    /// A script file: located errors, stop at the first failure.
    public static func script(named name: String) -> REPLRunOptions {
        REPLRunOptions(sourceName: name, stopsOnFailure: true)
    }
}

/// A command line that failed, and why.
public struct REPLFailure: Sendable, Equatable {
    /// Its line number in the input.
    public var line: Int
    /// The line as read.
    public var text: String
    /// What went wrong.
    public var error: REPLError

    /// A failure record.
    public init(line: Int, text: String, error: REPLError) {
        self.line = line
        self.text = text
        self.error = error
    }
}

/// What a run did: how many commands ran, which failed, and why it ended.
public struct REPLRunSummary: Sendable, Equatable {
    /// Lines that named a command (blank and comment lines are not counted), failed or not.
    public var commandsRun = 0
    /// Every failed line, in order.
    public var failures: [REPLFailure] = []
    /// Whether a command (`quit`) ended the run.
    public var exitRequested = false
    /// Whether the run stopped at a failure before the end of its input.
    public var stoppedAtFailure = false

    /// An empty summary.
    public init() {}

    /// `0` when every command succeeded, else `1`: the process exit status.
    public var exitStatus: Int32 { failures.isEmpty ? 0 : 1 }
}

/// The REPL's core: a context, the registered commands, and a loop that runs lines.
///
/// A session does not know where its lines come from or where its output goes: the `symorva`
/// program hands it standard input and the terminal, tests hand it an array of lines and a
/// ``CapturingREPLOutput``. Built-in commands are registered on creation; features add theirs
/// with ``register(_:)``.
public final class REPLSession: Sendable {
    /// Everything commands can reach.
    public let context: REPLContext

    /// A session with the built-in commands (`help`, `quit`, `trace`, `log`, `echo`, `sleep`,
    /// `config`) and, when given, more commands.
    public init(context: REPLContext = REPLContext(), commands: [REPLCommand] = []) {
        self.context = context
        for command in REPLBuiltins.commands + commands { context.register(command) }
    }

    /// Adds a command. A name that is already taken traps: see ``REPLCommandRegistry/register(_:)``.
    public func register(_ command: REPLCommand) { context.register(command) }

    /// Adds several commands.
    public func register(_ commands: [REPLCommand]) {
        for command in commands { context.register(command) }
    }

    /// Runs one line. Returns `false` for a blank or comment-only line, which runs nothing.
    @discardableResult
    public func execute(_ line: String) async throws(REPLError) -> Bool {
        let words = try REPLLineParser.words(of: line)
        guard !words.isEmpty else { return false }
        let (command, argumentWords) = try context.commands.resolve(words)
        guard let body = command.body else { throw .usage(command.usage) }
        var arguments = REPLArguments(argumentWords, usage: command.usage)
        try await body(&arguments, context)
        return true
    }

    /// Runs every line of `input` until it ends, a command asks to exit, or (when the options
    /// say so) a command fails. Errors are printed to the error stream; the REPL goes on.
    public func run(_ input: any REPLInput, options: REPLRunOptions = .interactive) async -> REPLRunSummary {
        context.setInput(input)
        defer { context.setInput(nil) }
        var summary = REPLRunSummary()
        while !context.isExitRequested, let line = await input.nextLine() {
            do {
                if try await execute(line.text) { summary.commandsRun += 1 }
            } catch {
                summary.commandsRun += 1
                summary.failures.append(REPLFailure(line: line.number, text: line.text, error: error))
                report(error, at: line.number, options: options)
                if options.stopsOnFailure {
                    summary.stoppedAtFailure = true
                    break
                }
            }
        }
        summary.exitRequested = context.isExitRequested
        return summary
    }

    /// Runs `lines` in order (tests, `--script`). Secrets are read from the following line.
    public func run(lines: [String], options: REPLRunOptions = .interactive) async -> REPLRunSummary {
        await run(REPLLinesInput(lines), options: options)
    }

    private func report(_ error: REPLError, at line: Int, options: REPLRunOptions) {
        if let source = options.sourceName {
            context.output.printError("\(source):\(line): error: \(error)")
        } else {
            context.output.printError("error: \(error)")
        }
    }
}
