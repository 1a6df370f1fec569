import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// Two members in one room; A's pusher points at the community's reference Push Gateway.
private struct PushScene {
    let alice: DirectoryTestMember
    let bob: DirectoryTestMember
    let roomID: RoomID
    let pushkey = "it-\(UUID().uuidString)"
    let appID = "org.symorva.tests.dev"

    static func make() async throws -> PushScene {
        // v2: the server's counts (Synapse's sliding sync sends dummy zeros; the device counts
        // there, from what it has stored, SlidingSyncProductTests.countsOnDevice).
        let alice = try await DirectoryTestMember.register("push-a", syncMode: .v2)
        let bob = try await DirectoryTestMember.register("push-b", syncMode: .v2)
        let roomID = try await alice.community.chat.createRoom(name: "Push room")
        try await alice.makeJoinable(roomID)
        _ = try await bob.community.publicRooms.join(roomIDOrAlias: roomID.rawValue)
        // The directory's join waits for the server; the conversation comes with Bob's next sync.
        _ = await bob.community.chat.conversations.observable.first { list in
            list[roomID]?.membership == .joined ? true : nil
        }
        return PushScene(alice: alice, bob: bob, roomID: roomID)
    }

    var push: PushClient { alice.community.push }

    /// A signed in on another installation, with a pusher of its own at the reference gateway.
    struct Installation {
        let fixture: CommunityFixture
        let pushkey: String
        var push: PushClient { fixture.community.push }
    }

    func secondInstallation() async throws -> Installation {
        let username = String(alice.userID.rawValue.dropFirst().prefix { $0 != ":" })
        var configuration = DevEnvironment.current!.directoryConfiguration
        configuration.sync = SymorvaConfiguration.Sync(mode: .v2)
        let fixture = CommunityFixture(configuration: configuration)
        _ = try await fixture.community.session.signIn(username: username, password: testPassword)
        let installation = Installation(fixture: fixture, pushkey: "it-\(UUID().uuidString)")
        try await installation.push.registerWithCommunityGateway(pushkey: installation.pushkey, appID: appID)
        try await installation.push.setPusher(
            pushkey: installation.pushkey, appID: appID, appDisplayName: "Symorva tests",
            deviceDisplayName: "CI 2", gatewayURL: installation.push.communityGatewayURL)
        return installation
    }

    func setPusher() async throws {
        try await push.registerWithCommunityGateway(pushkey: pushkey, appID: appID)
        try await push.setPusher(
            pushkey: pushkey, appID: appID, appDisplayName: "Symorva tests", deviceDisplayName: "CI",
            gatewayURL: push.communityGatewayURL)
    }

    /// Bob writes in the room; the event's ID once the server has it.
    func bobWrites(_ text: String) async throws -> EventID {
        let conversation = try await bob.community.chat.conversation(id: roomID)
        let receipt = try await conversation.send(.text(text))
        let sent = await receipt.state.first { state -> EventID? in
            if case .sent(let eventID) = state { return eventID }
            return nil
        }
        return try #require(sent)
    }

    func gatewayNotifications() async throws -> [GatewayNotification] {
        try await push.communityGatewayNotifications(pushkey: pushkey, appID: appID)
    }

    /// Waits until the gateway has recorded the push of `eventID` for `pushkey` (A's by default).
    @discardableResult
    func awaitNotification(
        for eventID: EventID, pushkey: String? = nil, from client: PushClient? = nil
    ) async throws -> GatewayNotification {
        let pushkey = pushkey ?? self.pushkey
        let client = client ?? push
        return try await eventually("the push of \(eventID) at the gateway") {
            () async throws -> GatewayNotification? in
            try await client.communityGatewayNotifications(pushkey: pushkey, appID: appID).first {
                $0.eventID == eventID.rawValue
            }
        }
    }

    /// Checks that the gateway holds no push of `eventID` for A's pushkey. Call it only after a
    /// barrier: a push that Synapse must have sent after any push of `eventID` has arrived.
    func expectNoNotification(for eventID: EventID) async throws {
        #expect(try await gatewayNotifications().allSatisfy { $0.eventID != eventID.rawValue })
    }
}

@Suite(
    "Push against Synapse and the reference gateway", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities, .serialized, .timeLimit(.minutes(3)))
