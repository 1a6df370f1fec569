import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaKit
import SymorvaMatrix
import SymorvaREPL
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@Suite(
    "REPL media and profile commands against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server")
)
struct MediaREPLTests {
    let transport = CurlTransport()

    func get(_ path: String, as account: ChatTestAccount) async throws -> [String: Any] {
        let url = try #require(URL(string: account.homeserverURL.rawValue + path))
        let response = try await transport.send(HTTPRequest(url: url, bearerToken: account.account.accessToken))
        #expect(response.status == 200)
        return try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    }

    @Test("attach prints progress and the event; download saves it; profile and room commands change what others read")
    func mediaCommands() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(
                in: run, transport: transport, options: AttachmentSendTests.options(for: aliceAccount))
            let bob = try await bobAccount.makeClient(in: run, transport: transport)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let output = ObservableREPLOutput()
            let context = REPLContext(output: output, tracer: Tracer(), logCenter: LogCenter(threshold: .error))
            context[REPLChatProviderKey.self] = FixedREPLChatProvider(alice)
            let session = REPLSession(context: context, commands: ChatCommands.all)
            let roomID = try await alice.createRoom(name: "Darkroom", invitees: [bobAccount.userID])
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            try await alice.waitForConversation(roomID)

            let png = TestImage.png(width: 64, height: 48)
            let source = try AttachmentSendTests.temporaryFile(png, name: "print.png")
            let saved = source + ".saved"
            defer {
                unlink(source)
                unlink(saved)
            }
            var summary = await session.run(lines: [
                "open \(roomID.rawValue)", "attach \(source) --caption first print",
            ])
            #expect(summary.failures.isEmpty)
            var lines = try await output.lines.wait { $0.contains { $0.hasPrefix("sent $") } }
            #expect(lines.contains("upload 100%"))
            let eventID = try #require(lines.first { $0.hasPrefix("sent $") }).dropFirst("sent ".count)
            _ = try await output.lines.wait { lines in
                lines.contains { $0.contains("sent an image: first print") && !$0.contains("(sending)") }
            }
            summary = await session.run(lines: [
                "download \(eventID) \(saved)", "profile name Ada of the Darkroom", "profile avatar \(source)",
                "room topic Developing tonight", "room avatar \(source)",
            ])
            #expect(summary.failures.isEmpty)
            lines = try await output.lines.wait { $0.contains { $0.hasPrefix("room avatar set mxc://") } }
            #expect(lines.contains("saved \(png.count) bytes"))
            #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: saved))) == png)
            #expect(lines.contains("display name set") && lines.contains("topic set"))

            let profile = try await get(
                "/_matrix/client/v3/profile/\(percentEncoded(aliceAccount.userID.rawValue))", as: bobAccount)
            #expect(profile["displayname"] as? String == "Ada of the Darkroom")
            let avatar = try #require((profile["avatar_url"] as? String).flatMap(MediaURI.init))
            #expect(try await bob.media.data(for: avatar) == png)
            let room = "/_matrix/client/v3/rooms/\(percentEncoded(roomID.rawValue))/state"
            #expect(try await get(room + "/m.room.topic/", as: bobAccount)["topic"] as? String == "Developing tonight")
            #expect(
                (try await get(room + "/m.room.avatar/", as: bobAccount)["url"] as? String)?.hasPrefix("mxc://") == true
            )

            // Bob has the default level 0; state_default is 50: refused before any request.
            await #expect(throws: ChatError.insufficientPowerLevel(required: 50, actual: 0)) {
                try await bob.setRoomTopic("mine now", in: roomID)
            }
            await #expect(throws: ChatError.insufficientPowerLevel(required: 50, actual: 0)) {
                try await bob.setRoomAvatar(fileAt: source, contentType: "image/png", in: roomID)
            }
        }
    }
}
