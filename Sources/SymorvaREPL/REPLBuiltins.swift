import SymorvaRuntime

/// The commands every session has, whatever features are linked in.
public enum REPLBuiltins {
    /// `help`, `quit`/`exit`, `trace`, `log level`, `echo`, `sleep` and `config`.
    public static var commands: [REPLCommand] {
        [help, quit, trace, log, echo, sleep, config]
    }

    /// `help [command …]`: every command, or one command's usage and details.
    public static let help = REPLCommand(
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
    public static let quit = REPLCommand(
        "quit", aliases: ["exit"], summary: "leave the REPL (also: exit)",
        details: "In a script, the rest of the file is not run and the exit status is 0 unless a command failed.",
        run: { context async throws(REPLError) in context.requestExit() })

    /// `trace on|off`: prints every transition of every host as it happens.
    public static let trace = REPLCommand(
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
    public static let log = REPLCommand.group(
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
    public static let echo = REPLCommand(
        "echo", usage: "echo [<text> …]", summary: "print the text (marks steps in scripts and transcripts)",
        parse: { arguments throws(REPLError) in try arguments.rest() },
        run: { words, context async throws(REPLError) in context.output.print(words.joined(separator: " ")) })

    /// `sleep <milliseconds>`: waits, so that asynchronous output (traces, sync) can arrive.
    public static let sleep = REPLCommand(
        "sleep", usage: "sleep <milliseconds>", summary: "wait, so that asynchronous output can arrive",
        parse: { arguments throws(REPLError) in try arguments.nextInteger(in: 0...600_000) },
        run: { milliseconds, _ async throws(REPLError) in
            try? await Task.sleep(for: .milliseconds(milliseconds))
        })

    /// `config`: shows the manifest and the `SYMORVA_` variables the session started with.
    public static let config = REPLCommand(
        "config", summary: "show the manifest and environment the REPL was started with",
        details: "Values of variables whose names mention a password, token, secret, PIN or key print as <redacted>.",
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
