import Foundation
import SymorvaChat
import SymorvaMachines
import SymorvaMatrix
import SymorvaTesting
import SymorvaTransport
import Testing

@Suite(
    "Avatars in the conversation list and the timeline, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct AvatarTests {
    let transport = CurlTransport()

    @Test(
        "The room's avatar is the list row's handle and the sender's is the timeline item's; their thumbnails come from the cache"
    )
    func avatarsShown() async throws {
        try await withChatTestRun { run in
            let aliceAccount = try await ChatTestAccount.register("alice", transport: transport)
            let bobAccount = try await ChatTestAccount.register("bob", transport: transport)
            let alice = try await aliceAccount.makeClient(in: run, transport: transport)
            var bobOptions = ChatOptions.testing
            bobOptions.mediaCacheDirectory =
                URL(fileURLWithPath: bobAccount.databasePath).deletingLastPathComponent().path + "/media-cache"
            let bob = try await bobAccount.makeClient(in: run, transport: transport, options: bobOptions)
            try await alice.startAndSync()
            try await bob.startAndSync()
            let roomID = try await alice.createRoom(name: "Portraits", invitees: [bobAccount.userID])
            try await bob.waitForConversation(roomID, .invited)
            _ = try await bob.join(roomIDOrAlias: roomID.rawValue)
            try await alice.waitForConversation(roomID)

            let face = try AttachmentSendTests.temporaryFile(TestImage.png(width: 200, height: 200), name: "face.png")
            let sign = try AttachmentSendTests.temporaryFile(TestImage.png(width: 300, height: 120), name: "sign.png")
            defer {
                unlink(face)
                unlink(sign)
            }
            let own = try await alice.setAvatar(fileAt: face, contentType: "image/png")
            let room = try await alice.setRoomAvatar(fileAt: sign, contentType: "image/png", in: roomID)
            try await alice.conversation(id: roomID).send(.text("with a face")).waitUntilSent()

            // The list row names the room's avatar.
            let list = try await bob.conversations.wait(timeout: .seconds(60)) { $0[roomID]?.avatar == room }
            #expect(list[roomID]?.avatarURL == room.uriString)

            // The timeline item names its sender's avatar.
            let bobRoom = try await bob.conversation(id: roomID)
            let stop = bobRoom.observe()
            defer { stop() }
            let items = try await bobRoom.waitForTimeline { items in
                items.contains { $0.text == "with a face" && $0.senderProfile.avatar == own }
            }
            let item = try #require(items.first { $0.text == "with a face" })
            #expect(item.sender == aliceAccount.userID)

            // Square thumbnails (sizes Synapse makes: 32 and 96 cropped), made by the server once
            // and then found in the cache.
            let roomThumbnail = try await bob.media.cachedAvatar(room, size: 32)
            let ownThumbnail = try await bob.media.cachedAvatar(own)
            for (path, size) in [(roomThumbnail, 32), (ownThumbnail, 96)] {
                let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
                #expect(TestImage.pngSize(bytes).map { [$0.width, $0.height] } == [size, size])
            }
            #expect(try await bob.media.cachedAvatar(own) == ownThumbnail)
        }
    }
}
