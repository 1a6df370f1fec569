import Foundation
import SymorvaREPL
import SymorvaRuntime
import Testing

/// Transcripts of the `studio` commands without servers: what they say before anyone signs in,
/// their usage errors and their help. (The signed-in conversation, consent sheet included, runs
/// against the real servers in `StudioREPLTests`.)
@Suite("Studio command transcripts")
struct StudioTranscriptTests {
    static let folder = TranscriptFolder("StudioTranscripts")
    static var names: [String] { folder.names }

    @Test("Studio transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        try await Self.folder.replay(name, commands: SessionCommands.all + StudioCommands.commands)
    }

    @Test("The studio transcripts exist")
    func exist() { #expect(!Self.names.isEmpty) }
}
