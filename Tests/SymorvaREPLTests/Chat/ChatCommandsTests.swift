import SymorvaREPL
import SymorvaRuntime
import Testing

@Suite("REPL chat commands")
struct ChatCommandsTests {
    func session() -> (REPLSession, CapturingREPLOutput) {
        let capture = CapturingREPLOutput()
        let context = REPLContext(output: capture, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
        return (REPLSession(context: context, commands: ChatCommands.all), capture)
    }

    @Test("Every chat command is registered with a usage line")
    func registered() {
        let (session, _) = session()
        for name in [
            "rooms", "create", "join", "leave", "invite", "open", "send", "back", "react", "unreact", "edit", "redact",
            "fav", "mute", "pin", "read", "burst", "outbox",
        ] {
            #expect(session.context.commands.command(named: name) != nil, "missing \(name)")
        }
    }

    @Test(
        "Without a signed-in account every chat command says so",
        arguments: [
            "rooms", "create Club", "join '#club:example.org'", "leave 1", "invite 1 @bob:example.org", "open 1",
            "send hello there", "back 5", "react 1 👍", "unreact 1 👍", "edit 1 better", "redact 1", "fav on", "mute off",
            "pin on", "read", "burst 1 10", "outbox 1 --wait",
        ])
    func notSignedIn(line: String) async {
        let (session, capture) = session()
        let summary = await session.run(lines: [line])
        #expect(summary.failures.count == 1)
        #expect(capture.texts == ["error: not signed in"])
    }

    @Test("Arguments are checked before anything runs")
    func usage() async {
        let (session, capture) = session()
        _ = await session.run(lines: ["fav maybe", "back none", "invite 1 bob", "burst 1 0", "outbox 1 --now"])
        #expect(
            capture.texts == [
                "error: usage: fav on|off",
                "error: 'none' is not a whole number in 1...1000 — usage: back <count>",
                "error: 'bob' is not a user ID",
                "error: '0' is not a whole number in 1...10000 — usage: burst <room> <count> [<text> …]",
                "error: usage: outbox <room> [--wait]",
            ])
    }
}
