import SymorvaMachines
import Testing

@Suite("RoomDisplayName")
struct RoomDisplayNameTests {
    let me: UserID = "@me:example.org"
    let alice = RoomMember(userID: "@alice:example.org", displayName: "Alice", membership: .join)
    let bob = RoomMember(userID: "@bob:example.org", displayName: "Bob", membership: .join)
    let carol = RoomMember(userID: "@carol:example.org", displayName: nil, membership: .invite)

    func name(_ source: RoomNameSource) -> RoomDisplayName { RoomDisplayName(source) }

    @Test("m.room.name wins")
    func explicitName() {
        let source = RoomNameSource(
            name: "Governance", canonicalAlias: "#gov:example.org", heroes: [alice.userID], ownUserID: me)
        #expect(name(source) == .named("Governance"))
        #expect(name(source).englishText == "Governance")
    }

    @Test("An empty m.room.name falls through to the canonical alias")
    func aliasWhenNameEmpty() {
        let source = RoomNameSource(name: "", canonicalAlias: "#gov:example.org", ownUserID: me)
        #expect(name(source) == .alias("#gov:example.org"))
    }

    @Test("An invalid alias is not used")
    func invalidAlias() {
        let source = RoomNameSource(
            canonicalAlias: "gov", heroes: [alice.userID], joinedMemberCount: 2, invitedMemberCount: 0,
            members: [alice], ownUserID: me)
        #expect(name(source) == .members(["Alice"], others: 0))
    }

    @Test("Heroes covering every other member are listed")
    func heroesCoverEveryone() {
        let source = RoomNameSource(
            heroes: [alice.userID, bob.userID, carol.userID], joinedMemberCount: 3, invitedMemberCount: 1,
            members: [alice, bob, carol], ownUserID: me)
        #expect(name(source) == .members(["Alice", "Bob", "@carol:example.org"], others: 0))
        #expect(name(source).englishText == "Alice, Bob, and @carol:example.org")
    }

    @Test("Two heroes read 'Alice and Bob'")
    func twoHeroes() {
        let source = RoomNameSource(
            heroes: [alice.userID, bob.userID], joinedMemberCount: 3, invitedMemberCount: 0, members: [alice, bob],
            ownUserID: me)
        #expect(name(source).englishText == "Alice and Bob")
    }

    @Test("Fewer heroes than members adds 'and N others'")
    func andOthers() {
        let source = RoomNameSource(
            heroes: [alice.userID, bob.userID], joinedMemberCount: 1_200, invitedMemberCount: 37,
            members: [alice, bob], ownUserID: me)
        #expect(name(source) == .members(["Alice", "Bob"], others: 1_234))
        #expect(name(source).englishText == "Alice, Bob, and 1234 others")
    }

    @Test("One other reads '1 other'")
    func oneOther() {
        let source = RoomNameSource(
            heroes: [alice.userID], joinedMemberCount: 3, invitedMemberCount: 0, members: [alice], ownUserID: me)
        #expect(name(source).englishText == "Alice and 1 other")
    }

    @Test("At most five heroes are named; the rest are counted")
    func heroCap() {
        let users = (1...7).map { RoomMember(userID: UserID("@u\($0):x")!, displayName: "U\($0)", membership: .join) }
        let source = RoomNameSource(
            heroes: users.map(\.userID), joinedMemberCount: 8, invitedMemberCount: 0, members: users, ownUserID: me)
        #expect(name(source) == .members(["U1", "U2", "U3", "U4", "U5"], others: 2))
    }

    @Test("Alone with former members: 'Empty Room (was Alice)'")
    func emptyWas() {
        let left = RoomMember(userID: alice.userID, displayName: "Alice", membership: .leave)
        let source = RoomNameSource(
            heroes: [alice.userID], joinedMemberCount: 1, invitedMemberCount: 0, members: [left], ownUserID: me)
        #expect(name(source) == .emptyWas(["Alice"], others: 0))
        #expect(name(source).englishText == "Empty Room (was Alice)")
    }

