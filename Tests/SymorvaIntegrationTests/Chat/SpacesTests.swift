import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

/// Spaces against the real Synapse: a space with a dozen rooms, paged in by another member; a
/// restricted room joined as a member of the space, an invite-only one left out and refused; the
/// community's space named by the manifest; the creator's privilege in room version 12.
@Suite(
    "Spaces: hierarchy paged from Synapse, rooms joined through the space",
    .requires(DevEnvironment.isAvailable, "the dev servers (Scripts/dev-server start)"))
struct SpacesTests {
    @Test("A space's rooms page in without duplicates, one request per page; restricted rooms join through it")
    func hierarchy() async throws {
        let environment = try #require(DevEnvironment.current)
        let server = environment.configuration.homeserver.serverName
        let alice = try await DirectoryTestMember.register("space-a")
        let spaceID = try await alice.community.chat.createSpace(name: "Orbit", topic: "the community", isPublic: true)
        #expect(try await alice.community.chat.joinedSpaces().map(\.id) == [spaceID])

        var rooms: [RoomID] = []
        for index in 0..<12 {
            let roomID = try await alice.community.chat.createRoom(name: "Room \(index)")
            try await alice.community.chat.addToSpace(roomID, spaceID: spaceID, suggested: index == 0)
            rooms.append(roomID)
        }
        // Public rooms (the hierarchy shows a member of the space what they can join), one
        // restricted to the space's members, one invite-only (left out of the hierarchy).
        for roomID in rooms where roomID != rooms[1] && roomID != rooms[2] { try await alice.makeJoinable(roomID) }
        let restricted = rooms[1]
        let inviteOnly = rooms[2]
        let visible = rooms.filter { $0 != inviteOnly }
        try await alice.raw(
            .put, "/_matrix/client/v3/rooms/\(percentEncoded(restricted.rawValue))/state/m.room.join_rules/",
            body:
                #"{"join_rule": "restricted", "allow": [{"type": "m.room_membership", "room_id": "\#(spaceID.rawValue)"}]}"#
        )
        let linked = try await eventually("the space's links synced") { () async throws -> [SpaceChildLink]? in
            let links = try await alice.community.chat.roomsOfSpace(spaceID)
            return links.count == rooms.count ? links : nil
        }
        #expect(Set(linked.map(\.roomID)) == Set(rooms) && linked.allSatisfy { $0.via == [server] })

        let bob = try await DirectoryTestMember.register("space-b")
        _ = try await bob.community.chat.join(spaceID, via: [server])
        let hierarchy = try bob.community.chat.hierarchy(of: spaceID, pageSize: 5)
        // Two calls at once: one request, one page.
        async let first: Void = hierarchy.loadNextPage()
        async let second: Void = hierarchy.loadNextPage()
        _ = try await (first, second)
        let afterOne = hierarchy.state.value
        #expect(afterOne.rooms.count == 5 && !afterOne.isComplete, "\(afterOne.rooms.count) rooms after one page")
        #expect(afterOne.rooms.first?.id == spaceID && afterOne.rooms.first?.isSpace == true)
        #expect(afterOne.rooms.first?.children.count == rooms.count)
        #expect(afterOne.rooms.first?.children.first { $0.roomID == rooms[0] }?.isSuggested == true)
        while !hierarchy.state.value.isComplete { try await hierarchy.loadNextPage() }
        let all = hierarchy.state.value.rooms
        #expect(all.count == visible.count + 1 && Set(all.map(\.id)) == Set(visible + [spaceID]), "no duplicates")
        #expect(all.first { $0.id == restricted }?.joinRule == "restricted")
        let hierarchyRequests = bob.fixture.transport.count("/hierarchy")
        #expect(hierarchyRequests == 3, "12 rooms in pages of 5: \(hierarchyRequests) requests")
        try await hierarchy.loadNextPage()  // complete: nothing asked
        #expect(bob.fixture.transport.count("/hierarchy") == 3)

        #expect(try await bob.community.chat.join(restricted, via: [server]) == restricted)
        await #expect(throws: ChatError.server(status: 403, errorCode: "M_FORBIDDEN")) {
            _ = try await bob.community.chat.join(inviteOnly, via: [server])
        }
        await #expect(throws: ChatError.insufficientPowerLevel(required: 50, actual: 0)) {
            try await bob.community.chat.addToSpace(restricted, spaceID: spaceID)
        }

        // The manifest names the space: the community's rooms are its rooms.
        var configuration = environment.configuration
        configuration.community.space = spaceID.rawValue
        let carol = CommunityFixture(configuration: configuration)
        _ = try await carol.community.session.register(
            username: DevEnvironment.uniqueUsername("space-c"), password: testPassword)
        let community = try await carol.community.chat.communityRooms(pageSize: 20)
        try await community.loadNextPage()
        // Carol is not in the space: the restricted room is left out for her too.
        #expect(community.state.value.isComplete && community.state.value.rooms.count == visible.count)
        #expect(!community.state.value.rooms.contains { $0.id == restricted })
    }

    @Test("Without a space in the manifest, the community's rooms are a typed error")
    func noCommunitySpace() async throws {
        let alice = try await DirectoryTestMember.register("space-n")
        await #expect(throws: ChatError.invalidArgument(name: "community.space")) {
            _ = try await alice.community.chat.communityRooms()
        }
    }
}
