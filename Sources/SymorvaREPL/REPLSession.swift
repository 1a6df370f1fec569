import SymorvaRuntime

/// How a session reports failures and whether it goes on after one.
package struct REPLRunOptions: Sendable, Equatable {
    /// The name errors are located in (`demo.symorva`, `<stdin>`): errors print as
    /// `<source>:<line>: error: …`. `nil` prints plain `error: …`, as at a terminal.
    package var sourceName: String?
    /// Whether the first failing command ends the run (script mode).
    package var stopsOnFailure: Bool

    /// Options for a run.
    package init(sourceName: String? = nil, stopsOnFailure: Bool = false) {
        self.sourceName = sourceName
        self.stopsOnFailure = stopsOnFailure
    }

    /// A person at a terminal: plain errors, keep going.
    package static let interactive = REPLRunOptions()

    /// A script file: located errors, stop at the first failure.
    package static func script(named name: String) -> REPLRunOptions {
        REPLRunOptions(sourceName: name, stopsOnFailure: true)
    }
}

/// A command line that failed, and why.
package struct REPLFailure: Sendable, Equatable {
    /// Its line number in the input.
    package var line: Int
    /// The line as read.
    package var text: String
    /// What went wrong.
    package var error: REPLError

    /// A failure record.
    package init(line: Int, text: String, error: REPLError) {
        self.line = line
        self.text = text
        self.error = error
    }
}

/// What a run did: how many commands ran, which failed, and why it ended.
package struct REPLRunSummary: Sendable, Equatable {
    /// Lines that named a command (blank and comment lines are not counted), failed or not.
    package var commandsRun = 0
    /// Every failed line, in order.
    package var failures: [REPLFailure] = []
    /// Whether a command (`quit`) ended the run.
    package var exitRequested = false
    /// Whether the run stopped at a failure before the end of its input.
    package var stoppedAtFailure = false

    /// An empty summary.
    package init() {}

    /// `0` when every command succeeded, else `1`: the process exit status.
    package var exitStatus: Int32 { failures.isEmpty ? 0 : 1 }
}

