import SymorvaREPL
import SymorvaRuntime
import Testing

@Suite("REPL line parser")
struct REPLLineParserTests {
    @Test(
        "Splits on whitespace and drops comments",
        arguments: [
            ("echo a  b\tc", ["echo", "a", "b", "c"]),
            ("  # only a comment", []),
            ("", []),
            ("echo a # b c", ["echo", "a"]),
            ("echo a#b", ["echo", "a#b"]),
            ("echo \"a b\" 'c d'", ["echo", "a b", "c d"]),
            ("echo \"\" ''", ["echo", "", ""]),
            ("echo \"say \\\"hi\\\"\"", ["echo", "say \"hi\""]),
            ("echo 'a\\b'", ["echo", "a\\b"]),
            ("echo a\\ b", ["echo", "a b"]),
            ("echo x\"y\"'z'", ["echo", "xyz"]),
            ("wallet send @bob:example.org 5 SYM", ["wallet", "send", "@bob:example.org", "5", "SYM"]),
        ])
    func words(line: String, expected: [String]) throws {
        #expect(try REPLLineParser.words(of: line) == expected)
    }

    @Test("Rejects unterminated quotes and a dangling backslash")
    func errors() {
        #expect(throws: REPLError.unterminatedQuote("\"")) { try REPLLineParser.words(of: "echo \"abc") }
        #expect(throws: REPLError.unterminatedQuote("'")) { try REPLLineParser.words(of: "echo 'abc") }
        #expect(throws: REPLError.danglingEscape) { try REPLLineParser.words(of: "echo abc\\") }
    }
}

@Suite("REPL suggestions")
struct REPLSuggestionTests {
    @Test("Edit distance counts insertions, deletions, substitutions and transpositions")
    func editDistance() {
        #expect(REPLSuggestion.editDistance("help", "help") == 0)
        #expect(REPLSuggestion.editDistance("hlep", "help") == 1)
        #expect(REPLSuggestion.editDistance("hel", "help") == 1)
        #expect(REPLSuggestion.editDistance("kitten", "sitting") == 3)
        #expect(REPLSuggestion.editDistance("", "abc") == 3)
    }

    @Test("Suggests only close names, preferring the closest")
    func closest() {
        let names = ["help", "trace", "quit", "exit", "echo"]
        #expect(REPLSuggestion.closest(to: "hepl", among: names) == "help")
        #expect(REPLSuggestion.closest(to: "qiut", among: names) == "quit")
        #expect(REPLSuggestion.closest(to: "zzz", among: names) == nil)
        #expect(REPLSuggestion.closest(to: "TRACE", among: names) == "trace")
    }
}

