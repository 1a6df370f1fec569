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

/// A recorded REPL conversation: input lines (`> …`) each followed by the output they produce.
///
/// The format is described in `Transcripts/README.md`. A transcript is checked by feeding its
/// input lines to a session whose input echoes each line back into the captured output as
/// `> line`: the capture then reads exactly like the file when the REPL behaves.
struct Transcript {
    /// The whole expected text, a line per entry, trailing blank lines removed.
    var expected: [String]
    /// Just the input lines, without their `> ` prefix.
    var inputs: [String]

    /// Parses a transcript file's text.
    init(text: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            Transcript.normalize(line.hasSuffix("\r") ? String(line.dropLast()) : String(line))
        }
        while lines.last == "" { lines.removeLast() }
        expected = lines
        inputs = lines.compactMap(Transcript.input(of:))
    }

    /// The input text of a line, if it is an input line: `> text`, or a lone `>` for an empty line.
    static func input(of line: String) -> String? {
        if line == ">" { return "" }
        guard line.hasPrefix("> ") else { return nil }
        return String(line.dropFirst(2))
    }

    /// Lines compare without trailing spaces, which editors strip.
    static func normalize(_ line: String) -> String {
        var line = Substring(line)
        while line.last == " " || line.last == "\t" { line = line.dropLast() }
        return String(line)
    }

    /// Runs the inputs through `session` and returns the transcript the REPL actually produced.
    func actual(running session: REPLSession, capture: CapturingREPLOutput) async -> [String] {
        let input = EchoingInput(lines: inputs, echo: capture)
        _ = await session.run(input, options: .interactive)
        var lines = capture.texts.map(Transcript.normalize)
        while lines.last == "" { lines.removeLast() }
        return lines
    }
}

/// Feeds lines to a session and writes each one it hands out to the capture as `> line`, so
/// that input and output interleave in the capture as they do in a transcript file.
private final class EchoingInput: REPLInput {
    private let lines: REPLLinesInput
    private let echo: CapturingREPLOutput

    init(lines: [String], echo: CapturingREPLOutput) {
        self.lines = REPLLinesInput(lines)
        self.echo = echo
    }

    func nextLine() async -> REPLLine? {
        guard let line = await lines.nextLine() else { return nil }
        echo.print(line.text.isEmpty ? ">" : "> \(line.text)")
        return line
    }

    func readSecret(prompt: String) async -> String? {
        guard let line = await lines.nextLine() else { return nil }
        echo.print(line.text.isEmpty ? ">" : "> \(line.text)")
        return line.text
    }
}

/// A line diff in the style of `diff -u`, computed from a longest common subsequence.
enum LineDiff {
    /// One line of an edit script.
    enum Edit: Equatable {
        case same(String)
        case removed(String)
        case added(String)
    }

    /// The edit script that turns `old` into `new`, keeping as many lines as possible.
    static func edits(from old: [String], to new: [String]) -> [Edit] {
        // lengths[i][j] = length of the LCS of old[i...] and new[j...].
        var lengths = [[Int]](repeating: [Int](repeating: 0, count: new.count + 1), count: old.count + 1)
        for i in stride(from: old.count - 1, through: 0, by: -1) {
            for j in stride(from: new.count - 1, through: 0, by: -1) {
                lengths[i][j] = old[i] == new[j] ? lengths[i + 1][j + 1] + 1 : max(lengths[i + 1][j], lengths[i][j + 1])
            }
        }
        var edits: [Edit] = []
        var i = 0
        var j = 0
        while i < old.count || j < new.count {
            if i < old.count, j < new.count, old[i] == new[j] {
                edits.append(.same(old[i]))
                i += 1
                j += 1
            } else if i < old.count, j == new.count || lengths[i + 1][j] >= lengths[i][j + 1] {
                // Removals first, like diff -u.
                edits.append(.removed(old[i]))
                i += 1
            } else {
                edits.append(.added(new[j]))
                j += 1
            }
        }
        return edits
    }

    /// A unified diff of `expected` against `actual` with `context` lines around each change,
    /// or `nil` when they are equal.
    static func unified(
        expected: [String], actual: [String], expectedName: String = "expected", actualName: String = "actual",
        context: Int = 3
    ) -> String? {
        let edits = edits(from: expected, to: actual)
        let changed = edits.indices.filter { if case .same = edits[$0] { false } else { true } }
        guard !changed.isEmpty else { return nil }

        // Group changes whose context windows touch into hunks.
        var hunks: [ClosedRange<Int>] = []
        for index in changed {
            let window = max(0, index - context)...min(edits.count - 1, index + context)
            if let last = hunks.last, window.lowerBound <= last.upperBound + 1 {
                hunks[hunks.count - 1] = last.lowerBound...window.upperBound
            } else {
                hunks.append(window)
            }
        }

        var output = ["--- \(expectedName)", "+++ \(actualName)"]
        for hunk in hunks {
            // Line numbers (1-based) where the hunk starts in each file.
            let before = edits[..<hunk.lowerBound]
            let oldStart = before.filter { if case .added = $0 { false } else { true } }.count + 1
            let newStart = before.filter { if case .removed = $0 { false } else { true } }.count + 1
            let body = edits[hunk]
            let oldCount = body.filter { if case .added = $0 { false } else { true } }.count
            let newCount = body.filter { if case .removed = $0 { false } else { true } }.count
            output.append("@@ -\(oldStart),\(oldCount) +\(newStart),\(newCount) @@")
            for edit in body {
                switch edit {
                case .same(let line): output.append(" \(line)")
                case .removed(let line): output.append("-\(line)")
                case .added(let line): output.append("+\(line)")
                }
            }
        }
        return output.joined(separator: "\n")
    }
}
