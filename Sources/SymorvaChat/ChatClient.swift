import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

/// The community's chat: `community.chat`, one instance for the community's whole life.
///
/// It always shows the **active** account: ``conversations`` and ``syncState`` switch to the
/// new account's values when the member switches accounts, and show
/// ``ConversationList/signedOut`` and `.stopped` while nobody is signed in. Operations act for
/// the account that is active when they are called and throw ``ChatError/notSignedIn`` when
/// there is none. Everything else belongs to one account for good: a ``Conversation`` obtained
/// while alice was active keeps acting for alice, and once alice is switched away from or signed
/// out its operations throw ``ChatError/accountEnded``; a result that arrives after the switch
/// is thrown away the same way rather than handed out as the new account's.
///
/// Views observe, the client owns; work follows observers: the active account's list and sync
/// state are subscribed to only while someone observes this client's values.
///
/// ```swift
/// let stop = community.chat.conversations.subscribe { list in render(list.items) }
/// await community.chat.conversations.refresh()
/// let conversation = try await community.chat.conversation(id: roomID)   // .notSignedIn when signed out
/// let receipt = try await conversation.send(.text("Governance call starts at 18:00."))
/// ```
public final class ChatClient: Sendable {
    private let active = ActiveAccount<AccountChat>()
    private let list: ObservableValue<ConversationList>
    private let sync: ObservableValue<SyncMachine.State>

    /// A client that shows nobody until the community tells it which account is active.
    package init() {
        list = active.value(placeholder: .signedOut) { $0.conversations }
        sync = active.value(placeholder: .stopped) { $0.syncState }
    }

    /// A client that always acts for `chat`: for tools and tests that manage one account's
    /// ``AccountChat`` themselves. Apps use `community.chat`.
    public convenience init(following chat: AccountChat) {
        self.init()
        follow(chat)
    }

    /// Makes `chat` (the new active account's, or `nil` when nobody is signed in) the one this
    /// client shows and acts for.
    package func follow(_ chat: AccountChat?) {
        active.follow(chat, isSignedIn: chat != nil)
    }

    /// The active account's chat, if any.
    var current: AccountChat? { active.current }

    /// The active account's conversation list, from its store, updated after every committed
    /// sync; ``ConversationList/signedOut`` while nobody is signed in. Views read
    /// `conversations.items` (Observation-tracked) or subscribe; `conversations.refresh()` asks
    /// for fresh data.
    public var conversations: ConversationListModel { ConversationListModel(client: self) }

    /// The observable behind ``conversations``.
    var conversationList: ObservableValue<ConversationList> { list }

    /// The active account's sync loop: initial sync, catching up, live, backing off, awaiting a
    /// token, failed; `.stopped` while nobody is signed in.
    public var syncState: ObservableValue<SyncState> { sync }

    /// The active account, or `nil` while nobody is signed in.
    public var userID: UserID? { current?.userID }

    /// The active account's sync mode, window and last commit (the REPL's `sync status`).
    package var syncStatus: SyncStatus? { current?.syncStatus }

    /// Re-reads the active account's list from its store and makes its sync loop catch up now.
    /// Does nothing while nobody is signed in.
    public func refresh() async {
        await current?.refresh()
    }

    /// Tells the active account's sync loop and send queues that connectivity changed.
    public func networkChanged() async {
        await current?.networkChanged()
    }

    /// The conversation with `id` in the active account: one instance per room and account.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; `.unknownConversation` when the room
    ///   is not in the account's store; `.accountEnded` when the account was switched away from
    ///   before the conversation was ready.
    public func conversation(id: RoomID) async throws(ChatError) -> Conversation {
        try await withActive { chat async throws(ChatError) -> Conversation in try await chat.conversation(id: id) }
    }

    /// Creates a room as the active account and returns its ID once the server has it and
    /// (while syncing) the list shows it. See ``AccountChat/createRoom(name:topic:invitees:isDirect:isEncrypted:)``.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; the server's refusal.
    public func createRoom(
        name: String? = nil, topic: String? = nil, invitees: [UserID] = [], isDirect: Bool = false,
        isEncrypted: Bool? = nil
    ) async throws(ChatError) -> RoomID {
        try await withActive { chat async throws(ChatError) -> RoomID in
            try await chat.createRoom(
                name: name, topic: topic, invitees: invitees, isDirect: isDirect, isEncrypted: isEncrypted)
        }
    }

    /// Joins a room by ID or alias (`#room:server`) as the active account.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; the server's refusal.
    public func join(roomIDOrAlias: String) async throws(ChatError) -> RoomID {
        try await withActive { chat async throws(ChatError) -> RoomID in
            try await chat.join(roomIDOrAlias: roomIDOrAlias)
        }
    }

