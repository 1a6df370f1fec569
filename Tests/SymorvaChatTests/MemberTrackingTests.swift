import Foundation
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore

/// A room this account joins (or that turns encrypted while joined) hands its whole member list
/// to the crypto module's tracking, without a send (issue 24): which ingests mark a room
/// (schema 18, `member_lists.tracking_pending`), and the hand-over with its one request per
/// room, retries and dropped late results.
struct MemberTrackingTests {
    let fixture = ConversationEncryptionTests()
    var roomID: RoomID { ConversationEncryptionTests.roomID }
    static let me = ConversationEncryptionTests.me
    static let bob = UserID("@bob:example.org")
    var membersRequests: Int { fixture.transport.count("GET", ConversationEncryptionTests.membersPath) }

    /// `rooms.invite` for the room, from Bob, with `m.room.encryption` in its stripped state
    /// when `encrypted`.
    static func invite(_ batch: String, encrypted: Bool = true) -> [UInt8] {
        let encryption =
            encrypted
            ? #"{"type": "m.room.encryption", "state_key": "", "sender": "@bob:example.org", "content": {"algorithm": "m.megolm.v1.aes-sha2"}},"#
            : ""
        return Array(
            #"""
            {"next_batch": "\#(batch)", "rooms": {"invite": {"\#(ConversationEncryptionTests.roomID.rawValue)": {"invite_state": {"events": [
              \#(encryption)
              {"type": "m.room.member", "state_key": "@me:example.org", "sender": "@bob:example.org", "content": {"membership": "invite"}}
            ]}}}}}
            """#.utf8)
    }

    /// `/members` as the server answers it: Bob too, whom lazy loading left out.
    static let membersBody =
        #"{"chunk": [{"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$join-me", "sender": "@me:example.org", "origin_server_ts": 1, "content": {"membership": "join"}}, {"type": "m.room.member", "state_key": "@bob:example.org", "event_id": "$join-bob", "sender": "@bob:example.org", "origin_server_ts": 2, "content": {"membership": "join"}}]}"#

    /// `rooms.join` for the room: the lazy-loaded state (the encryption, our membership) and our join.
    static func join(_ batch: String, encrypted: Bool = true) -> [UInt8] {
        let state = encrypted ? ConversationEncryptionTests.encryptionEvent : ""
        return Array(
            #"""
            {"next_batch": "\#(batch)", "rooms": {"join": {"\#(ConversationEncryptionTests.roomID.rawValue)": {
              "state": {"events": [\#(state)]},
              "timeline": {"events": [\#(ConversationReactionTests.member(me.rawValue, id: "$join-me"))], "limited": false}
            }}}}
            """#.utf8)
    }

    /// A store where the account was invited and then joined the encrypted room.
    func joinedStore() async throws -> ChatStore {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(Self.invite("b1"))
        #expect(try await store.roomsAwaitingMemberTracking().isEmpty, "an invite is not a join")
        _ = try await SyncIngestor(store: store).ingest(Self.join("b2"))
        return store
    }

    func waiting(_ store: ChatStore) async throws -> [RoomID] {
        try await store.roomsAwaitingMemberTracking().map(\.0)
    }

    // MARK: Which ingests mark a room

    @Test("An accepted invite to an encrypted room waits for its members to be tracked")
    func acceptedInviteWaits() async throws {
        let store = try await joinedStore()
        #expect(try await waiting(store) == [roomID])
    }

    @Test("An accepted invite to an unencrypted room does not wait")
    func unencryptedJoinDoesNotWait() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(Self.invite("b1", encrypted: false))
        _ = try await SyncIngestor(store: store).ingest(Self.join("b2", encrypted: false))
        #expect(try await waiting(store).isEmpty)
    }

    @Test("Rooms of the first sync (joined long ago) do not wait: they are not joins of now")
    func firstSyncDoesNotWait() async throws {
        let store = try await fixture.store(fullState: true, encrypted: true)
        #expect(try await waiting(store).isEmpty)
    }

    @Test("A room first seen joined in a later v2 sync (joined by alias, no invite seen) waits")
    func newRoomLaterWaits() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(Array(#"{"next_batch": "b1"}"#.utf8))
        _ = try await SyncIngestor(store: store).ingest(Self.join("b2"))
        #expect(try await waiting(store) == [roomID])
    }

    /// A sliding sync room entry for `roomID`: encrypted, its timeline `events`.
    static func slidingRoom(_ roomID: String, _ events: String) -> String {
        #"""
        "\#(roomID)": {
          "required_state": [{"type": "m.room.encryption", "state_key": "", "event_id": "$enc-\#(roomID)",
            "sender": "@bob:example.org", "origin_server_ts": 1, "content": {"algorithm": "m.megolm.v1.aes-sha2"}}],
          "timeline": [\#(events)]
        }
        """#
    }

    /// This account's membership event in `roomID`, with `prev_content` when `previous` is given.
    static func ownMember(_ roomID: String, _ membership: String, previous: String? = nil) -> String {
        let unsigned = previous.map { #", "unsigned": {"prev_content": {"membership": "\#($0)"}}"# } ?? ""
        return #"""
            {"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$me-\#(roomID)-\#(membership)",
             "sender": "@me:example.org", "origin_server_ts": 5, "content": {"membership": "\#(membership)"}\#(unsigned)}
            """#
    }

    @Test(
        "Under sliding sync a room first seen with this account's join in its timeline waits (also when a profile change follows it); one a window brings, or a profile change alone, does not"
    )
    func slidingJoinWaits() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        let ingestor = SyncIngestor(store: store)
        let message =
            #"{"type": "m.room.message", "event_id": "$m", "sender": "@bob:example.org", "origin_server_ts": 9, "content": {"msgtype": "m.text", "body": "hi"}}"#
        let rooms = [
            Self.slidingRoom("!window:example.org", message),
            Self.slidingRoom("!joined:example.org", Self.ownMember("!joined:example.org", "join") + ", " + message),
            Self.slidingRoom(
                "!rejoined:example.org", Self.ownMember("!rejoined:example.org", "join", previous: "leave")),
            Self.slidingRoom(
                "!profile:example.org", Self.ownMember("!profile:example.org", "join", previous: "join")),
            Self.slidingRoom(
                "!renamed:example.org",
                Self.ownMember("!renamed:example.org", "join", previous: "invite") + ", "
                    + Self.ownMember("!renamed:example.org", "join", previous: "join")
                    .replacingOccurrences(of: "$me-!renamed:example.org-join", with: "$me-renamed-profile")),
        ]
        let document = Array(#"{"pos": "p2", "rooms": {\#(rooms.joined(separator: ", "))}}"#.utf8)
        let decoded = try SlidingSyncResponseDecoder.decode(document, ownUserID: Self.me.rawValue)
        _ = try await ingestor.ingest(sliding: decoded)
        #expect(
            Set(try await waiting(store).map(\.rawValue))
                == ["!joined:example.org", "!rejoined:example.org", "!renamed:example.org"])
    }

    @Test("Encryption turned on in a joined room makes it wait; later syncs of the room do not raise it again")
    func encryptionTurnedOnWaits() async throws {
        let store = try await fixture.store(fullState: true)
        #expect(try await waiting(store).isEmpty)
        _ = try await SyncIngestor(store: store).ingest(
            ConversationEncryptionTests.sync("b2", [ConversationEncryptionTests.encryptionEvent]))
        let first = try await store.roomsAwaitingMemberTracking()
        #expect(first.map(\.0) == [roomID])
        _ = try await SyncIngestor(store: store).ingest(
            ConversationEncryptionTests.sync("b3", [MemberListTests.message(1)]))
        #expect(try await store.roomsAwaitingMemberTracking().map(\.1) == first.map(\.1))
    }

    @Test("A hand-over read before another join does not clear the newer one")
    func staleTicketKeepsTheRoomWaiting() async throws {
        let store = try await joinedStore()
        let ticket = try #require(try await store.roomsAwaitingMemberTracking().first?.1)
        // Left and joined again meanwhile.
        _ = try await SyncIngestor(store: store).ingest(
            Array(
                #"""
                {"next_batch": "b3", "rooms": {"leave": {"\#(roomID.rawValue)": {"timeline": {"events": [
                  {"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$leave-me", "sender": "@me:example.org", "origin_server_ts": 50, "content": {"membership": "leave"}}
                ], "limited": false}}}}}
                """#.utf8))
        #expect(try await waiting(store).isEmpty, "a room left does not wait")
        _ = try await SyncIngestor(store: store).ingest(Self.join("b4"))
        try await store.memberTrackingHandedOver(roomID, ticket: ticket)
        #expect(try await waiting(store) == [roomID])
    }

    // MARK: The hand-over

    /// What the crypto module was handed, observable; `accepts` says whether it tracks them.
    final class Tracker: Sendable {
        let handed = ObservableValue<[[UserID]]>.Publisher([])
        let accepts = Lock(true)

        func track(_ users: [UserID]) -> Bool {
            handed.update { $0.append(users) }
            return accepts.withLock { $0 }
        }
    }

    final class SetClock: WallClock, Sendable {
        let time = Lock(Timestamp(millisecondsSince1970: 1_000_000))
        var now: Timestamp { time.withLock { $0 } }
        func advance(by duration: Duration) { time.withLock { $0 = $0.advanced(by: duration) } }
    }

    func chat(
        on store: ChatStore, tracker: Tracker, clock: any WallClock = SystemWallClock(), scope: AccountScope? = nil
    )
        -> AccountChat
    {
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Self.me, accessToken: Secret("token"),
            transport: fixture.transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting,
            scope: scope ?? AccountScope(label: Self.me.rawValue), clock: ManualClock(), wallClock: clock,
            tracer: Tracer())
        chat.connectDevices(inbox: { _, _ in }, onChanges: { _ in }, trackMembers: { tracker.track($0) })
        return chat
    }

    func finish(_ tasks: [Task<Void, Never>]) async {
        for task in tasks { await task.value }
    }

    @Test(
        "A joined room's whole member list (/members, once) reaches the crypto module without a send, and the room stops waiting"
    )
    func joinedRoomHandedOver() async throws {
        let store = try await joinedStore()
        let tracker = Tracker()
        let chat = chat(on: store, tracker: tracker)
        // Two commits at once: one hand-over, one request.
        async let first = chat.trackMembersOfJoinedRooms()
        async let second = chat.trackMembersOfJoinedRooms()
        let tasks = await first + second
        #expect(tasks.count == 1)
        await finish(tasks)
        #expect(membersRequests == 1)
        #expect(tracker.handed.value == [[Self.bob, Self.me]])
        #expect(try await waiting(store).isEmpty)
        #expect(try await store.memberList(roomID).isComplete)
        // Nothing waits any more: a later commit asks nothing.
        await finish(await chat.trackMembersOfJoinedRooms())
        #expect(membersRequests == 1)
        // The first message's key share finds the list complete: no second request either.
        chat.setEncryptor(fixture.crypto)
        try await chat.conversation(id: roomID).send(.text("first")).sent()
        #expect(membersRequests == 1)
        #expect(fixture.crypto.recipients.withLock { $0.last } == [Self.me, Self.bob].sorted())
    }

    @Test(
        "A room this device joins that the ingest did not flag (sliding sync, joined by alias) is handed over by the join"
    )
    func joinedHereHandedOver() async throws {
        // Stored by the first sync (no flag), as sliding sync stores a room its window reaches.
        let store = try await fixture.store(fullState: true, encrypted: true)
        #expect(try await waiting(store).isEmpty)
        let tracker = Tracker()
        let chat = chat(on: store, tracker: tracker)
        fixture.transport.on("POST", pathPrefix: "/_matrix/client/v3/join/") { _ in
            .json(200, #"{"room_id": "!vault:example.org"}"#)
        }
        _ = try await chat.join(roomIDOrAlias: roomID.rawValue)
        let handed = try await tracker.handed.observable.wait { !$0.isEmpty }
        #expect(handed == [[Self.bob, Self.me]])
        #expect(membersRequests == 1)
    }

    @Test("Without a crypto module nothing is asked")
    func noCryptoNoRequest() async throws {
        let store = try await joinedStore()
        let chat = fixture.chat(on: store)
        #expect(await chat.trackMembersOfJoinedRooms().isEmpty)
        #expect(membersRequests == 0)
        #expect(try await waiting(store) == [roomID])
    }

    @Test(
        "A failed /members keeps the room waiting: not asked again before the retry interval, handed over by the next commit after it"
    )
    func failureRetried() async throws {
        let store = try await joinedStore()
        let tracker = Tracker()
        let clock = SetClock()
        let chat = chat(on: store, tracker: tracker, clock: clock)
        let answer = fixture.transport
        answer.on("GET", ConversationEncryptionTests.membersPath) { _ in
            .json(500, #"{"errcode": "M_UNKNOWN", "error": "down"}"#)
        }
        await finish(await chat.trackMembersOfJoinedRooms())
        #expect(membersRequests == 1)
        #expect(tracker.handed.value.isEmpty)
        #expect(try await waiting(store) == [roomID])
        #expect(try await !store.memberList(roomID).isComplete)
        #expect(chat.memberTracking.withLock { $0.hasFailures })

        // The server recovers; a commit right away does not ask yet.
        answer.on("GET", ConversationEncryptionTests.membersPath) { _ in .json(200, Self.membersBody) }
        clock.advance(by: .seconds(29))
        #expect(await chat.trackMembersOfJoinedRooms().isEmpty)
        #expect(membersRequests == 1)

        clock.advance(by: .seconds(1))
        await finish(await chat.trackMembersOfJoinedRooms())
        #expect(membersRequests == 2)
        #expect(tracker.handed.value == [[Self.bob, Self.me]])
        #expect(try await waiting(store).isEmpty)
        #expect(!chat.memberTracking.withLock { $0.hasFailures })
    }

    @Test("A crypto module that does not store them keeps the room waiting")
    func refusedByCryptoKeepsWaiting() async throws {
        let store = try await joinedStore()
        let tracker = Tracker()
        tracker.accepts.withLock { $0 = false }
        let chat = chat(on: store, tracker: tracker)
        await finish(await chat.trackMembersOfJoinedRooms())
        #expect(tracker.handed.value.count == 1)
        #expect(try await waiting(store) == [roomID])
    }

    @Test("A member list that answers after the account's scope moved on is dropped: nothing handed, the room waits")
    func lateResultDropped() async throws {
        let store = try await joinedStore()
        let tracker = Tracker()
        let scope = AccountScope(label: Self.me.rawValue)
        let chat = chat(on: store, tracker: tracker, scope: scope)
        let gate = TestGate()
        fixture.transport.on("GET", ConversationEncryptionTests.membersPath) { _ in
            await gate.wait()
            return .json(200, Self.membersBody)
        }
        let tasks = await chat.trackMembersOfJoinedRooms()
        try await gate.waitForWaiters(count: 1)
        scope.advance(reason: .cacheCleared)
        gate.open()
        await finish(tasks)
        #expect(tracker.handed.value.isEmpty)
        #expect(try await waiting(store) == [roomID])
    }

    // MARK: The rule

    @Test("The plan starts a room once while it runs, and after a failure only when the retry interval passed")
    func plan() {
        var plan = MemberTrackingPlan()
        let room = RoomID("!a:example.org")
        let other = RoomID("!b:example.org")
        let t0 = Timestamp(millisecondsSince1970: 0)
        #expect(plan.start([room], now: t0) == [room])
        #expect(plan.start([room, other], now: t0) == [other])
        plan.finished(room, failedAt: t0)
        plan.finished(other, failedAt: nil)
        #expect(plan.hasFailures)
        #expect(plan.start([room], now: t0.advanced(by: .seconds(29))).isEmpty)
        #expect(plan.start([room], now: t0.advanced(by: .seconds(30))) == [room])
        plan.finished(room, failedAt: nil)
        #expect(!plan.hasFailures)
        // A failed room that no longer waits (handed over by a send, or left) is forgotten.
        plan.finished(room, failedAt: t0)
        #expect(plan.start([], now: t0).isEmpty)
        #expect(!plan.hasFailures)
    }
}