    @Test("Alone and nobody known: 'Empty Room'")
    func empty() {
        let source = RoomNameSource(joinedMemberCount: 1, invitedMemberCount: 0, ownUserID: me)
        #expect(name(source) == .empty)
        #expect(name(source).englishText == "Empty Room")
    }

    @Test("The user is never a hero")
    func ownUserExcluded() {
        let source = RoomNameSource(
            heroes: [me, alice.userID], joinedMemberCount: 2, invitedMemberCount: 0, members: [alice], ownUserID: me)
        #expect(name(source) == .members(["Alice"], others: 0))
    }

    @Test("Without m.heroes, joined and invited members are used, ordered by user ID")
    func computedHeroes() {
        let mine = RoomMember(userID: me, displayName: "Me", membership: .join)
        let source = RoomNameSource(members: [mine, carol, bob, alice], ownUserID: me)
        #expect(name(source) == .members(["Alice", "Bob", "@carol:example.org"], others: 0))
    }

    @Test("Without m.heroes and with only former members, the room was theirs")
    func computedHeroesLeft() {
        let mine = RoomMember(userID: me, displayName: "Me", membership: .join)
        let gone = RoomMember(userID: bob.userID, displayName: "Bob", membership: .leave)
        let source = RoomNameSource(members: [mine, gone], ownUserID: me)
        #expect(name(source).englishText == "Empty Room (was Bob)")
    }

    @Test("Shared display names are disambiguated with the user ID")
    func disambiguation() {
        let fake = RoomMember(userID: "@mallory:evil.org", displayName: "Alice", membership: .join)
        let source = RoomNameSource(
            heroes: [alice.userID, fake.userID], joinedMemberCount: 3, invitedMemberCount: 0, members: [alice, fake],
            ownUserID: me)
        #expect(name(source) == .members(["Alice (@alice:example.org)", "Alice (@mallory:evil.org)"], others: 0))
    }

    @Test("A display name shared only with a member who left stays plain")
    func disambiguationIgnoresLeft() {
        let former = RoomMember(userID: "@old:example.org", displayName: "Alice", membership: .leave)
        #expect(MemberDisplayName.disambiguated(alice.userID, among: [alice, former]) == "Alice")
    }

    @Test("A room name never prints through description")
    func privateDescription() {
        #expect(!String(describing: RoomDisplayName.named("canary-room-5521")).contains("canary"))
    }
}

@Suite("ConversationSorting")
struct ConversationSortingTests {
    func key(_ room: String, _ time: Int64?, _ name: String) -> ConversationSortKey {
        ConversationSortKey(
            roomID: RoomID(room), latestActivity: time.map(MatrixTimestamp.init(milliseconds:)), displayName: name)
    }

    @Test("The most recently active conversation comes first")
    func byActivity() {
        let sorted = ConversationSorting.sorted([key("!a", 100, "A"), key("!b", 300, "B"), key("!c", 200, "C")])
        #expect(sorted.map(\.roomID.rawValue) == ["!b", "!c", "!a"])
    }

    @Test("Rooms without activity come last")
    func noActivityLast() {
        let sorted = ConversationSorting.sorted([key("!a", nil, "A"), key("!b", 1, "B")])
        #expect(sorted.map(\.roomID.rawValue) == ["!b", "!a"])
    }

    @Test("Equal activity breaks by name, case-insensitively, then by room ID")
    func tieBreakers() {
        let sorted = ConversationSorting.sorted([
            key("!z", 100, "beta"), key("!y", 100, "Alpha"), key("!x", 100, "alpha"), key("!w", 100, "Alpha"),
        ])
        #expect(sorted.map(\.roomID.rawValue) == ["!w", "!y", "!x", "!z"])
    }

    @Test("The order does not depend on the input order")
    func totalOrder() {
        let keys = [key("!a", 5, "X"), key("!b", 5, "X"), key("!c", nil, "X"), key("!d", 9, "Y"), key("!e", nil, "a")]
        #expect(ConversationSorting.sorted(keys) == ConversationSorting.sorted(keys.reversed()))
        #expect(ConversationSorting.sorted(keys).map(\.roomID.rawValue) == ["!d", "!a", "!b", "!e", "!c"])
    }
}
