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
