import Foundation
import SymorvaMachines
import SymorvaREPL
import SymorvaRuntime
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Transcripts of the session commands, replayed against a manifest whose homeserver is a
/// loopback port where nothing listens, with a fresh data folder: no dev server needed.
@Suite("Session command transcripts")
struct SessionTranscriptTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("SessionTranscripts")

    static var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
            .filter { $0.hasSuffix(".transcript") }.sorted()
    }

    @Test("Session transcript replays exactly", .timeLimit(.minutes(1)), arguments: names)
    func replay(name: String) async throws {
        let folder = NSTemporaryDirectory() + "symorva-repl-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/symorva.config.json"
        let port = try Self.unusedLoopbackPort()
        try Data(
            """
            {"version": 1, "community": {"name": "Transcripts"},
             "homeserver": {"url": "http://127.0.0.1:\(port)", "serverName": "localhost"},
             "services": {"url": "http://127.0.0.1:\(port)"}}
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
        let session = REPLSession(context: context, commands: SessionCommands.all)
        let actual = await transcript.actual(running: session, capture: capture)
        await context[CommunitySlot.self]?.shutdown()
        if let diff = LineDiff.unified(
            expected: transcript.expected, actual: actual, expectedName: "SessionTranscripts/\(name)",
            actualName: "REPL output")
        {
            Issue.record("transcript \(name) does not match:\n\(diff)")
        }
    }

    @Test("The session transcripts exist")
    func exist() { #expect(Self.names.count >= 2) }

    /// A loopback TCP port nobody listens on: bound to learn a free number, then closed.
    static func unusedLoopbackPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { throw POSIXError(.EADDRINUSE) }
        return UInt16(bigEndian: address.sin_port)
    }
}