    /// Leaves a room (or declines an invite) as the active account. Waits for the server.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; the server's refusal.
    public func leave(_ roomID: RoomID) async throws(ChatError) {
        try await activeChat().leave(roomID)
    }

    /// Invites `userID` to the room, after checking the active account's power level.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; `.insufficientPowerLevel`; the
    ///   server's refusal.
    public func invite(_ userID: UserID, to roomID: RoomID) async throws(ChatError) {
        try await activeChat().invite(userID, to: roomID)
    }

    /// Removes `userID` from the room, after checking power levels. Waits for the server.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; `.insufficientPowerLevel`; the
    ///   server's refusal.
    public func kick(_ userID: UserID, from roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await activeChat().kick(userID, from: roomID, reason: reason)
    }

    /// Bans `userID` from the room, after checking power levels. Waits for the server.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; `.insufficientPowerLevel`; the
    ///   server's refusal.
    public func ban(_ userID: UserID, from roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await activeChat().ban(userID, from: roomID, reason: reason)
    }

    /// Sets a personal flag of a conversation of the active account: the list shows it at
    /// once and shows the old value again if the server refuses.
    ///
    /// - Throws: `.notSignedIn` when nobody is signed in; the server's refusal.
    public func setFlag(_ flag: ConversationFlag, _ value: Bool, roomID: RoomID) async throws(ChatError) {
        try await activeChat().setFlag(flag, value, roomID: roomID)
    }

    // MARK: Room management

    /// Sets who may join a room. See ``AccountChat/setJoinRule(_:roomID:)``.
    public func setJoinRule(_ rule: JoinRule, roomID: RoomID) async throws(ChatError) {
        try await activeChat().setJoinRule(rule, roomID: roomID)
    }

    /// Sets who may read a room's history. See ``AccountChat/setHistoryVisibility(_:roomID:)``.
    public func setHistoryVisibility(_ visibility: HistoryVisibility, roomID: RoomID) async throws(ChatError) {
        try await activeChat().setHistoryVisibility(visibility, roomID: roomID)
    }

    /// Sets a member's power level. See ``AccountChat/setPowerLevel(_:for:roomID:)``.
    public func setPowerLevel(_ level: Int, for user: UserID, roomID: RoomID) async throws(ChatError) {
        try await activeChat().setPowerLevel(level, for: user, roomID: roomID)
    }

    /// Knocks on a room. See ``AccountChat/knock(_:reason:via:)``.
    public func knock(_ roomIDOrAlias: String, reason: String? = nil, via servers: [String] = [])
        async throws(ChatError)
        -> RoomID
    {
        try await withActive { chat async throws(ChatError) -> RoomID in
            try await chat.knock(roomIDOrAlias, reason: reason, via: servers)
        }
    }

    /// The users knocking on a room. See ``AccountChat/knocks(roomID:)``.
    public func knocks(roomID: RoomID) async throws(ChatError) -> [UserID] {
        try await withActive { chat async throws(ChatError) -> [UserID] in try await chat.knocks(roomID: roomID) }
    }

    /// Lets a knocking user in. See ``AccountChat/acceptKnock(from:roomID:)``.
    public func acceptKnock(from user: UserID, roomID: RoomID) async throws(ChatError) {
        try await activeChat().acceptKnock(from: user, roomID: roomID)
    }

    /// Turns a knock down. See ``AccountChat/denyKnock(from:roomID:reason:)``.
    public func denyKnock(from user: UserID, roomID: RoomID, reason: String? = nil) async throws(ChatError) {
        try await activeChat().denyKnock(from: user, roomID: roomID, reason: reason)
    }

    // MARK: Spaces

    /// The active account's joined spaces. See ``AccountChat/joinedSpaces()``.
    public func joinedSpaces() async throws(ChatError) -> [JoinedSpace] {
        try await withActive { chat async throws(ChatError) -> [JoinedSpace] in try await chat.joinedSpaces() }
    }

    /// The rooms a joined space links to, from the synced state. See
    /// ``AccountChat/roomsOfSpace(_:)``.
    public func roomsOfSpace(_ spaceID: RoomID) async throws(ChatError) -> [SpaceChildLink] {
        try await withActive { chat async throws(ChatError) -> [SpaceChildLink] in try await chat.roomsOfSpace(spaceID)
        }
    }

    /// A space's hierarchy, paged from the server, for the active account. See
    /// ``AccountChat/hierarchy(of:pageSize:)``.
    public func hierarchy(of spaceID: RoomID, pageSize: Int = 50) throws(ChatError) -> SpaceHierarchy {
        try activeChat().hierarchy(of: spaceID, pageSize: pageSize)
    }

