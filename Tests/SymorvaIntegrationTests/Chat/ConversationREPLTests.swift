import Foundation
import SymorvaKit
import SymorvaREPL
import SymorvaRuntime
import SymorvaTransport
import Testing

/// The REPL's conversation commands of issue 27 against Synapse: a mention sent with `send
/// @user`, shown to its target as `[mentions you]`; `typing`; `read`; `ignore`.
@Suite(
    "REPL mentions, typing, read and ignore against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct ConversationREPLTests {
    let transport = CurlTransport()

    @Test("A transcript: send @bob, typing on/off, read, ignore and its listing; Bob sees the mention and the typing")
    func transcript() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("rp-a", transport: transport)
            let bobAccount = try await ChatTestAccount.register("rp-b", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let aliceOutput = ObservableREPLOutput()
            let aliceContext = REPLContext(
                output: aliceOutput, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            aliceContext[REPLChatProviderKey.self] = FixedREPLChatProvider(alice)
            let aliceREPL = REPLSession(context: aliceContext, commands: ChatCommands.all)
            let bobID = bobAccount.userID.rawValue

            var summary = await aliceREPL.run(lines: ["create Mentions \(bobID)", "rooms", "open 1"])
            #expect(summary.failures.isEmpty)
            let roomID = try #require(alice.conversations.value.items.first?.id)
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            let bobOutput = ObservableREPLOutput()
            let bobContext = REPLContext(output: bobOutput, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            bobContext[REPLChatProviderKey.self] = FixedREPLChatProvider(bob)
            let bobREPL = REPLSession(context: bobContext, commands: ChatCommands.all)
            summary = await bobREPL.run(lines: ["open \(roomID.rawValue)"])
            #expect(summary.failures.isEmpty)

            summary = await aliceREPL.run(lines: ["send look here \(bobID)", "typing on"])
            #expect(summary.failures.isEmpty)
            let bobLines = try await bobOutput.lines.wait {
                $0.contains { $0.contains("look here") && $0.hasSuffix("[mentions you]") }
            }
            #expect(bobLines.contains { $0.contains("look here") })
            let bobRoom = try await bob.conversation(id: roomID)
            try await bobRoom.typing.wait(timeout: .seconds(60)) { $0 == [alice.userID] }
            summary = await bobREPL.run(lines: ["typing", "read"])
            #expect(summary.failures.isEmpty)
            summary = await aliceREPL.run(lines: ["typing off", "ignore \(bobID)", "ignore", "ignore --undo \(bobID)"])
            #expect(summary.failures.isEmpty)
            let aliceLines = try await aliceOutput.lines.wait { $0.contains("no longer ignoring \(bobID)") }
            for line in ["typing", "stopped typing", "ignoring \(bobID)", "ignored: \(bobID)"] {
                #expect(aliceLines.contains(line), "no line '\(line)'")
            }
            let bobTranscript = bobOutput.lines.value
            #expect(bobTranscript.contains("typing: \(alice.userID.rawValue)"))
            #expect(bobTranscript.contains("marked read (receipt and fully-read marker)"))
            #expect(!aliceLines.contains { $0.contains("look here") && $0.hasSuffix("[mentions you]") })
        }
    }
}
