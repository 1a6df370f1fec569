import Foundation
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// One vector of `docs/message-split-vectors.json`.
struct SplitVector: CustomTestStringConvertible, Sendable {
    let name: String
    let input: String
    let parts: [String]
    var testDescription: String { name }

    /// Reads the vectors; pieces are strings or `{"text": s, "repeat": n}`.
    static func load() throws -> (limit: Int, vectors: [SplitVector]) {
        let url = try ChartLocator.packageRoot().appendingPathComponent("docs/message-split-vectors.json")
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        func expand(_ pieces: Any?) -> String {
            (pieces as? [Any] ?? []).map { piece -> String in
                if let text = piece as? String { return text }
                let object = piece as? [String: Any] ?? [:]
                return String(repeating: object["text"] as? String ?? "", count: object["repeat"] as? Int ?? 0)
            }.joined()
        }
        let vectors = (json["vectors"] as? [[String: Any]] ?? []).map { vector in
            SplitVector(
                name: vector["name"] as? String ?? "?", input: expand(vector["input"]),
                parts: (vector["parts"] as? [Any] ?? []).map(expand))
        }
        return (json["limit"] as? Int ?? 0, vectors)
    }

    static var all: [SplitVector] { (try? load().vectors) ?? [] }
}

@Suite("MessageSplitter")
struct MessageSplitterTests {
    @Test("The vectors file exists, uses the SDK's limit and is not empty")
    func vectorsFile() throws {
        let (limit, vectors) = try SplitVector.load()
        #expect(limit == MessageSplitter.limit)
        #expect(limit == 4_096)
        #expect(vectors.count >= 20)
    }

    @Test("Shared vectors split exactly as documented", arguments: SplitVector.all)
    func vector(_ vector: SplitVector) {
        let parts = MessageSplitter.split(vector.input)
        #expect(parts.count == vector.parts.count)
        #expect(parts.map(\.utf16.count) == vector.parts.map(\.utf16.count))
        #expect(parts.map { Array($0.unicodeScalars) } == vector.parts.map { Array($0.unicodeScalars) })
    }

    @Test("Parts join back to the text, fit the limit and never cut a cluster", arguments: Array(UInt64(1)...40))
    func properties(seed: UInt64) {
        let alphabet: [String] = [
            "a", "b", " ", "\n", "\r\n", "\t", "\u{00A0}", "e\u{0301}", "😀", "🇫🇷", "👨‍👩‍👧‍👦", "\u{3000}", "あ",
            " \u{0301}", "\r",
        ]
        var random = JitterSource(seed: seed)
        var text = ""
        let length = 50 + Int(random.next() * 400)
        for _ in 0..<length { text += alphabet[Int(random.next() * Double(alphabet.count))] }
        // At least the longest cluster of the alphabet (11 units), so no cluster is cut.
        let limit = 11 + Int(random.next() * 40)
        let parts = MessageSplitter.split(text, limit: limit)
        #expect(parts.joined() == text)
        #expect(parts.allSatisfy { !$0.isEmpty && $0.utf16.count <= limit })
        // Cutting between clusters keeps the cluster count: no cluster was split in two.
        #expect(parts.map(\.count).reduce(0, +) == text.count)
    }

    @Test("The cut prefers a line break, then whitespace, then the window's end")
    func preferences() {
        #expect(MessageSplitter.split("ab cd\nef gh", limit: 10) == ["ab cd\n", "ef gh"])
        #expect(MessageSplitter.split("ab cd ef gh", limit: 10) == ["ab cd ef ", "gh"])
        #expect(MessageSplitter.split("abcdefghijk", limit: 10) == ["abcdefghij", "k"])
    }

    @Test("Text within the limit is returned unchanged; empty text has no parts")
    func shortText() {
        #expect(MessageSplitter.split("short", limit: 10) == ["short"])
        #expect(MessageSplitter.split("") == [])
    }
}

extension MessageSplitterTests {
    @Test("A cluster longer than the limit is cut between scalars, never inside a surrogate pair")
    func oversizedCluster() {
        let family = "👨‍👩‍👧‍👦"
        let parts = MessageSplitter.split(family, limit: 5)
        #expect(parts.joined() == family)
        // Man ZWJ Woman (5 units) fits; the rest is segmented anew: a lone ZWJ, then Girl ZWJ Boy.
        #expect(parts.map { $0.unicodeScalars.count } == [3, 1, 3])
        #expect(parts.allSatisfy { $0.utf16.count <= 5 })
    }
}
