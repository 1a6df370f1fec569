import Foundation
import SymorvaKit
import SymorvaREPL
import SymorvaRuntime
import SymorvaTransport
import Testing

/// REPL output whose lines can be awaited.
final class ObservableREPLOutput: REPLOutput {
    private let publisher = ObservableValue<[String]>.Publisher([])
    private let lock = Lock(())
    var lines: ObservableValue<[String]> { publisher.observable }
    func write(_ line: String, to stream: REPLStream) {
        lock.withLock { _ in publisher.update { $0.append(line) } }
    }
}

@Suite("REPL chat commands against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ChatREPLTests {
    let transport = CurlTransport()

    @Test(
        "open prints the conversation live: the room's making as sentences, our own message, then the other member's reply as it arrives"
    )
    func openPrintsLive() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let output = ObservableREPLOutput()
            let context = REPLContext(output: output, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            context[REPLChatProviderKey.self] = FixedREPLChatProvider(alice)
            let session = REPLSession(context: context, commands: ChatCommands.all)

            var summary = await session.run(lines: [
                "create Allotment \(bobAccount.userID.rawValue)", "rooms", "open 1",
            ])
            #expect(summary.failures.isEmpty)
            let roomID = try #require(alice.conversations.value.items.first?.id)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)

            summary = await session.run(lines: ["send hello from the repl"])
            #expect(summary.failures.isEmpty)
            try await output.lines.wait { lines in
                lines.contains { $0.contains("hello from the repl") && !$0.contains("(sending)") }
            }
            let reply = try await bob.conversation(id: roomID).send(.text("hi back"))
            try await reply.waitUntilSent()
            let lines = try await output.lines.wait { $0.contains { $0.hasSuffix(": hi back") } }
            #expect(lines.contains("created \(roomID)"))
            #expect(lines.contains { $0.hasPrefix("1. Allotment") })
            // State events read as a person says them, never as their types.
            let bobID = bobAccount.userID.rawValue
            for sentence in [
                " created the room", #" set the room name to "Allotment""#, " invited \(bobID)",
                " changed the power levels", " made the room invite only",
            ] {
                #expect(
                    lines.contains { $0.hasPrefix("[") && $0.hasSuffix(sentence) }, "no row ends with '\(sentence)'")
            }
            try await output.lines.wait {
                $0.contains { $0.hasPrefix("[") && $0.contains("— ") && $0.hasSuffix(" joined") }
            }
            #expect(!lines.contains { $0.contains(" changed m.room.") })
        }
    }
}
