import Foundation
import SymorvaREPL
import SymorvaRuntime
import Testing

/// Transcripts of the `meeting` commands without servers: their usage errors (the test tone's
/// frequency included), what they say before anyone signs in or joins, and their help.
/// (Joining, on stage with a test tone, runs against the real servers in `MeetingREPLTests`.)
@Suite("Meeting command transcripts")
struct MeetingTranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("MeetingTranscripts")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }.sorted()
    }

    @Test("Meeting transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        let transcript = Transcript(
            text: try String(contentsOf: Self.directory.appendingPathComponent(name), encoding: .utf8))
        let capture = CapturingREPLOutput()
        let context = REPLContext(
            output: capture, configuration: REPLConfiguration(environment: REPLEnvironment(processValues: [:])),
            tracer: Tracer(), logCenter: LogCenter(threshold: .warning))
        let session = REPLSession(context: context, commands: SessionCommands.all + MeetingCommands.commands)
        let actual = await transcript.actual(running: session, capture: capture)
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "MeetingTranscripts/\(name)",
            actualName: "REPL output")
        {
            Issue.record("transcript \(name) does not match:\n\(diff)")
        }
    }

    @Test("The meeting transcripts exist")
    func exist() { #expect(!Self.names.isEmpty) }
}
