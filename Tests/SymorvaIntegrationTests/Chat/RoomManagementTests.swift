import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTransport
import Testing

/// Room settings and knocking against the real Synapse (room version 12, where the creator is
/// privileged and not listed in `users`).
@Suite(
    "Room management: join rules, history visibility, power levels, knocks",
    .requires(DevEnvironment.isAvailable, "the dev servers (Scripts/dev-server start)"))
struct RoomManagementTests {
    /// The room's state event `type` as the server has it.
    func state(_ member: DirectoryTestMember, _ roomID: RoomID, _ type: String) async throws -> JSONValue {
        let requester = FixedTokenMatrixRequester(
            homeserverURL: member.fixture.environment.configuration.homeserver.url, userID: member.userID,
            accessToken: try #require(member.fixture.accessToken), transport: CurlTransport())
        let response = try await requester.send(ChatAPI.state(roomID: roomID, type: type))
        return try JSONValue(parsing: response.body)
    }

    @Test(
        "Knocks asked, listed, let in and turned down; join rules and history visibility set; power levels checked first"
    )
    func knocksAndSettings() async throws {
        let alice = try await DirectoryTestMember.register("rm-a")
        let bob = try await DirectoryTestMember.register("rm-b")
        let carol = try await DirectoryTestMember.register("rm-c")
        let chat = alice.community.chat
        let roomID = try await chat.createRoom(name: "Knock knock")

        await #expect(throws: ChatError.invalidArgument(name: "allowedRooms")) {
            try await chat.setJoinRule(.restricted(allowedRooms: []), roomID: roomID)
        }
        try await chat.setJoinRule(.knock, roomID: roomID)
        #expect(try await state(alice, roomID, "m.room.join_rules") == .object(["join_rule": .string("knock")]))
        try await chat.setHistoryVisibility(.joined, roomID: roomID)
        #expect(
            try await state(alice, roomID, "m.room.history_visibility")
                == .object(["history_visibility": .string("joined")]))

        #expect(try await bob.community.chat.knock(roomID.rawValue, reason: "let me in") == roomID)
        _ = try await carol.community.chat.knock(roomID.rawValue)
        let knocking = try await eventually("both knocks synced") { () async throws -> [UserID]? in
            let knocks = try await chat.knocks(roomID: roomID)
            return knocks.count == 2 ? knocks : nil
        }
        #expect(Set(knocking) == [bob.userID, carol.userID])
        try await chat.acceptKnock(from: bob.userID, roomID: roomID)
        try await chat.denyKnock(from: carol.userID, roomID: roomID, reason: "not now")
        _ = try await bob.community.chat.join(roomIDOrAlias: roomID.rawValue)
        _ = try await eventually("knocks answered") { () async throws -> Bool? in
            try await chat.knocks(roomID: roomID).isEmpty ? true : nil
        }
        await #expect(throws: ChatError.self) {
            _ = try await carol.community.chat.join(roomIDOrAlias: roomID.rawValue)
        }

        // Power levels: Bob may not change them; once moderator he may raise no one above himself.
        await #expect(throws: ChatError.insufficientPowerLevel(required: 100, actual: 0)) {
            try await bob.community.chat.setPowerLevel(50, for: bob.userID, roomID: roomID)
        }
        try await chat.setPowerLevel(50, for: bob.userID, roomID: roomID)
        guard case .object(let levels) = try await state(alice, roomID, "m.room.power_levels"),
            case .object(let users)? = levels["users"]
        else { throw IntegrationFailure("no power levels") }
        #expect(users[bob.userID.rawValue]?.integerValue == 50)
        #expect(users[alice.userID.rawValue] == nil, "room version 12: the creator is not listed")
        await #expect(throws: ChatError.invalidArgument(name: "user")) {
            try await chat.setPowerLevel(0, for: alice.userID, roomID: roomID)
        }
        // Bob (50) may change the join rules (state_default 50) but not the history visibility (100).
        try await bob.community.chat.setJoinRule(.public, roomID: roomID)
        await #expect(throws: ChatError.insufficientPowerLevel(required: 100, actual: 50)) {
            try await bob.community.chat.setHistoryVisibility(.shared, roomID: roomID)
        }
    }
}
