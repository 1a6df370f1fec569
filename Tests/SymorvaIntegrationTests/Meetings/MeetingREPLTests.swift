import Foundation
import SymorvaKit
import SymorvaMachines
import Testing

/// The `meeting` commands typed into the built `symorva` program against the real servers,
/// with live lines when roles and hands change. Part of the serialized meetings suite.
extension MeetingIntegrationTests {
    @Test(
        "meeting join, hand, who, promote refused, live role and hand lines, end",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func replMeeting() async throws {
        let host = try await MeetingMember.register("mt-rhost", in: environment, transport: transport)
        let bob = try await MeetingMember.register("mt-rbob", in: environment, transport: transport)
        let carolName = DevEnvironment.uniqueUsername("mt-rcarol")
        let carol = try await MeetingMember.register(
            "mt-rcarol", in: environment, transport: transport, username: carolName)
        let roomID = try await host.createRoom()
        try await bob.joinRoom(roomID)
        try await carol.joinRoom(roomID)
        let hostRoom = try await host.meetings.join(roomID: roomID)
        _ = try await bob.meetings.join(roomID: roomID)

        let data = TemporaryDataDirectory("meeting-repl")
        let repl = try REPLProcess(environment: [
            "SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!,
        ])
        repl.send("login \(carolName) --password-stdin")
        repl.send(testPassword.exposedValue)
        try await repl.waitForLine { $0.hasPrefix("signed in as \(carol.userID)") }
        repl.send("meeting join \(roomID.rawValue)")
        try await repl.waitForLine {
            $0.hasPrefix("joined mt_") && $0.hasSuffix("as a listener (playback stream started)")
        }
        repl.send("meeting hand up")
        try await repl.waitForLine { $0 == "hand up" }
        try await hostRoom.participants.wait(timeout: .seconds(15)) { people in
            people.contains { $0.userID == carol.userID && $0.handRaised }
        }
        try await hostRoom.demote(bob.userID)
        try await repl.waitForLine { $0 == "meeting: \(bob.userID) is now listener" }
        try await hostRoom.promote(carol.userID)
        try await repl.waitForLine { $0 == "meeting: you are now on stage" }
        try await repl.waitForLine { $0 == "meeting: \(carol.userID) hand down" }
        repl.send("meeting who")
        try await repl.waitForLine { $0.hasPrefix("  \(carol.userID)") && $0.hasSuffix("stage") }
        // A non-host's promote is refused (the last command: an error line ends waitForLine's use).
        repl.send("meeting promote \(bob.userID)")
        try await repl.waitForLine(accepting: { $0.hasSuffix("error: only hosts can do that") }, { _ in false })
        try await hostRoom.end()
        try await repl.transcript.wait(timeout: .seconds(15)) { $0.output.contains("meeting: ended") }
        repl.send("quit")
        #expect(try await repl.finish() == 1)  // one command (the refused promote) failed
    }
}
