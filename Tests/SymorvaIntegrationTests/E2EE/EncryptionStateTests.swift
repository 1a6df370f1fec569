import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// The product side of encryption against the real Synapse: a conversation's encryption state,
/// turning encryption on in an existing room, the manifest's default, decrypted previews and the
/// session's device list.
@Suite(
    "Encryption state, defaults and devices against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct EncryptionStateTests {
    /// Alice and Bob, both ready, in a room Alice created (plaintext unless `encrypted`) that Bob
    /// joined; Alice's community has `configuration`, Bob's `bobConfiguration`.
    static func pair(
        encrypted: Bool?, name: String = "State", configuration: SymorvaConfiguration? = nil,
        bobConfiguration: SymorvaConfiguration? = nil
    ) async throws -> (alice: CommunityFixture, bob: CommunityFixture, roomID: RoomID) {
        let aliceFixture = CommunityFixture(configuration: configuration)
        let bobFixture = CommunityFixture(configuration: bobConfiguration)
        _ = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        let bob = try await bobFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("bob"), password: testPassword)
        _ = try await aliceFixture.readyCrypto()
        _ = try await bobFixture.readyCrypto()
        let roomID = try await aliceFixture.community.chat.createRoom(
            name: name, invitees: [bob.userID], isEncrypted: encrypted)
        try await bobFixture.community.chat.waitForConversation(roomID, .invited)
        _ = try await bobFixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
        try await aliceFixture.community.chat.waitForConversation(roomID)
        return (aliceFixture, bobFixture, roomID)
    }

    @Test(
        "Encryption turned on in a plaintext room: both sides see it encrypted, later messages leave encrypted and are read"
    )
    func enableInExistingRoom() async throws {
        let (aliceFixture, bobFixture, roomID) = try await Self.pair(encrypted: false)
        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        #expect(aliceRoom.encryption.value == .notEncrypted)
        try await bobRoom.encryption.wait(timeout: .seconds(30)) { $0 == .notEncrypted }
        try await aliceRoom.send(.text("before, in the clear")).waitUntilSent()

        try await aliceRoom.enableEncryption()
        #expect(aliceRoom.encryption.value == .encrypted)
        try await bobRoom.encryption.wait(timeout: .seconds(60)) { $0 == .encrypted }
        try await aliceRoom.send(.text("after, sealed")).waitUntilSent()
        let items = try await bobRoom.waitForTimeline { $0.texts.contains("after, sealed") }
        #expect(items.first { $0.text == "after, sealed" }?.encryption != nil)
        #expect(items.first { $0.text == "before, in the clear" }?.encryption == nil)
        // On the server the second message is ciphertext.
        let sent = try #require(items.first { $0.text == "after, sealed" }?.eventID)
        let raw = try await bobFixture.community.requester!.send(ChatAPI.event(roomID: roomID, eventID: sent)).body
        #expect(String(decoding: raw, as: UTF8.self).contains(#""type":"m.room.encrypted""#))
        #expect(!String(decoding: raw, as: UTF8.self).contains("after, sealed"))
        // Bob's list shows the decrypted message as the preview.
        let list = try await bobFixture.community.chat.conversations.observable.wait(timeout: .seconds(60)) {
            $0[roomID]?.lastMessage?.body == "after, sealed"
        }
        #expect(list[roomID]?.isEncrypted == true)
        #expect(list[roomID]?.lastMessage?.type == "m.room.message")
    }

    @Test("A message sent as soon as createRoom returns reaches every invitee's device: the invites are synced first")
    func sendRightAfterCreate() async throws {
        let aliceFixture = CommunityFixture()
        _ = try await aliceFixture.community.session.register(
            username: DevEnvironment.uniqueUsername("alice"), password: testPassword)
        var invitees: [(CommunityFixture, UserID)] = []
        for name in ["bob", "carol", "dave"] {
            let fixture = CommunityFixture()
            let account = try await fixture.community.session.register(
                username: DevEnvironment.uniqueUsername(name), password: testPassword)
            _ = try await fixture.readyCrypto()
            invitees.append((fixture, account.userID))
        }
        _ = try await aliceFixture.readyCrypto()
        let roomID = try await aliceFixture.community.chat.createRoom(
            name: "Straight away", invitees: invitees.map(\.1), isEncrypted: true)
        try await aliceFixture.community.chat.conversation(id: roomID).send(.text("first words")).waitUntilSent()
        for (fixture, _) in invitees {
            try await fixture.community.chat.waitForConversation(roomID, .invited)
            _ = try await fixture.community.chat.join(roomIDOrAlias: roomID.rawValue)
            let room = try await fixture.community.chat.conversation(id: roomID)
            let stop = room.observe()
            defer { stop() }
            let items = try await room.waitForTimeline { $0.texts.contains("first words") }
            #expect(items.first { $0.text == "first words" }?.encryption != nil)
        }
    }

    @Test("The manifest's encryption.defaultEnabled makes a room created without saying so encrypted")
    func manifestDefault() async throws {
        var configuration = DevEnvironment.current!.configuration
        configuration.encryption = SymorvaConfiguration.Encryption(isEnabledByDefault: true)
        let (aliceFixture, bobFixture, roomID) = try await Self.pair(encrypted: nil, configuration: configuration)
        let aliceRoom = try await aliceFixture.community.chat.conversation(id: roomID)
        #expect(aliceRoom.encryption.value == .encrypted)
        let state = try await aliceFixture.community.requester!.send(
            ChatAPI.state(roomID: roomID, type: "m.room.encryption")
        ).body
        #expect(String(decoding: state, as: UTF8.self).contains("m.megolm.v1.aes-sha2"))
        try await aliceRoom.send(.text("by default")).waitUntilSent()
        let bobRoom = try await bobFixture.community.chat.conversation(id: roomID)
        let stop = bobRoom.observe()
        defer { stop() }
        let items = try await bobRoom.waitForTimeline { $0.texts.contains("by default") }
        #expect(items.first { $0.text == "by default" }?.encryption != nil)
        // Saying so explicitly still wins over the default.
        let plain = try await aliceFixture.community.chat.createRoom(name: "Open", isEncrypted: false)
        #expect(try await aliceFixture.community.chat.conversation(id: plain).encryption.value == .notEncrypted)
    }

    @Test(
        "session.devices lists this device first with its verified key; a second sign-in of the account appears beside it"
    )
    func sessionDevices() async throws {
        let first = CommunityFixture()
        let username = DevEnvironment.uniqueUsername("devices")
        let account = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        var devices = try await first.community.session.devices()
        #expect(devices.count == 1)
        #expect(devices.first?.isCurrent == true)
        #expect(devices.first?.deviceID == firstCrypto.deviceID.rawValue)
        #expect(devices.first?.lastSeen != nil)

        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        #expect(secondCrypto.deviceID != firstCrypto.deviceID)
        // The first device hears of the new one through device_lists.changed, queries it and
        // verifies its self-signature.
        let deadline = ContinuousClock.now + .seconds(60)
        repeat {
            devices = try await first.community.session.devices()
            if devices.count == 2, devices.allSatisfy({ $0.ed25519Key != nil }) { break }
            try await Task.sleep(for: .milliseconds(100))
        } while ContinuousClock.now < deadline
        #expect(devices.map(\.deviceID).contains(secondCrypto.deviceID.rawValue))
        #expect(devices.first?.deviceID == firstCrypto.deviceID.rawValue)
        #expect(devices.filter(\.isCurrent).count == 1)
        let other = try #require(devices.first { !$0.isCurrent })
        #expect(other.ed25519Key == (await secondCrypto.identityKeys)?.ed25519)
        #expect(!other.keysChanged)
        let seenFromSecond = try await second.community.session.devices()
        #expect(seenFromSecond.first?.deviceID == secondCrypto.deviceID.rawValue)
        #expect(Set(seenFromSecond.map(\.deviceID)) == Set(devices.map(\.deviceID)))
        _ = account
    }

    @Test("Signed out, session.devices is a typed notSignedIn")
    func devicesSignedOut() async throws {
        let fixture = CommunityFixture()
        await fixture.community.launch()
        await #expect(throws: SessionError.notSignedIn) { _ = try await fixture.community.session.devices() }
    }
}
