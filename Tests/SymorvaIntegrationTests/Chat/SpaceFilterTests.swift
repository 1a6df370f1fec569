import Foundation
import SymorvaKit
import SymorvaMachines
import Testing

/// The conversation list filtered to a space, against the real Synapse: the space's rooms,
/// those of its sub-space, never a room outside it.
@Suite("The conversation list filtered to a space", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct SpaceFilterTests {
    @Test("A space's rooms and its sub-space's rooms are in the filtered list; another room is not")
    func filter() async throws {
        let alice = try await DirectoryTestMember.register("sf-a")
        let chat = alice.community.chat
        let spaceID = try await chat.createSpace(name: "Orbit", topic: nil, isPublic: true)
        let subspaceID = try await chat.createSpace(name: "Moon", topic: nil, isPublic: true)
        try await chat.addToSpace(subspaceID, spaceID: spaceID, suggested: false)
        let first = try await chat.createRoom(name: "First")
        let second = try await chat.createRoom(name: "Second")
        let nested = try await chat.createRoom(name: "Nested")
        let outside = try await chat.createRoom(name: "Outside")
        try await chat.addToSpace(first, spaceID: spaceID, suggested: false)
        try await chat.addToSpace(second, spaceID: spaceID, suggested: false)
        try await chat.addToSpace(nested, spaceID: subspaceID, suggested: false)
        let expected: Set<RoomID> = [spaceID, subspaceID, first, second, nested]
        for room in expected.union([outside]) { try await chat.waitForConversation(room) }

        // The links arrive with a sync: the filter reads the store.
        let deadline = ContinuousClock.now + .seconds(60)
        var filtered = try await chat.conversations(inSpace: spaceID)
        while Set(filtered.items.map(\.id)) != expected, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            filtered = try await chat.conversations(inSpace: spaceID)
        }
        #expect(Set(filtered.items.map(\.id)) == expected)
        #expect(!filtered.items.contains { $0.id == outside })
        // In the list's order.
        let order = chat.conversations.value.items.map(\.id).filter(expected.contains)
        #expect(filtered.items.map(\.id) == order)
        #expect(Set(try await chat.conversations(inSpace: subspaceID).items.map(\.id)) == [subspaceID, nested])
    }
}
