import Foundation
import SymorvaKit
import SymorvaREPL
import SymorvaRuntime
import Testing

@Suite(
    "REPL directory and push commands against the servers",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct DirectoryREPLTests {
    static func session(for community: SymorvaCommunity) -> (REPLSession, ObservableREPLOutput) {
        let output = ObservableREPLOutput()
        let context = REPLContext(output: output, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
        context[CommunitySlot.self] = community
        return (REPLSession(context: context, commands: DirectoryCommands.commands + PushCommands.commands), output)
    }

    @Test("directory rooms lists and searches signed out; people, users, pusher and notifications signed in")
    func commands() async throws {
        let alice = try await DirectoryTestMember.register("repl-dir-a")
        let bob = try await DirectoryTestMember.register("repl-dir-b")
        let name = "REPL room \(UUID().uuidString.prefix(8))"
        let roomID = try await alice.community.chat.createRoom(name: name)
        try await alice.makeJoinable(roomID)
        try await alice.community.publicRooms.setPublished(true, roomID: roomID)

        let (visitor, visitorOutput) = Self.session(for: signedOutCommunity().community)
        // Synapse fills its room directory's search index and member counts in the background:
        // ask again until the new room is listed with its member.
        func listed(_ lines: [String]) -> Bool {
            lines.contains { $0.hasPrefix("1. \(name)") && $0.contains(roomID.rawValue) && $0.hasSuffix("[1 joined]") }
        }
        var summary = await visitor.run(lines: ["directory rooms \(name)"])
        let listingDeadline = ContinuousClock.now + .seconds(30)
        while !listed(visitorOutput.lines.value), ContinuousClock.now < listingDeadline {
            try await Task.sleep(for: .milliseconds(200))
            summary = await visitor.run(lines: ["directory rooms \(name)"])
        }
        #expect(summary.failures.isEmpty)
        var lines = visitorOutput.lines.value
        #expect(
            lines.contains { $0.hasPrefix("1. \(name)") && $0.contains(roomID.rawValue) && $0.hasSuffix("[1 joined]") })
        #expect(lines.contains { $0.hasPrefix("total: ") })

        let (session, output) = Self.session(for: alice.community)
        _ = try await bob.community.directory?.members().search()  // Bob is listed once he used it
        let bobLocalpart = String(bob.userID.rawValue.dropFirst().prefix { $0 != ":" })
        summary = await session.run(lines: [
            "directory people \(bobLocalpart)", "directory users \(bobLocalpart)", "pusher set", "pusher list",
            "notifications", "pusher remove", "pusher list",
        ])
        #expect(summary.failures.isEmpty)
        lines = output.lines.value
        #expect(lines.contains { $0.hasPrefix("1. ") && $0.hasSuffix(bob.userID.rawValue) })
        #expect(lines.contains { $0.hasPrefix("pusher set: org.symorva.repl.dev pushkey repl-") })
        #expect(
            lines.contains { $0.hasPrefix("1. org.symorva.repl.dev  repl-") && $0.hasSuffix("(this installation)") })
        #expect(lines.contains { $0.hasPrefix("total: ") && $0.hasSuffix("highlights") })
        #expect(lines.contains("pusher removed") && lines.last == "no pushers")
    }
}
