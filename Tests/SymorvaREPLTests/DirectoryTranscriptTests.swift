import Foundation
import SymorvaMachines
import SymorvaREPL
import SymorvaRuntime
import Testing

/// Transcripts of the directory and push commands, replayed with the session commands against a
/// manifest whose homeserver is a loopback port where nothing listens: what they say signed
/// out, for bad input, and in `help`. (Against the real servers: the integration tests.)
@Suite("Directory and push command transcripts")
struct DirectoryTranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("DirectoryTranscripts")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }.sorted()
    }

    @Test("Directory transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        let folder = NSTemporaryDirectory() + "symorva-repl-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/symorva.config.json"
        let port = try SessionTranscriptTests.unusedLoopbackPort()
        try Data(
            """
            {"version": 1, "community": {"name": "Transcripts"},
             "homeserver": {"url": "http://127.0.0.1:\(port)", "serverName": "localhost"},
             "services": {"url": "http://127.0.0.1:\(port)"}, "modules": {"directory": {"enabled": true}}}
            """.utf8
        ).write(to: URL(fileURLWithPath: manifest))
        let configuration = REPLConfiguration(
            manifestPath: manifest,
            environment: REPLEnvironment(processValues: [CommunitySlot.dataDirectoryKey: folder + "/data"]))
        let transcript = Transcript(
            text: try String(contentsOf: Self.directory.appendingPathComponent(name), encoding: .utf8))
        let capture = CapturingREPLOutput()
        let context = REPLContext(
            output: capture, configuration: configuration, tracer: Tracer(), logCenter: LogCenter(threshold: .warning))
        let session = REPLSession(
            context: context, commands: SessionCommands.all + DirectoryCommands.commands + PushCommands.commands)
        let actual = await transcript.actual(running: session, capture: capture)
        await context[CommunitySlot.self]?.shutdown()
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "DirectoryTranscripts/\(name)",
            actualName: "REPL output")
        {
            Issue.record("transcript \(name) does not match:\n\(diff)")
        }
    }

    @Test("The directory transcripts exist")
    func exist() { #expect(Self.names.count >= 2) }
}
