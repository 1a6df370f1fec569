import Foundation
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@testable import SymorvaChat
@testable import SymorvaStore

/// When a sliding sync client reads a room's whole member list again (`GET /members`, before a
/// room key is shared): counted on the libcurl transport the client sends through, against
/// Synapse.
@Suite(
    "Member lists with sliding sync against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct MemberListSlidingTests {
    let transport = CurlTransport()

    static let sliding: ChatOptions = {
        var options = ChatOptions.testing
        options.syncMode = .sliding
        return options
    }()

    /// How many timeline gaps the store holds for `roomID` (each `limited` timeline that skipped
    /// events made one).
    static func gaps(_ roomID: RoomID, in store: ChatStore) async throws -> Int {
        try await store.databaseForTesting.queryOne(
            """
            SELECT COUNT(*) FROM timeline_gaps g JOIN timeline_chunks c ON c.chunk_id = g.chunk_id
            JOIN rooms r ON r.room_nid = c.room_nid WHERE r.room_id = ?
            """, [.text(roomID.rawValue)]
        ) { $0.int(0) } ?? 0
    }

    @Test(
        "/members is read once: a restart and a new connection that sends the room again (limited, nothing skipped) do not read it again; a gap with a join does"
    )
    func readAgainOnlyAfterMembershipMayHaveChanged() async throws {
        try await withChatTestRun { run in
            let alice = try await ChatTestAccount.register("memberlists", transport: transport)
            let bob = try await ChatTestAccount.register("memberlistsbob", transport: transport)
            let carol = try await ChatTestAccount.register("memberlistscarol", transport: transport)
            let counting = RequestCountingTransport(transport)
            let membersRequests = { (roomID: RoomID) in
                counting.count("GET", "/_matrix/client/v3/rooms/\(roomID.rawValue)/members")
            }
            let bobClient = try await bob.makeClient(in: run, transport: transport)
            try await bobClient.startAndSync()
            let carolClient = try await carol.makeClient(in: run, transport: transport)
            try await carolClient.startAndSync()

            let first = try await alice.makeClient(in: run, transport: counting, options: Self.sliding)
            try await first.startAndSync()
            let roomID = try await first.createRoom(name: "Members", invitees: [bob.userID, carol.userID])
            try await bobClient.waitForConversation(roomID, .invited)
            _ = try await bobClient.join(roomIDOrAlias: roomID.rawValue)
            try await bobClient.waitForConversation(roomID, .joined)
            try await first.waitForConversation(roomID, .joined)

            let read = try #require(try await first.roomForEncryption(roomID))
            #expect(read.joined.contains(bob.userID))
            #expect(read.invited.contains(carol.userID))
            #expect(membersRequests(roomID) == 1)
            #expect(try await first.store.memberList(roomID).isComplete)
            #expect(try await first.roomForEncryption(roomID) != nil)
            #expect(membersRequests(roomID) == 1)
            await first.stop()

            // A restart on a connection the server forgot: the room comes again on the new
            // connection's first window, limited to its newest event, which is stored.
            let store = try await ChatStore.open(path: alice.databasePath)
            let stored = try #require(try await store.slidingSyncPosition().pos)
            let token = stored.split(separator: "/", maxSplits: 1).last.map(String.init) ?? stored
            try await store.databaseForTesting.execute(
                "UPDATE sliding_sync_state SET pos = ? WHERE id = 1", [.text("9999/" + token)])
            let gapsBefore = try await Self.gaps(roomID, in: store)
            let second = try await alice.makeClient(in: run, transport: counting, options: Self.sliding)
            try await second.startAndSync()
            try await second.syncState.wait(timeout: .seconds(60)) { state in
                if case .live(let progress) = state { return progress.since?.rawValue.hasPrefix("9999/") == false }
                return false
            }
            // The room came again limited, from its stored newest event: it continues the live
            // timeline, no gap (before, every new connection opened one per room).
            #expect(try await Self.gaps(roomID, in: store) == gapsBefore, "a new connection opened a gap")
            #expect(try await second.store.memberList(roomID).isComplete)
            #expect(try await second.roomForEncryption(roomID) != nil)
            #expect(membersRequests(roomID) == 1, "nothing was skipped: the list is still complete")
            await second.stop()

            // While alice is away, carol joins and bob talks: the room's next update is limited
            // to its newest event, so the join is skipped.
            _ = try await carolClient.join(roomIDOrAlias: roomID.rawValue)
            let bobConversation = try await bobClient.conversation(id: roomID)
            for index in 0..<3 { try await bobConversation.send(.text("away \(index)")).waitUntilSent() }
            let third = try await alice.makeClient(in: run, transport: counting, options: Self.sliding)
            try await third.startAndSync()
            _ = try await eventually(timeout: .seconds(60), "the gap is stored") {
                try await !third.store.memberList(roomID).isComplete ? true : nil
            }
            let afterGap = try #require(try await third.roomForEncryption(roomID))
            #expect(membersRequests(roomID) == 2)
            #expect(afterGap.joined.contains(carol.userID))
            #expect(try await third.store.memberList(roomID).isComplete)
        }
    }
}