    /// The community's space (the manifest's `community.space`), paged. See
    /// ``AccountChat/communityRooms(pageSize:)``.
    public func communityRooms(pageSize: Int = 50) async throws(ChatError) -> SpaceHierarchy {
        try await activeChat().communityRooms(pageSize: pageSize)
    }

    /// Creates a space. See ``AccountChat/createSpace(name:topic:isPublic:)``.
    public func createSpace(name: String, topic: String? = nil, isPublic: Bool = false) async throws(ChatError)
        -> RoomID
    {
        try await withActive { chat async throws(ChatError) -> RoomID in
            try await chat.createSpace(name: name, topic: topic, isPublic: isPublic)
        }
    }

    /// Links a room into a space. See ``AccountChat/addToSpace(_:spaceID:via:suggested:)``.
    public func addToSpace(_ roomID: RoomID, spaceID: RoomID, via: [String]? = nil, suggested: Bool = false)
        async throws(ChatError)
    {
        try await activeChat().addToSpace(roomID, spaceID: spaceID, via: via, suggested: suggested)
    }

    /// Unlinks a room from a space. See ``AccountChat/removeFromSpace(_:spaceID:)``.
    public func removeFromSpace(_ roomID: RoomID, spaceID: RoomID) async throws(ChatError) {
        try await activeChat().removeFromSpace(roomID, spaceID: spaceID)
    }

    /// Joins a room through servers a space's link names. See ``AccountChat/join(_:via:)``.
    public func join(_ roomID: RoomID, via servers: [String]) async throws(ChatError) -> RoomID {
        try await withActive { chat async throws(ChatError) -> RoomID in try await chat.join(roomID, via: servers) }
    }

    /// The active account's chat.
    func activeChat() throws(ChatError) -> AccountChat { try active.module(orThrow: ChatError.self) }

    /// Runs `body` with the active account's chat; a result that comes back after that account
    /// was switched away from or signed out is not handed out (`.accountEnded`).
    func withActive<T: Sendable>(
        _ body: (AccountChat) async throws(ChatError) -> T
    ) async throws(ChatError) -> T {
        try await active.withActive(body)
    }
}

extension AccountChat: AccountBound {}

extension ChatError: ActiveAccountError {}

/// `community.chat.conversations`: the active account's conversation list as views read it,
/// and the one thing they may ask of it.
///
/// ```swift
/// List(community.chat.conversations.items) { conversation in … }   // re-rendered on change
///     .task { await community.chat.conversations.refresh() }
/// ```
///
/// Reading ``value``, ``items`` or ``status`` inside Observation tracking (a SwiftUI body) is
/// told of the next change. The list is owned by the account's chat, never by the view: a view
/// observes it and asks for a refresh, it never keeps a copy of its own.
public struct ConversationListModel: Sendable {
    let client: ChatClient

    /// The list as an ``/SymorvaRuntime/ObservableValue``, for code written against observable values in general.
    public var observable: ObservableValue<ConversationList> { client.conversationList }

    /// The current list.
    public var value: ConversationList { observable.value }

    /// The current list's conversations, in display order.
    public var items: [ConversationListItem] { value.items }

    /// Whether the list is known yet (``ConversationList/Status-swift.enum/loaded``), still
    /// loading, or absent because nobody is signed in.
    public var status: ConversationList.Status { value.status }

    /// Calls `listener` with the current list now and with every later one, until the returned
    /// function is called. While anyone subscribes, the active account's list is followed.
    public func subscribe(
        _ listener: @escaping @Sendable (ConversationList) -> Void
    ) -> ObservableValue<ConversationList>.Unsubscribe {
        observable.subscribe(listener)
    }

    /// The current list and every later one, as an async sequence (one observer per iteration).
    public var values: AsyncStream<ConversationList> { observable.values }

    /// Rows `range` of the active account's list (``AccountChat/conversationWindow(_:)``): only
    /// those rows are built, whatever the size of the list. The window belongs to the account
    /// active when it is asked for (ask again after a switch); while nobody is signed in it is
    /// empty and `.signedOut`.
    public func window(_ range: Range<Int>) -> ObservableValue<ConversationWindow> {
        guard let chat = client.current else {
            return ObservableValue(ConversationWindow(range: range, status: .signedOut))
        }
        return chat.conversationWindow(range)
    }

    /// Re-reads the active account's list from its store and makes its sync loop catch up now
    /// (``ChatClient/refresh()``). Does nothing while nobody is signed in.
    public func refresh() async { await client.refresh() }
}
