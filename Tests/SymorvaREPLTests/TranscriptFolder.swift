import Foundation
import SymorvaREPL
import SymorvaRuntime
import Testing

/// A folder of `.transcript` files beside the test sources, each replayed against a REPL session
/// without servers: what the meeting and studio transcript suites share.
struct TranscriptFolder {
    let name: String
    let directory: URL

    /// The folder `name` next to the calling test file.
    init(_ name: String, besides file: String = #filePath) {
        self.name = name
        directory = URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent(name)
    }

    /// The transcripts in it, sorted.
    var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }.sorted()
    }

    /// Replays transcript `file` with `commands` and records an issue with the diff when the
    /// output differs.
    func replay(_ file: String, commands: [REPLCommand]) async throws {
        let transcript = Transcript(
            text: try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8))
        let capture = CapturingREPLOutput()
        let context = REPLContext(
            output: capture, configuration: REPLConfiguration(environment: REPLEnvironment(processValues: [:])),
            tracer: Tracer(), logCenter: LogCenter(threshold: .warning))
        let session = REPLSession(context: context, commands: commands)
        let actual = await transcript.actual(running: session, capture: capture)
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "\(name)/\(file)", actualName: "REPL output")
        {
            Issue.record("transcript \(file) does not match:\n\(diff)")
        }
    }
}
