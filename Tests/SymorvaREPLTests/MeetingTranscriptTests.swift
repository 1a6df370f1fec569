import Foundation
import SymorvaREPL
import SymorvaRuntime
import Testing

/// Transcripts of the `meeting` commands without servers: their usage errors (the test tone's
/// frequency included), what they say before anyone signs in or joins, and their help.
/// (Joining, on stage with a test tone, runs against the real servers in `MeetingREPLTests`.)
@Suite("Meeting command transcripts")
struct MeetingTranscriptTests {
    static let folder = TranscriptFolder("MeetingTranscripts")
    static var names: [String] { folder.names }

    @Test("Meeting transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        try await Self.folder.replay(name, commands: SessionCommands.all + MeetingCommands.commands)
    }

    @Test("The meeting transcripts exist")
    func exist() { #expect(!Self.names.isEmpty) }
}
