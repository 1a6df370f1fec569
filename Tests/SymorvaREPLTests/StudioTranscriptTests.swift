import Foundation
import SymorvaREPL
import SymorvaRuntime
import Testing

/// Transcripts of the `studio` commands without servers: what they say before anyone signs in,
/// their usage errors and their help. (The signed-in conversation, consent sheet included, runs
/// against the real servers in `StudioREPLTests`.)
@Suite("Studio command transcripts")
struct StudioTranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("StudioTranscripts")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }.sorted()
    }

    @Test("Studio transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        let transcript = Transcript(
            text: try String(contentsOf: Self.directory.appendingPathComponent(name), encoding: .utf8))
        let capture = CapturingREPLOutput()
        let context = REPLContext(
            output: capture, configuration: REPLConfiguration(environment: REPLEnvironment(processValues: [:])),
            tracer: Tracer(), logCenter: LogCenter(threshold: .warning))
        let session = REPLSession(context: context, commands: SessionCommands.all + StudioCommands.commands)
        let actual = await transcript.actual(running: session, capture: capture)
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "StudioTranscripts/\(name)",
            actualName: "REPL output")
        {
            Issue.record("transcript \(name) does not match:\n\(diff)")
        }
    }

    @Test("The studio transcripts exist")
    func exist() { #expect(!Self.names.isEmpty) }
}