struct PushIntegrationTests {
    @Test(
        "A sets a pusher, B writes: the gateway receives it for A's pushkey; muted sends none; removed sends none (behind barriers)"
    )
    func pushToGateway() async throws {
        let scene = try await PushScene.make()
        try await scene.setPusher()
        let pushers = try await scene.push.pushers()
        #expect(pushers.map(\.pushkey) == [scene.pushkey])
        #expect(pushers.first?.profileTag == (try scene.push.profileTag()))
        #expect(pushers.first?.format == .eventIDOnly)

        let first = try await scene.bobWrites("hello A")
        let notification = try await eventually("the push at the gateway") { () async throws -> GatewayNotification? in
            try await scene.gatewayNotifications().first { $0.eventID == first.rawValue }
        }
        #expect(notification.roomID == scene.roomID.rawValue)
        #expect(notification.sender == nil)  // event_id_only: nothing of the message crosses the gateway

        // The notification-service use case: fetch the event the push names.
        let shown = try await scene.push.event(roomID: scene.roomID, eventID: first)
        #expect(shown.body == "hello A" && !shown.isEncrypted)

        // Counts are observable and follow sync.
        let counts = await scene.push.counts.first(until: { counts in
            (counts.rooms[scene.roomID]?.notifications ?? 0) > 0 ? counts : nil
        })
        #expect((counts?.notifications ?? 0) >= 1)

        // Muted: nothing for the message written while muted. The barrier is the same pusher's
        // push of a later message (written after unmuting): Synapse's pusher sends a member's
        // notifications one at a time in stream order, so once the later one is at the gateway,
        // a push of the muted one would already be there.
        try await scene.alice.community.chat.setFlag(.muted, true, roomID: scene.roomID)
        let muted = try await scene.bobWrites("while muted")
        try await scene.alice.community.chat.setFlag(.muted, false, roomID: scene.roomID)
        let unmuted = try await scene.bobWrites("unmuted again")
        try await scene.awaitNotification(for: unmuted)
        try await scene.expectNoNotification(for: muted)

        // Removed: nothing for A's pushkey. A's second installation keeps a pusher of its own at
        // the same gateway; its pushes of the message written after the removal and of a later
        // one are the barrier: Synapse evaluated both for A and pushed them to every pusher A
        // still has, in one notifier pass per event (A's removed pusher would have been handed
        // the first in the same pass as the kept one).
        let second = try await scene.secondInstallation()
        try await scene.push.removePusher()
        #expect(try await scene.push.pushers().map(\.pushkey) == [second.pushkey])
        let removed = try await scene.bobWrites("after removal")
        let later = try await scene.bobWrites("after removal, later")
        try await scene.awaitNotification(for: removed, pushkey: second.pushkey, from: second.push)
        try await scene.awaitNotification(for: later, pushkey: second.pushkey, from: second.push)
        try await scene.expectNoNotification(for: removed)
        try await scene.expectNoNotification(for: later)

        // Canaries: the pushkeys (device tokens) and the message bodies reach no log line.
        for fixture in [scene.alice.fixture, scene.bob.fixture, second.fixture] {
            let log = fixture.logs.text
            #expect(!log.isEmpty)
            for canary in [
                scene.pushkey, second.pushkey, "hello A", "while muted", "unmuted again", "after removal",
            ] {
                #expect(!log.contains(canary), "\(canary) reached the log")
            }
        }
    }

    @Test("Keyword rules highlight; rules are read, disabled and enabled on the homeserver")
    func keywordsAndRules() async throws {
        let scene = try await PushScene.make()
        let keyword = "quorum\(UInt32.random(in: 1000...9999))"
        try await scene.push.addKeyword(keyword)
        var rules = try await scene.push.rules()
        let rule = try #require(rules.first { $0.kind == .content && $0.ruleID == keyword })
        #expect(rule.pattern == keyword && rule.isEnabled && !rule.isDefault && rule.notifies)
        #expect(rules.contains { $0.ruleID == ".m.rule.master" && $0.isDefault })

        _ = try await scene.bobWrites("the \(keyword) is reached")
        let highlighted = await scene.push.counts.first(until: { counts in
            (counts.rooms[scene.roomID]?.highlights ?? 0) > 0 ? counts : nil
        })
        #expect((highlighted?.highlights ?? 0) >= 1)

        try await scene.push.setRuleEnabled(false, kind: .content, ruleID: keyword)
        rules = try await scene.push.rules()
        #expect(rules.first { $0.ruleID == keyword }?.isEnabled == false)
        try await scene.push.setRuleEnabled(true, kind: .content, ruleID: keyword)
        try await scene.push.removeKeyword(keyword)
        #expect(try await scene.push.rules().contains { $0.ruleID == keyword } == false)
        await #expect(throws: PushError.notFound) { try await scene.push.removeKeyword(keyword) }
    }

    @Test("A pushkey the gateway rejects is removed by Synapse")
    func rejectedPushkeyRemoved() async throws {
        let scene = try await PushScene.make()
        try await scene.setPusher()
        try await scene.push.unregisterFromCommunityGateway(pushkey: scene.pushkey, appID: scene.appID)
        _ = try await scene.bobWrites("to a rejected pushkey")
        _ = try await eventually("Synapse removing the rejected pusher") { () async throws -> Bool? in
            try await scene.push.pushers().isEmpty ? true : nil
        }
    }

    @Test("Signing out removes the account's pusher")
    func signOutRemovesPusher() async throws {
        let scene = try await PushScene.make()
        try await scene.setPusher()
        let username = String(scene.alice.userID.rawValue.dropFirst().prefix { $0 != ":" })
        try await scene.alice.community.session.signOut()
        let again = CommunityFixture(configuration: DevEnvironment.current!.directoryConfiguration)
        _ = try await again.community.session.signIn(username: username, password: testPassword)
        let left = try await eventually("the pusher gone") { () async throws -> [Pusher]? in
            let pushers = try await again.community.push.pushers()
            return pushers.contains { $0.pushkey == scene.pushkey } ? nil : pushers
        }
        #expect(left.isEmpty)
    }

    @Test("The profile tag is the same across restarts and different on another installation")
    func profileTagPerInstallation() async throws {
        let data = TemporaryDataDirectory()
        let first = CommunityFixture(data: data).community
        let tag = try first.push.profileTag()
        await first.shutdown()
        let restarted = CommunityFixture(data: data).community
        #expect(try restarted.push.profileTag() == tag)
        #expect(try CommunityFixture().community.push.profileTag() != tag)
    }
}