@Suite("REPL session")
struct REPLSessionTests {
    @Test("A script stops at the first failure and reports its line")
    func scriptStops() async {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        let summary = await session.run(
            lines: ["echo one", "", "bogus", "echo never"], options: .script(named: "demo.symorva"))
        #expect(capture.texts == ["one", "demo.symorva:3: error: unknown command 'bogus' — try 'help'"])
        #expect(
            summary.failures == [REPLFailure(line: 3, text: "bogus", error: .unknownCommand("bogus", suggestion: nil))])
        #expect(summary.stoppedAtFailure)
        #expect(summary.commandsRun == 2)
        #expect(summary.exitStatus == 1)
    }

    @Test("Interactive runs keep going after a failure but still exit non-zero")
    func interactiveContinues() async {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        let summary = await session.run(lines: ["fixture fail", "echo after"])
        #expect(capture.lines.map(\.stream) == [.error, .standard])
        #expect(capture.texts == ["error: the fixture failed on purpose", "after"])
        #expect(!summary.stoppedAtFailure)
        #expect(summary.exitStatus == 1)
    }

    @Test("A good script exits 0")
    func goodScript() async {
        let session = REPLFixtures.session(capture: CapturingREPLOutput())
        let summary = await session.run(lines: ["# setup", "echo hi", "log level info"], options: .script(named: "s"))
        #expect(summary.failures.isEmpty)
        #expect(summary.commandsRun == 2)
        #expect(summary.exitStatus == 0)
        #expect(session.context.logCenter.threshold == .info)
    }

    @Test("quit stops reading input")
    func quitStops() async {
        let capture = CapturingREPLOutput()
        let input = REPLLinesInput(["echo a", "quit", "echo b"])
        let session = REPLFixtures.session(capture: capture)
        let summary = await session.run(input)
        #expect(capture.texts == ["a"])
        #expect(summary.exitRequested)
        #expect(await input.nextLine() == REPLLine(number: 3, text: "echo b"))
    }

    @Test("A secret read past the end of input is an error")
    func secretAtEnd() async {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        let summary = await session.run(lines: ["fixture secret PIN"])
        #expect(summary.failures.map(\.error) == [.inputEnded])
    }

    @Test("Secrets come from a separate input when one is given")
    func separateSecretInput() async {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        let input = REPLLinesInput(["fixture secret PIN", "echo next"], secrets: REPLLinesInput(["987654"]))
        _ = await session.run(input)
        #expect(capture.texts == ["read PIN: <redacted> (6 characters)", "next"])
    }

    @Test("Blank and comment lines run nothing")
    func blankLines() async throws {
        let session = REPLFixtures.session(capture: CapturingREPLOutput())
        #expect(try await session.execute("   ") == false)
        #expect(try await session.execute("# note") == false)
        #expect(try await session.execute("echo x") == true)
    }

    @Test("Registering a command makes it callable and listed")
    func registration() async throws {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        session.register(
            REPLCommand(
                "greet", usage: "greet <name>", summary: "say hello",
                parse: { arguments throws(REPLError) in try arguments.next() },
                run: { name, context async throws(REPLError) in context.output.print("hello, \(name)") }))
        try await session.execute("greet 'Ada L'")
        #expect(capture.texts == ["hello, Ada L"])
        #expect(session.context.commands.command(named: "greet")?.summary == "say hello")
        await #expect(throws: REPLError.usage("greet <name>")) { try await session.execute("greet a b") }
    }

    @Test("Trace output goes through the session's own tracer only")
    func traceIsolation() async throws {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        try await session.execute("trace on")
        Tracer.shared.record(TraceRecord(kind: .transition, machine: "Elsewhere", from: "a", event: "e", to: "b"))
        session.context.tracer.record(TraceRecord(kind: .ignored, machine: "Here", from: "a", event: "e", to: "a"))
        try await session.execute("trace off")
        session.context.tracer.record(TraceRecord(kind: .transition, machine: "After", from: "a", event: "e", to: "b"))
        #expect(
            capture.texts == [
                "tracing on", "trace: Here from=a event=e to=a effects=[] (ignored)", "tracing off",
            ])
        #expect(!session.context.isTracing)
    }
}

/// A tiny machine for the transcripts' `trace on` scenario: it pings until it has had
/// `count` pongs. It exists only in tests; real commands trace the SDK's own machines.
struct PingMachine: StateMachine {
    static let name = "Ping"

    enum State: Sendable, Equatable, CaseNamed {
        /// Nothing asked yet.
        case idle
        /// A ping is out; `remaining` pongs are still expected.
        case waiting(remaining: Int)
        /// Every pong arrived.
        case done
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Someone asked for `count` round trips.
        case started(count: Int)
        /// The interpreter answered a ping.
        case pongReceived
    }

    enum Effect: MachineEffect, Equatable {
        /// Send one ping.
        case sendPing
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle:
            switch event {
            case .started(let count):
                return count > 0 ? .move(to: .waiting(remaining: count), effects: [.sendPing]) : .move(to: .done)
            case .pongReceived:
                return .ignored
            }
        case .waiting(let remaining):
            switch event {
            case .started:
                return .ignored
            case .pongReceived:
                if remaining > 1 { return .move(to: .waiting(remaining: remaining - 1), effects: [.sendPing]) }
                return .move(to: .done)
            }
        case .done:
            return .ignored
        }
    }
}

/// The state slot the `fixture remember` / `fixture recall` pair shares.
enum RememberedWordKey: REPLStateKey {
    typealias Value = String
}

/// Commands that the transcript tests add to the built-ins, written the way a feature module
/// writes its own: they exercise subcommands, argument parsing, secrets, state slots,
/// failures and tracing.
enum REPLFixtures {
    static var commands: [REPLCommand] { [fixture] }

