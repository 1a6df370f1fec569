import SymorvaMachines
import SymorvaREPL
import SymorvaRuntime
import Testing

@Suite("REPL meeting commands")
struct MeetingCommandsTests {
    func session() -> (REPLSession, CapturingREPLOutput) {
        let capture = CapturingREPLOutput()
        let context = REPLContext(output: capture, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
        return (REPLSession(context: context, commands: MeetingCommands.commands), capture)
    }

    @Test(
        "Outside a meeting every meeting command says so",
        arguments: [
            "meeting hand up", "meeting hand down", "meeting mic on", "meeting mic off",
            "meeting promote @bob:example.org",
            "meeting demote @bob:example.org", "meeting who", "meeting leave", "meeting end",
        ])
    func notInAMeeting(line: String) async {
        let (session, capture) = session()
        let summary = await session.run(lines: [line])
        #expect(summary.failures.count == 1)
        #expect(capture.texts == ["error: not in a meeting (meeting join <room>)"])
    }

    @Test("Arguments are checked before anything runs")
    func usage() async {
        let (session, capture) = session()
        _ = await session.run(lines: [
            "meeting hand sideways", "meeting promote bob", "meeting join", "meeting join !r:x --loud",
            "meeting mic loud",
        ])
        #expect(
            capture.texts == [
                "error: usage: meeting hand up|down",
                "error: 'bob' is not a Matrix user ID (@name:server)",
                "error: usage: meeting join <room> [--broadcast]",
                "error: usage: meeting join <room> [--broadcast]",
                "error: usage: meeting mic on|off",
            ])
    }

    @Test("Every meeting failure reads as a sentence without server text")
    func messages() {
        let errors: [MeetingError] = [
            .notRoomMember, .notHost, .meetingUnknown, .roomUnknown, .meetingEnded, .notParticipant, .stageFull,
            .wrongRole, .mediaUnavailable, .homeserverUnavailable, .rateLimited(retryAfter: nil), .transport(.timeout),
            .invalidResponse, .refused(code: "SY_X", status: 400), .notSignedIn, .accountEnded, .moduleDisabled,
            .media(.unauthorized), .media(.engine(.missingComponent)), .media(.iceFailed),
        ]
        let texts = errors.map(MeetingCommands.message(for:))
        #expect(Set(texts).count == errors.count)
    }
}
