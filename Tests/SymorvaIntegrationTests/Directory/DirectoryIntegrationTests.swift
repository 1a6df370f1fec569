import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

@Suite(
    "Directory against Synapse and the services", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"),
    .shutsDownCommunities)
struct DirectoryIntegrationTests {
    @Test("A published room is listed and searched signed out, paginated, and disappears when unpublished")
    func publishedRoomSignedOut() async throws {
        let alice = try await DirectoryTestMember.register("dir-alice")
        let name = "Directory \(UUID().uuidString.prefix(8))"
        let roomID = try await alice.community.chat.createRoom(name: name)
        // Synapse lists a published room only when anyone may join (or knock on) it.
        try await alice.makeJoinable(roomID)
        try await alice.community.publicRooms.setPublished(true, roomID: roomID)
        #expect(try await alice.community.publicRooms.isPublished(roomID))

        let visitorFixture = signedOutCommunity()
        let visitor = visitorFixture.community
        #expect(visitor.session.state.value.account == nil)
        let found = try await eventually("the room in a signed-out search") { () async throws -> PublicRoom? in
            try await visitor.publicRooms.page(term: name).items.first { $0.roomID == roomID }
        }
        #expect(found.name == name && found.joinedMemberCount == 1)

        // The plain listing, page by page with `since`, reaches it too; the estimate counts it.
        var since: DirectoryPageToken?
        var listed = false
        var pages = 0
        repeat {
            let page = try await visitor.publicRooms.page(since: since, limit: 50)
            #expect((page.totalEstimate ?? 0) >= 1)
            listed = listed || page.items.contains { $0.roomID == roomID }
            since = page.nextPage
            pages += 1
        } while since != nil && !listed && pages < 400
        #expect(listed)
        let first = try await visitor.publicRooms.page(limit: 1)
        if let next = first.nextPage {
            let second = try await visitor.publicRooms.page(since: next, limit: 1)
            #expect(second.items.first?.roomID != first.items.first?.roomID)
        }

        try await alice.community.publicRooms.setPublished(false, roomID: roomID)
        #expect(try await !alice.community.publicRooms.isPublished(roomID))
        _ = try await eventually("the room gone from the search") { () async throws -> Bool? in
            try await visitor.publicRooms.page(term: name).items.contains { $0.roomID == roomID } ? nil : true
        }
        // Canary: the search term (also the room's name) reaches no log line of either side.
        let search = visitor.publicRooms.search()
        _ = try await search.search(name)
        for log in [visitorFixture.logs.text, alice.fixture.logs.text] {
            #expect(!log.contains(name))
        }
    }

    @Test("A listed room is joined from the directory; publishing needs the room's power level, checked first")
    func joinAndPowerLevels() async throws {
        let alice = try await DirectoryTestMember.register("dir-owner")
        let bob = try await DirectoryTestMember.register("dir-joiner")
        let name = "Joinable \(UUID().uuidString.prefix(8))"
        let roomID = try await alice.community.chat.createRoom(name: name)
        try await alice.makeJoinable(roomID)
        try await alice.community.publicRooms.setPublished(true, roomID: roomID)

        let listed = try await eventually("the room listed") { () async throws -> PublicRoom? in
            try await bob.community.publicRooms.page(term: name).items.first { $0.roomID == roomID }
        }
        #expect(try await bob.community.publicRooms.join(listed) == roomID)
        await #expect(throws: DirectoryError.forbidden(needed: 50, has: 0)) {
            try await bob.community.publicRooms.setPublished(false, roomID: roomID)
        }
        #expect(try await bob.community.publicRooms.isPublished(roomID))
    }

    @Test("An alias resolves signed out; an unknown alias is not found")
    func aliases() async throws {
        let alice = try await DirectoryTestMember.register("dir-alias")
        let roomID = try await alice.community.chat.createRoom(name: "Alias room")
        let alias = "#\(DevEnvironment.uniqueUsername("alias")):\(DevEnvironment.current!.serverName)"
        try await alice.raw(
            .put, "/_matrix/client/v3/directory/room/\(percentEncoded(alias))",
            body: #"{"room_id": "\#(roomID.rawValue)"}"#)
        let visitor = signedOutCommunity().community
        #expect(try await visitor.publicRooms.resolve(alias: alias) == roomID)
        await #expect(throws: DirectoryError.notFound) {
            try await visitor.publicRooms.resolve(alias: "#nobody-\(UUID().uuidString):localhost")
        }
    }

    @Test("The member directory finds members with Matrix profiles; admins assign roles, members may not")
    func memberDirectoryAndRoles() async throws {
        let alice = try await DirectoryTestMember.register("dir-member-a")
        let bob = try await DirectoryTestMember.register("dir-member-b")
        let bobDirectory = try #require(bob.community.directory)
        let aliceDirectory = try #require(alice.community.directory)
        // Listing registers the caller; Bob renames himself and asks for a fresh profile.
        _ = try await bobDirectory.members().search()
        let displayName = "Bob \(UUID().uuidString.prefix(6))"
        try await bob.raw(
            .put, "/_matrix/client/v3/profile/\(percentEncoded(bob.userID.rawValue))/displayname",
            body: #"{"displayname": "\#(displayName)"}"#)
        #expect(try await bobDirectory.refreshOwnProfile().displayName == displayName)

        let localpart = String(bob.userID.rawValue.dropFirst().prefix { $0 != ":" })
        let found = try await aliceDirectory.members().search(localpart)
        #expect(found.items.map(\.userID) == [bob.userID])
        #expect(found.items.first?.displayName == displayName)
        #expect(try await aliceDirectory.members().search(displayName).items.map(\.userID) == [bob.userID])

        await #expect(throws: DirectoryError.forbidden(needed: nil, has: nil)) {
            try await aliceDirectory.assignRole("steward", to: bob.userID)
        }
        let admin = try await DirectoryTestMember.admin()
        let adminDirectory = try #require(admin.community.directory)
        try await adminDirectory.assignRole("steward", to: bob.userID)
        #expect(try await aliceDirectory.member(bob.userID).roles.contains("steward"))
        let stewards = try await aliceDirectory.members(role: "steward").search(localpart)
        #expect(stewards.items.map(\.userID) == [bob.userID])
        try await adminDirectory.removeRole("steward", from: bob.userID)
        #expect(try await aliceDirectory.member(bob.userID).roles.contains("steward") == false)
    }

    @Test("The homeserver's user directory finds another member by name")
    func userDirectory() async throws {
        let alice = try await DirectoryTestMember.register("dir-user-a")
        let bob = try await DirectoryTestMember.register("dir-user-b")
        let localpart = String(bob.userID.rawValue.dropFirst().prefix { $0 != ":" })
        let directory = try #require(alice.community.directory)
        let found = try await eventually("Bob in the user directory") { () async throws -> DirectoryUser? in
            try await directory.users().search(localpart).items.first { $0.userID == bob.userID }
        }
        #expect(found.userID == bob.userID)
    }

    @Test("Disabled in the manifest, community.directory is nil; public rooms still work")
    func disabled() async throws {
        let fixture = CommunityFixture()
        #expect(fixture.community.directory == nil)
        _ = try await fixture.community.publicRooms.page(limit: 1)
    }
}