    static let fixture = REPLCommand.group(
        "fixture", summary: "test-only commands",
        subcommands: [ping, secret, send, remember, recall, fail])

    static let ping = REPLCommand(
        "ping", usage: "fixture ping [<count>]", summary: "run a test machine through a host (count round trips)",
        parse: { arguments throws(REPLError) -> Int in
            guard !arguments.isAtEnd else { return 1 }
            return try arguments.nextInteger(in: 0...100)
        },
        run: { count, context async throws(REPLError) in
            let host = MachineHost(
                machine: PingMachine(), initial: .idle,
                interpreter: ClosureInterpreter<PingMachine> { _, _ in .pongReceived }, tracer: context.tracer)
            let states = host.states.values
            await host.send(.started(count: count))
            for await state in states {
                if case .done = state { break }
            }
            // A second start has no meaning once done: the trace shows it as ignored.
            await host.send(.started(count: count))
            await host.stop()
            context.output.print("ping: \(count) round trips")
        })

    static let secret = REPLCommand(
        "secret", usage: "fixture secret <label>", summary: "read a secret and show that it stays redacted",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { label, context async throws(REPLError) in
            let value = try await context.readSecret(prompt: "\(label): ")
            context.output.print("read \(label): \(value) (\(value.exposedValue.count) characters)")
        })

    static let send = REPLCommand(
        "send", usage: "fixture send <member> <amount> <asset>", summary: "parse a wallet-style command",
        parse: { arguments throws(REPLError) in
            (
                member: try arguments.next(), amount: try arguments.nextInteger(in: 1...1_000_000),
                asset: try arguments.next()
            )
        },
        run: { transfer, context async throws(REPLError) in
            context.output.print("would send \(transfer.amount) \(transfer.asset) to \(transfer.member)")
        })

    static let remember = REPLCommand(
        "remember", usage: "fixture remember <word>", summary: "keep a word in a state slot",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { word, context async throws(REPLError) in context[RememberedWordKey.self] = word })

    static let recall = REPLCommand(
        "recall", usage: "fixture recall", summary: "print the remembered word",
        run: { context async throws(REPLError) in
            guard let word = context[RememberedWordKey.self] else { throw .commandFailed("nothing remembered yet") }
            context.output.print(word)
        })

    static let fail = REPLCommand(
        "fail", usage: "fixture fail", summary: "fail the way a feature command fails",
        run: { _ async throws(REPLError) in throw .commandFailed("the fixture failed on purpose") })

    /// The configuration transcripts run with: what `config.transcript` shows.
    static let transcriptConfiguration = REPLConfiguration(
        manifestPath: "Fixtures/symorva.config.json", environmentFilePath: "Fixtures/dev.env",
        environment: REPLEnvironment(
            processValues: ["SYMORVA_SERVER_NAME": "localhost", "PATH": "/usr/bin"],
            fileValues: [
                "SYMORVA_HOMESERVER_URL": "http://127.0.0.1:8008", "SYMORVA_ADMIN_PASSWORD": "s3cret",
                "SYMORVA_SERVER_NAME": "ignored: the process wins",
            ]))

    /// A session with the built-ins and the fixtures, writing to `capture`, with its own tracer
    /// and log center so that parallel tests never see each other's traces or levels.
    static func session(capture: CapturingREPLOutput, configuration: REPLConfiguration = transcriptConfiguration)
        -> REPLSession
    {
        let context = REPLContext(
            output: capture, configuration: configuration, tracer: Tracer(),
            logCenter: LogCenter(threshold: .warning))
        return REPLSession(context: context, commands: commands + WalletCommands.commands)
    }
}

@Suite("REPL wallet commands")
struct REPLWalletCommandTests {
    @Test("A community without the wallet module says so")
    func walletDisabled() async {
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        session.context[REPLWalletKey.self] = .disabled
        let summary = await session.run(lines: ["wallet balances", "wallet send @bob:localhost 1 ORB"])
        #expect(
            summary.failures.map(\.error)
                == Array(repeating: .commandFailed("the wallet module is disabled in this community"), count: 2))
        #expect(capture.texts == Array(repeating: "error: the wallet module is disabled in this community", count: 2))
    }
}
