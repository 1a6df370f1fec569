import Foundation
import SymorvaREPL
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("symorva command line")
struct REPLCommandLineTests {
    @Test("Parses --script, --config and --env-file in both spellings")
    func parse() throws {
        let options = try REPLCommandLineOptions.parse([
            "--script", "a.symorva", "--config=m.json", "--env-file", "dev.env",
        ])
        #expect(
            options
                == REPLCommandLineOptions(
                    scriptPath: "a.symorva", manifestPath: "m.json", environmentFilePath: "dev.env"))
        #expect(try REPLCommandLineOptions.parse(["-h"]).showsUsage)
    }

    @Test("Rejects unknown options and missing values")
    func errors() {
        #expect(throws: REPLError.invalidArgument("unknown option '--nope' — try 'symorva --help'")) {
            try REPLCommandLineOptions.parse(["--nope"])
        }
        #expect(throws: REPLError.invalidArgument("option --script needs a value")) {
            try REPLCommandLineOptions.parse(["--script"])
        }
    }

    @Test("Environment files: assignments, export, quotes, comments")
    func environmentFile() {
        let text = """
            # written by Scripts/dev-server
            SYMORVA_HOMESERVER_URL=http://127.0.0.1:8008
            export SYMORVA_SERVER_NAME = localhost
            SYMORVA_ADMIN_PASSWORD="pa ss\\"word"
            SYMORVA_STATE_DIR='/tmp/state dir'
            SYMORVA_MANIFEST=/work/symorva.config.json # the manifest
            not an assignment
            1BAD=x

            """
        #expect(
            REPLEnvironment.parseFile(text) == [
                "SYMORVA_HOMESERVER_URL": "http://127.0.0.1:8008",
                "SYMORVA_SERVER_NAME": "localhost",
                "SYMORVA_ADMIN_PASSWORD": "pa ss\"word",
                "SYMORVA_STATE_DIR": "/tmp/state dir",
                "SYMORVA_MANIFEST": "/work/symorva.config.json",
            ])
    }

    @Test("Secret-looking variables are recognised by their words")
    func secretNames() {
        for name in [
            "SYMORVA_ADMIN_PASSWORD", "SYMORVA_REGISTRATION_SHARED_SECRET", "ACCESS_TOKEN", "WALLET_PIN", "SIGNING_KEY",
            "SYMORVA_PASSWORD_FILE",
        ] {
            #expect(REPLEnvironment.isSecret(name), "\(name)")
        }
        for name in ["SYMORVA_ACCESS_TOKEN_LIFETIME", "SYMORVA_HOMESERVER_URL", "SYMORVA_KEYBOARD", "SPINNER"] {
            #expect(!REPLEnvironment.isSecret(name), "\(name)")
        }
    }

    @Test("The process environment wins over the file; the manifest falls back to SYMORVA_MANIFEST")
    func configuration() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-repl-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("dev.env")
        try "SYMORVA_HOMESERVER_URL=http://file\nSYMORVA_MANIFEST=/m.json\n".write(
            to: file, atomically: true, encoding: .utf8)

        let capture = CapturingREPLOutput()
        let configuration = REPLProgram.loadConfiguration(
            REPLCommandLineOptions(),
            environment: ["SYMORVA_ENV_FILE": file.path, "SYMORVA_HOMESERVER_URL": "http://process"], output: capture)
        #expect(configuration.environment[REPLEnvironment.homeserverURLKey] == "http://process")
        #expect(configuration.manifestPath == "/m.json")
        #expect(configuration.environmentFilePath == file.path)
        #expect(capture.texts.isEmpty)
    }

    @Test("A missing environment file is a warning, not a failure")
    func missingEnvironmentFile() {
        let capture = CapturingREPLOutput()
        let configuration = REPLProgram.loadConfiguration(
            REPLCommandLineOptions(environmentFilePath: "/nonexistent/dev.env"), environment: [:], output: capture)
        #expect(configuration.environmentFilePath == nil)
        #expect(configuration.environment.symorvaValues.isEmpty)
        #expect(capture.lines.map(\.stream) == [.error])
        #expect(capture.text.hasPrefix("warning: cannot read '/nonexistent/dev.env'"))
    }
}

/// Runs the built `symorva` program as a subprocess: the exit status is part of its contract.
@Suite("symorva program", .timeLimit(.minutes(1)))
struct REPLProgramTests {
    struct Result {
        var status: Int32
        var standardOutput: String
        var standardError: String
    }

    /// The `symorva` binary built next to the test bundle (`.build/<triple>/debug/`).
    static var binary: URL? { BuiltExecutable.url(named: "symorva") }

    static func run(_ arguments: [String], standardInput: String = "") async throws -> Result {
        let binary = try #require(Self.binary, "the symorva binary is not built next to the test bundle")
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                let process = Process()
                process.executableURL = binary
                process.arguments = arguments
                let input = Pipe()
                let output = Pipe()
                let error = Pipe()
                process.standardInput = input
                process.standardOutput = output
                process.standardError = error
                do {
                    try process.run()
                } catch {
                    continuation.resume(throwing: error)
                    return
                }
                input.fileHandleForWriting.write(Data(standardInput.utf8))
                try? input.fileHandleForWriting.close()
                // Small outputs: reading to the end after the input is closed cannot deadlock.
                let out = output.fileHandleForReading.readDataToEndOfFile()
                let err = error.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(
                    returning: Result(
                        status: process.terminationStatus, standardOutput: String(decoding: out, as: UTF8.self),
                        standardError: String(decoding: err, as: UTF8.self)))
            }
        }
    }

    static func script(_ text: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-\(UUID()).symorva")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    @Test("A good script exits 0")
    func goodScript() async throws {
        let script = try Self.script("# a good script\necho one\n\nhelp echo\nlog level info\n")
        defer { try? FileManager.default.removeItem(at: script) }
        let result = try await Self.run(["--script", script.path])
        #expect(result.status == 0, "stderr: \(result.standardError)")
        #expect(result.standardOutput.hasPrefix("one\nusage: echo [<text> …]\n"))
        #expect(result.standardError.isEmpty)
    }

    @Test("A failing script exits non-zero at the failing line")
    func failingScript() async throws {
        let script = try Self.script("echo one\ntrace sideways\necho never\n")
        defer { try? FileManager.default.removeItem(at: script) }
        let result = try await Self.run(["--script", script.path])
        #expect(result.status == 1)
        #expect(result.standardOutput == "one\n")
        #expect(result.standardError == "\(script.path):2: error: usage: trace on|off\n")
    }

    @Test("Standard input that is not a terminal: no prompt, keep going, exit 1 after a failure")
    func standardInput() async throws {
        let result = try await Self.run([], standardInput: "echo a\nbogus\necho b\n")
        #expect(result.status == 1)
        #expect(result.standardOutput == "a\nb\n")
        #expect(result.standardError == "<stdin>:2: error: unknown command 'bogus' — try 'help'\n")

        let clean = try await Self.run([], standardInput: "echo a\nquit\necho never\n")
        #expect(clean.status == 0)
        #expect(clean.standardOutput == "a\n")
    }

    @Test("Bad options and unreadable scripts exit 2")
    func badInvocation() async throws {
        #expect(try await Self.run(["--nope"]).status == 2)
        let missing = try await Self.run(["--script", "/nonexistent/x.symorva"])
        #expect(missing.status == 2)
        #expect(missing.standardError.contains("cannot read '/nonexistent/x.symorva'"))
    }
}