/// The REPL's core: a context, the registered commands, and a loop that runs lines.
///
/// A session does not know where its lines come from or where its output goes: the `symorva`
/// program hands it standard input and the terminal, tests hand it an array of lines and a
/// ``CapturingREPLOutput``. Built-in commands are registered on creation; features add theirs
/// with ``register(_:)-(REPLCommand)``.
package final class REPLSession: Sendable {
    /// Everything commands can reach.
    package let context: REPLContext

    /// A session with the built-in commands (`help`, `quit`, `trace`, `log`, `echo`, `sleep`,
    /// `config`) and, when given, more commands.
    package init(context: REPLContext = REPLContext(), commands: [REPLCommand] = []) {
        self.context = context
        for command in REPLBuiltins.commands + commands { context.register(command) }
    }

    /// Adds a command. A name that is already taken traps: see ``REPLCommandRegistry/register(_:)``.
    package func register(_ command: REPLCommand) { context.register(command) }

    /// Adds several commands.
    package func register(_ commands: [REPLCommand]) {
        for command in commands { context.register(command) }
    }

    /// Runs one line. Returns `false` for a blank or comment-only line, which runs nothing.
    @discardableResult
    package func execute(_ line: String) async throws(REPLError) -> Bool {
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
    package func run(_ input: any REPLInput, options: REPLRunOptions = .interactive) async -> REPLRunSummary {
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
    package func run(lines: [String], options: REPLRunOptions = .interactive) async -> REPLRunSummary {
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

/// The commands every session has, whatever features are linked in.
package enum REPLBuiltins {
    /// `help`, `quit`/`exit`, `trace`, `log level`, `echo`, `sleep` and `config`.
    package static var commands: [REPLCommand] {
        [help, quit, trace, log, echo, sleep, config]
    }

    /// `help [command …]`: every command, or one command's usage and details.
    package static let help = REPLCommand(
        "help", usage: "help [<command> …]", summary: "list the commands, or explain one",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in
            if words.isEmpty {
                printOverview(context)
            } else {
                try printHelp(for: words, context)
            }
        })

    /// `quit` (also `exit`): ends the session after the current line.
    package static let quit = REPLCommand(
        "quit", aliases: ["exit"], summary: "leave the REPL (also: exit)",
        details: "In a script, the rest of the file is not run and the exit status is 0 unless a command failed.",
        run: { context async throws(REPLError) in context.requestExit() })

    /// `trace on|off`: prints every transition of every host as it happens.
    package static let trace = REPLCommand(
        "trace", usage: "trace on|off", summary: "print every state-machine transition as it happens",
        details: """
            Each step of every machine host prints one line:
              trace: Machine from=<state> event=<event> to=<state> effects=[…]
            Ignored events, stale results and cancelled results are marked (ignored), (stale), (cancelled).
            Lines carry case names only, never payloads, so secrets and message bodies cannot appear.
            """,
        parse: { arguments throws(REPLError) in try arguments.next(oneOf: ["on", "off"]) == "on" },
        run: { isOn, context async throws(REPLError) in
            if isOn {
                context.startTracing()
                context.output.print("tracing on")
            } else {
                context.stopTracing()
                context.output.print("tracing off")
            }
        })

    private static let levelNames = LogLevel.allCases.map(\.description)

    /// `log level [<level>]`: shows or sets the log threshold.
    package static let log = REPLCommand.group(
        "log", summary: "logging controls",
        subcommands: [
            REPLCommand(
                "level", usage: "log level [<level>]",
                summary: "show or set the level below which log lines are dropped",
                details: """
                    Levels: \(levelNames.joined(separator: ", ")).
                    Log lines go to standard error; secrets print as <redacted>, private values as <private>.
                    """,
                parse: { arguments throws(REPLError) -> LogLevel? in
                    guard let name = arguments.optional() else { return nil }
                    guard let level = LogLevel.allCases.first(where: { $0.description == name }) else {
                        throw arguments.usageError
                    }
                    return level
                },
                run: { level, context async throws(REPLError) in
                    if let level { context.logCenter.threshold = level }
                    context.output.print("log level: \(context.logCenter.threshold)")
                })
        ])

    /// `echo <text> …`: prints its arguments joined by single spaces.
    package static let echo = REPLCommand(
        "echo", usage: "echo [<text> …]", summary: "print the text (marks steps in scripts and transcripts)",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in context.output.print(words.joined(separator: " ")) })

    /// `sleep <milliseconds>`: waits, so that asynchronous output (traces, sync) can arrive.
    package static let sleep = REPLCommand(
        "sleep", usage: "sleep <milliseconds>", summary: "wait, so that asynchronous output can arrive",
        parse: { arguments throws(REPLError) in try arguments.nextInteger(in: 0...600_000) },
        run: { milliseconds, _ async throws(REPLError) in
            try? await Task.sleep(for: .milliseconds(milliseconds))
        })

    /// `config`: shows the manifest and the `SYMORVA_` variables the session started with.
    package static let config = REPLCommand(
        "config", summary: "show the manifest and environment the REPL was started with",
        details:
            "Values of variables named like secrets (…_PASSWORD, …_TOKEN, …_SECRET, …_PIN, …_KEY) print as <redacted>.",
        run: { context async throws(REPLError) in
            let configuration = context.configuration
            let output = context.output
            output.print("manifest: \(configuration.manifestPath ?? "none")")
            output.print("environment file: \(configuration.environmentFilePath ?? "none")")
            let values = configuration.environment.symorvaValues
            for key in values.keys.sorted() {
                let value = REPLEnvironment.isSecret(key) ? "<redacted>" : values[key] ?? ""
                output.print("\(key)=\(value)")
            }
        })

    // MARK: Help text

    private static func printOverview(_ context: REPLContext) {
        let output = context.output
        output.print("commands:")
        let rows = context.commands.commands.flatMap(\.leaves).map { ($0.usage, $0.summary) }
        output.printColumns(rows)
        output.print("type 'help <command>' for details; quote arguments with spaces: echo \"a b\"")
    }

    private static func printHelp(for words: [String], _ context: REPLContext) throws(REPLError) {
        let registry = context.commands
        guard var command = registry.command(named: words[0]) else {
            throw .unknownCommand(words[0], suggestion: REPLSuggestion.closest(to: words[0], among: registry.words))
        }
        var path = command.name
        for word in words.dropFirst() {
            guard let subcommand = command.subcommand(named: word) else {
                let names = command.subcommands.flatMap { [$0.name] + $0.aliases }
                throw .unknownSubcommand(
                    command: path, name: word, suggestion: REPLSuggestion.closest(to: word, among: names))
            }
            command = subcommand
            path += " " + subcommand.name
        }
        let output = context.output
        if command.isGroup {
            output.print("\(path): \(command.summary)")
            if let details = command.details { output.print(details) }
            output.print("subcommands:")
            output.printColumns(command.leaves.map { ($0.usage, $0.summary) })
        } else {
            output.print("usage: \(command.usage)")
            output.print(command.summary)
            if let details = command.details { output.print(details) }
        }
    }
}
