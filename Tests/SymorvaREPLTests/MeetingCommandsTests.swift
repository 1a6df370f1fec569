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
            "meeting mic loud", "meeting join !r:x --tone", "meeting join !r:x --tone 5",
            "meeting join !r:x --tone 440 --tone 440", "meeting join !r:x --broadcast --broadcast",
        ])
        let usage = "meeting join <room> [--broadcast] [--tone <hz>]"
        #expect(
            capture.texts == [
                "error: usage: meeting hand up|down",
                "error: 'bob' is not a Matrix user ID (@name:server)",
                "error: usage: \(usage)",
                "error: usage: \(usage)",
                "error: usage: meeting mic on|off",
                "error: usage: \(usage)",
                "error: '5' is not a whole number in 20...20000 — usage: \(usage)",
                "error: usage: \(usage)",
                "error: usage: \(usage)",
            ])
    }

    @Test(
        "A missing capture device, and a missing GStreamer element, are named; no engine failure reads as a case name")
    func missingComponents() {
        #expect(
            MeetingCommands.message(for: .media(.engine(.missingComponent(.captureDevice))))
                == "no audio capture device (microphone) here: join with a test tone instead (meeting join <room> --tone 440)"
        )
        #expect(
            MeetingCommands.message(for: .media(.engine(.missingComponent(.element("webrtcbin")))))
                == "the media engine cannot start: missing GStreamer element 'webrtcbin'")
        #expect(
            MeetingCommands.message(for: .media(.engine(.missingComponent(.framework("GStreamer")))))
                == "the media engine cannot start: GStreamer did not start")
        #expect(
            MeetingCommands.message(for: .media(.engine(.pipelineFailed))) == "the media engine failed: pipeline failed"
        )
    }

    @Test("Every meeting failure reads as a sentence without server text")
    func messages() {
        let errors: [MeetingError] = [
            .notRoomMember, .notHost, .meetingUnknown, .roomUnknown, .meetingEnded, .notParticipant, .stageFull,
            .wrongRole, .mediaUnavailable, .homeserverUnavailable, .rateLimited(retryAfter: nil), .transport(.timeout),
            .invalidResponse, .refused(code: "SY_X", status: 400), .notSignedIn, .accountEnded, .moduleDisabled,
            .media(.unauthorized), .media(.engine(.missingComponent(.captureDevice))),
            .media(.engine(.missingComponent(.element("faad")))), .media(.engine(.offerFailed)), .media(.iceFailed),
        ]
        let texts = errors.map(MeetingCommands.message(for:))
        #expect(Set(texts).count == errors.count)
    }
}
