import Foundation
import SymorvaREPL
import Testing

/// Where the transcript files live: `Transcripts/` beside this source file.
enum TranscriptFiles {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Transcripts")

    /// Every `*.transcript` file name, sorted.
    static var names: [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return entries.filter { $0.hasSuffix(".transcript") }.sorted()
    }

    static func text(of name: String) throws -> String {
        try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    }
}

@Suite("REPL transcripts")
struct TranscriptTests {
    @Test("The transcripts folder holds transcripts")
    func transcriptsExist() {
        #expect(TranscriptFiles.names.count >= 5, "found \(TranscriptFiles.names) in \(TranscriptFiles.directory.path)")
    }

    @Test("Transcript replays exactly", .timeLimit(.minutes(1)), arguments: TranscriptFiles.names)
    func replay(name: String) async throws {
        let transcript = Transcript(text: try TranscriptFiles.text(of: name))
        let capture = CapturingREPLOutput()
        let session = REPLFixtures.session(capture: capture)
        let actual = await transcript.actual(running: session, capture: capture)
        session.context.stopTracing()
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "Transcripts/\(name)",
            actualName: "REPL output")
        {
            Issue.record("transcript \(name) does not match:\n\(diff)")
        }
    }
}

@Suite("Line diff")
struct LineDiffTests {
    @Test("Equal texts have no diff")
    func equal() {
        #expect(LineDiff.unified(expected: ["a", "b"], actual: ["a", "b"]) == nil)
    }

    @Test("A changed line shows as removed then added, with context")
    func changedLine() {
        let diff = LineDiff.unified(expected: ["a", "b", "c"], actual: ["a", "x", "c"])
        #expect(diff == "--- expected\n+++ actual\n@@ -1,3 +1,3 @@\n a\n-b\n+x\n c")
    }

    @Test("Distant changes make separate hunks")
    func separateHunks() {
        let expected = (1...20).map(String.init)
        var actual = expected
        actual[1] = "two"
        actual[18] = "nineteen"
        let diff = LineDiff.unified(expected: expected, actual: actual, context: 1) ?? ""
        #expect(diff.contains("@@ -1,3 +1,3 @@"))
        #expect(diff.contains("@@ -18,3 +18,3 @@"))
    }

    @Test("Added and missing lines at the ends")
    func ends() {
        #expect(LineDiff.edits(from: [], to: ["a"]) == [.added("a")])
        #expect(LineDiff.edits(from: ["a", "b"], to: ["b"]) == [.removed("a"), .same("b")])
    }
}
