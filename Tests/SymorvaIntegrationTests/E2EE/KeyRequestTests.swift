import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Room key requests between the devices of one account, on the real Synapse.
@Suite(
    "Room key requests to the account's own devices, against Synapse",
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"), .shutsDownCommunities)
struct KeyRequestTests {
    @Test(
        "A device signed in after the keys were shared asks its sibling, which forwards them; the messages decrypt in place and the requests are cancelled"
    )
    func siblingForwardsKeys() async throws {
        let username = DevEnvironment.uniqueUsername("carol")
        let first = CommunityFixture()
        let carol = try await first.community.session.register(username: username, password: testPassword)
        let firstCrypto = try await first.readyCrypto()
        let bob = try await MembershipEncryptionTests.Member.register("bob")
        let roomID = try await bob.chat.createRoom(name: "Ask my sibling", invitees: [carol.userID], isEncrypted: true)
        try await first.community.chat.waitForConversation(roomID, .invited)
        _ = try await first.community.chat.join(roomIDOrAlias: roomID.rawValue)
        let bobRoom = try await bob.chat.conversation(id: roomID)
        let stopBob = bobRoom.observe()
        defer { stopBob() }
        try await MembershipEncryptionTests.waitForMembership(.join, of: carol.userID, in: bobRoom)
        try await bob.crypto.waitForDevice(firstCrypto.deviceID.rawValue, of: carol.userID)

        // Before the second device exists: one message from Bob, one from Carol's first device.
        let fromBob = try await bobRoom.send(.text("bob before the second device")).sentEventID()
        let firstRoom = try await first.community.chat.conversation(id: roomID)
        let stopFirst = firstRoom.observe()
        defer { stopFirst() }
        try await firstRoom.waitForTimeline { $0.texts.contains("bob before the second device") }
        let fromFirst = try await firstRoom.send(.text("carol before the second device")).sentEventID()
        let bobSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: fromBob, in: roomID))
        let carolSession = try MembershipEncryptionTests.sessionID(
            of: try await bob.encryptedContent(of: fromFirst, in: roomID))

        // The second device: nobody shared these sessions with it. It asks its sibling.
        let second = CommunityFixture()
        _ = try await second.community.session.signIn(username: username, password: testPassword)
        let secondCrypto = try await second.readyCrypto()
        // The sibling answers only a device the account cross-signed (the default strict
        // policy): it signs the new one, as a verification between them ends.
        try await firstCrypto.crossSignOwnDevice(secondCrypto.deviceID.rawValue)
        try await secondCrypto.waitForCrossSigned(firstCrypto.deviceID.rawValue, of: carol.userID)
        try await second.community.chat.waitForConversation(roomID)
        let secondRoom = try await second.community.chat.conversation(id: roomID)
        let stopSecond = secondRoom.observe()
        defer { stopSecond() }
        // A request sent before the signature was dropped by the sibling: ask again, as a
        // "request the keys again" button does.
        _ = try await secondRoom.waitForTimeline { $0.contains { $0.eventID == fromBob } }
        try await secondRoom.requestMissingKeys()
        let items = try await secondRoom.waitForTimeline { items in
            items.texts.contains("bob before the second device")
                && items.texts.contains("carol before the second device")
        }
        let bobItem = try #require(items.first { $0.eventID == fromBob })
        #expect(bobItem.text == "bob before the second device")
        // The forwarded session is Bob's: the row names Bob's device, not the sibling that forwarded it.
        #expect(bobItem.encryption?.senderDeviceID == bob.crypto.deviceID.rawValue)
        #expect(bobItem.encryption?.senderKey == (await bob.crypto.identityKeys)?.curve25519)
        let carolItem = try #require(items.first { $0.eventID == fromFirst })
        #expect(carolItem.text == "carol before the second device")
        #expect(carolItem.encryption?.senderDeviceID == firstCrypto.deviceID.rawValue)

        let bobKey = try #require(try await secondCrypto.roomKey(roomID: roomID, sessionID: bobSession))
        #expect(bobKey.forwarded, "the key came from the sibling")
        #expect(bobKey.senderKey == (await bob.crypto.identityKeys)?.curve25519)
        #expect(try await secondCrypto.roomKey(roomID: roomID, sessionID: carolSession)?.forwarded == true)

        // Once the keys arrived, the requests are cancelled at the other devices and done.
        let deadline = ContinuousClock.now + .seconds(60)
        while try await secondCrypto.openKeyRequestCount() > 0 {
            guard ContinuousClock.now < deadline else { throw IntegrationFailure("the requests were never cancelled") }
            try await Task.sleep(for: .milliseconds(100))
        }
        // The sibling answered both requests.
        let answered = first.logs.text.split(separator: "\n").compactMap { line -> Int? in
            guard let range = line.range(of: "room key requests answered=") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
        #expect(answered.reduce(0, +) == 2)
        for fixture in [first, second] {
            for canary in ["bob before the second device", "carol before the second device"] {
                #expect(!fixture.logs.text.contains(canary))
            }
        }
    }
}
