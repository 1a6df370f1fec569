/// The options of the `symorva` program.
public struct REPLCommandLineOptions: Sendable, Equatable {
    /// `--script FILE`: run the file's lines, stop at the first failure.
    public var scriptPath: String?
    /// `--config PATH`: the community manifest for feature commands.
    public var manifestPath: String?
    /// `--env-file PATH`: `KEY=VALUE` lines, usually written by `Scripts/dev-server`.
    public var environmentFilePath: String?
    /// `--help`: print the usage and exit.
    public var showsUsage = false

    /// No options: an interactive REPL (or standard input, when it is not a terminal).
    public init(scriptPath: String? = nil, manifestPath: String? = nil, environmentFilePath: String? = nil) {
        self.scriptPath = scriptPath
        self.manifestPath = manifestPath
        self.environmentFilePath = environmentFilePath
    }

    /// The program's usage text.
    public static let usage = """
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
    public static func parse(_ arguments: [String]) throws(REPLError) -> REPLCommandLineOptions {
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
/// `main.swift` is one call to ``run(arguments:environment:commands:)``; feature modules add
/// their commands by passing them in `commands`.
public enum REPLProgram {
    /// Runs the program and returns its exit status: `0` when every command succeeded (and
    /// always for an interactive terminal session, whose errors a person has already seen), `1`
    /// when a command of a script or of piped input failed, `2` when the command line or the
    /// script file was unusable.
    public static func run(
        arguments: [String],
        environment: [String: String],
        commands: [REPLCommand] = [],
        output: any REPLOutput = StandardREPLOutput()
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
    public static func loadConfiguration(
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
