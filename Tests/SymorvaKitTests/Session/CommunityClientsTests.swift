import Foundation
import Observation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaFeatureKit
@testable import SymorvaKit
@testable import SymorvaSession
@testable import SymorvaWallet

extension ScriptedHTTPTransport {
    /// The community services' script plus the homeserver's OpenID request
    /// (`POST /user/{userId}/openid/request_token`), so that the wallet can prepare a draft with
    /// no server at all.
    static func communityServicesWithOpenID() -> ScriptedHTTPTransport {
        let transport = communityServices()
        transport.on("POST", pathPrefix: "/_matrix/client/v3/user/") { request in
            guard request.url.path.hasSuffix("/openid/request_token") else {
                return .json(404, #"{"errcode": "SY_NOT_FOUND", "error": "no route"}"#)
            }
            return .json(
                200,
                #"{"access_token": "openid", "token_type": "Bearer", "matrix_server_name": "example.org", "expires_in": 3600}"#
            )
        }
        return transport
    }
}

/// `community.chat` and `community.wallet`: stable clients that follow the active account.
@Suite("Community clients follow the active account, without a server")
struct CommunityClientsTests {
    let data = TestDataDirectory()

    func community(
        wallet isWalletEnabled: Bool = false, transport: any HTTPTransport = ScriptedHTTPTransport.unreachable(),
        clock: any RuntimeClock = ManualClock()
    )
        -> SymorvaCommunity
    {
        SymorvaCommunity(
            configuration: SymorvaConfiguration(
                community: .init(name: "Test"),
                homeserver: .init(url: SessionSamples.server.baseURL, serverName: "example.org"),
                services: .init(url: URL(string: "https://services.example.org")!),
                modules: .init(
                    meetings: .init(isEnabled: true), aiStudio: .init(isEnabled: false),
                    wallet: .init(isEnabled: isWalletEnabled, assets: [.init(code: "ORB", precision: 2)]),
                    directory: .init(isEnabled: false))),
            environment: SymorvaEnvironment(
                dataDirectory: data.path, transport: transport, clock: clock, tracer: Tracer(),
                logCenter: LogCenter(threshold: .error)))
    }

    /// A session that never needs a refresh (no known expiry).
    static func session(_ user: UserID) -> Session {
        Session(
            userID: user, deviceID: DeviceID("DEVICE"), homeserver: SessionSamples.server,
            tokens: SessionTokens(accessToken: Secret("syt_\(user.rawValue)"), refreshToken: nil, expiry: nil))
    }

    /// Stores alice's and bob's sessions, alice active, as a previous run would; each gets a
    /// room of its own in its store.
    func storeAccounts() async throws {
        let storage = SessionSamples.storage(data)
        for user in [SessionSamples.alice, SessionSamples.bob] {
            try await storage.sessionStore(for: user).save(
                Self.session(user), savedAt: Timestamp(millisecondsSince1970: 1))
            try await storage.record(Self.session(user))
            let database = try await storage.database(for: user)
            try await database.database.execute(
                "INSERT INTO rooms(room_id, membership) VALUES ('\(Self.room(of: user).rawValue)', 0)")
        }
        try await storage.setActive(SessionSamples.alice)
    }

    static func room(of user: UserID) -> RoomID { RoomID("!room-of-\(user.localpart):example.org") }

    /// A community restored signed in as alice, with bob stored too.
    func signedInCommunity(
        wallet: Bool = false, transport: any HTTPTransport = ScriptedHTTPTransport.unreachable(),
        clock: any RuntimeClock = ManualClock()
    ) async throws -> SymorvaCommunity {
        try await storeAccounts()
        let community = community(wallet: wallet, transport: transport, clock: clock)
        await community.launch()
        #expect(community.session.state.value.account?.userID == SessionSamples.alice)
        return community
    }

    func switchToBob(_ community: SymorvaCommunity) async throws {
        let bob = try #require(community.session.accounts.value.first { $0.userID == SessionSamples.bob })
        _ = try await community.session.switchAccount(to: bob)
    }

    // MARK: Chat

    @Test("Signed out, chat is there: an empty signed-out list, a stopped sync, notSignedIn operations")
    func chatSignedOut() async {
        let community = community()
        let chat: ChatClient = community.chat
        await community.launch()
        #expect(community.chat === chat)
        #expect(chat.conversations.value == .signedOut)
        #expect(chat.conversations.value.status == .signedOut)
        #expect(chat.conversations.value.items.isEmpty)
        #expect(chat.syncState.value == .stopped)
        #expect(chat.userID == nil)
        await #expect(throws: ChatError.notSignedIn) { try await chat.conversation(id: RoomID("!a:example.org")) }
        await #expect(throws: ChatError.notSignedIn) { try await chat.createRoom(name: "Club") }
        await #expect(throws: ChatError.notSignedIn) { try await chat.join(roomIDOrAlias: "#club:example.org") }
        await #expect(throws: ChatError.notSignedIn) { try await chat.leave(RoomID("!a:example.org")) }
        await #expect(throws: ChatError.notSignedIn) {
            try await chat.setFlag(.pinned, true, roomID: RoomID("!a:example.org"))
        }
        await chat.refresh()
        #expect(chat.conversations.value == .signedOut)
    }

    @Test("When the session state says signed in, community.chat and community.wallet already act for the account")
    func clientsFollowBeforeSignedIn() async throws {
        try await storeAccounts()
        let community = community(
            wallet: true, transport: ScriptedHTTPTransport.communityServicesWithOpenID())
        let chat = community.chat
        let wallet = try #require(community.wallet)
        // Who the clients act for at the moment each signed-in state is published: what an app
        // (or the REPL) that calls them as soon as `register` or `switchAccount` returns meets.
        let seen = Lock<[String]>([])
        let stop = community.session.state.subscribe { state in
            guard case .signedIn(let account) = state else { return }
            let actors =
                "\(account.userID) chat=\(chat.userID?.rawValue ?? "nil") wallet=\(wallet.member?.rawValue ?? "nil")"
            seen.withLock { $0.append(actors) }
        }
        defer { stop() }
        await community.launch()
        try await switchToBob(community)
        let alice = SessionSamples.alice.rawValue
        let bob = SessionSamples.bob.rawValue
        #expect(
            seen.withLock { $0 } == [
                "\(alice) chat=\(alice) wallet=\(alice)", "\(bob) chat=\(bob) wallet=\(bob)",
            ])
        await community.shutdown()
    }

    @Test("Signed in, chat shows the active account's list and hands out its conversations")
    func chatSignedIn() async throws {
        let community = try await signedInCommunity()
        let chat = community.chat
        #expect(chat.userID == SessionSamples.alice)
        let list = chat.conversations.value
        #expect(list.status == .loaded)
        #expect(list.userID == SessionSamples.alice)
        #expect(list.items.map(\.id) == [Self.room(of: SessionSamples.alice)])
        let conversation = try await chat.conversation(id: Self.room(of: SessionSamples.alice))
        #expect(conversation.id == Self.room(of: SessionSamples.alice))
        await #expect(throws: ChatError.unknownConversation(Self.room(of: SessionSamples.bob))) {
            try await chat.conversation(id: Self.room(of: SessionSamples.bob))
        }
        await community.shutdown()
    }

    @Test("Switching accounts republishes the new account's list; the old account's late publications never show")
    func chatSwitch() async throws {
        let community = try await signedInCommunity()
        let chat = community.chat
        let alice = try #require(community.module(AccountChat.self))
        let seen = Lock<[ConversationList]>([])
        let stop = chat.conversations.subscribe { list in seen.withLock { $0.append(list) } }
        defer { stop() }

        try await switchToBob(community)
        #expect(community.chat === chat)
        let bob = try #require(community.module(AccountChat.self))
        #expect(bob !== alice)
        #expect(chat.userID == SessionSamples.bob)
        #expect(chat.conversations.value.userID == SessionSamples.bob)
        #expect(chat.conversations.value.items.map(\.id) == [Self.room(of: SessionSamples.bob)])

        // Alice's client publishes after the switch (a late store read, an optimistic flag).
        alice.setOverride(.pinned, true, roomID: Self.room(of: SessionSamples.alice))
        try? await alice.reloadList()
        #expect(alice.conversations.value.userID == SessionSamples.alice)
        #expect(chat.conversations.value.userID == SessionSamples.bob)
        let values = seen.withLock { $0 }
        let firstBob = try #require(values.firstIndex { $0.userID == SessionSamples.bob })
        #expect(values[firstBob...].allSatisfy { $0.userID == SessionSamples.bob })
        #expect(values.allSatisfy { $0[Self.room(of: SessionSamples.alice)]?.isPinned != true })
        await community.shutdown()
    }

    @Test("A view reading chat.conversations.items under Observation hears of the account's changes and of a switch")
    func conversationsUnderObservation() async throws {
        let community = try await signedInCommunity()
        let chat = community.chat
        let alice = try #require(community.module(AccountChat.self))
        let changes = Lock(0)
        func track() -> [ConversationListItem] {
            withObservationTracking {
                chat.conversations.items
            } onChange: {
                changes.withLock { $0 += 1 }
            }
        }

        // No subscription at all: Observation alone, as a SwiftUI body reads the list.
        #expect(track().map(\.id) == [Self.room(of: SessionSamples.alice)])
        #expect(chat.conversations.observable.observerCount == 0)
        alice.setOverride(.pinned, true, roomID: Self.room(of: SessionSamples.alice))
        #expect(changes.withLock { $0 } == 1)
        #expect(track().first?.isPinned == true)

        try await switchToBob(community)
        #expect(changes.withLock { $0 } == 2)
        #expect(chat.conversations.items.map(\.id) == [Self.room(of: SessionSamples.bob)])
        #expect(chat.conversations.status == .loaded)
        await chat.conversations.refresh()
        #expect(chat.conversations.value.userID == SessionSamples.bob)
        await community.shutdown()
    }

    @Test("A conversation opened for alice refuses to act once bob is active")
    func conversationBoundToAccount() async throws {
        let community = try await signedInCommunity()
        let conversation = try await community.chat.conversation(id: Self.room(of: SessionSamples.alice))
        let alice = try #require(community.module(AccountChat.self))
        try await switchToBob(community)
        await #expect(throws: ChatError.accountEnded) { try await conversation.send(.text("hello")) }
        await #expect(throws: ChatError.accountEnded) { try await conversation.edit(EventID("$e"), newText: "x") }
        await #expect(throws: ChatError.accountEnded) { try await conversation.react(to: EventID("$e"), key: "👍") }
        await #expect(throws: ChatError.accountEnded) { try await conversation.redact(EventID("$e")) }
        await #expect(throws: ChatError.accountEnded) { try await conversation.setPinned(true) }
        await #expect(throws: ChatError.accountEnded) {
            try await alice.conversation(id: Self.room(of: SessionSamples.alice))
        }
        #expect(alice.isEnded)
        // Bob's room is reachable through the same community.chat.
        let bobs = try await community.chat.conversation(id: Self.room(of: SessionSamples.bob))
        #expect(bobs !== conversation)
        await community.shutdown()
    }

    @Test("Signing out shows the signed-out list and makes operations throw notSignedIn")
    func chatSignOut() async throws {
        let community = try await signedInCommunity()
        // Bob, the other stored account, becomes active after alice: sign out of both.
        while community.session.state.value.account != nil { try await community.session.signOut() }
        #expect(community.chat.conversations.value == .signedOut)
        #expect(community.chat.syncState.value == .stopped)
        await #expect(throws: ChatError.notSignedIn) {
            try await community.chat.conversation(id: Self.room(of: SessionSamples.alice))
        }
    }

    @Test("Work follows observers: the active account's list is subscribed to only while chat's list is observed")
    func chatObservers() async throws {
        let community = try await signedInCommunity()
        let alice = try #require(community.module(AccountChat.self))
        #expect(alice.conversations.observerCount == 0)
        let first = community.chat.conversations.subscribe { _ in }
        let second = community.chat.syncState.subscribe { _ in }
        #expect(alice.conversations.observerCount == 1)
        #expect(alice.syncState.observerCount >= 1)

        try await switchToBob(community)
        let bob = try #require(community.module(AccountChat.self))
        #expect(alice.conversations.observerCount == 0)
        #expect(bob.conversations.observerCount == 1)
        first()
        second()
        #expect(bob.conversations.observerCount == 0)
        // Unobserved, a read still shows the active account's current list.
        bob.setOverride(.muted, true, roomID: Self.room(of: SessionSamples.bob))
        #expect(community.chat.conversations.value[Self.room(of: SessionSamples.bob)]?.isMuted == true)
        await community.shutdown()
    }

    // MARK: Wallet

    @Test("The wallet is nil exactly when the manifest disables it, signed in or not")
    func walletPresence() async throws {
        #expect(community(wallet: false).wallet == nil)
        let enabled = community(wallet: true)
        let wallet = try #require(enabled.wallet)
        #expect(wallet.configuration.assets == [Asset(code: "ORB", precision: 2)])
        await enabled.launch()
        #expect(enabled.wallet === wallet)
        #expect(wallet.member == nil)
        #expect(wallet.balances.value.isEmpty)
        #expect(wallet.pendingCommands.value.isEmpty)
        await #expect(throws: TransferError.notSignedIn) {
            try await wallet.prepareTransfer(
                to: UserID("@bob:example.org"), asset: Asset(code: "ORB", precision: 2),
                amount: try Amount("1.00", precision: 2))
        }
        await #expect(throws: TransferError.notSignedIn) { try await wallet.refreshBalances() }
        await #expect(throws: TransferError.notSignedIn) { try await wallet.history() }
        await #expect(throws: TransferError.notSignedIn) { try await wallet.setPIN(Secret("1234")) }

        let disabledSignedIn = try await signedInCommunity(wallet: false)
        #expect(disabledSignedIn.wallet == nil)
        await disabledSignedIn.shutdown()
    }

    @Test("A draft prepared for alice never confirms once bob is active; the wallet follows bob")
    func walletSwitch() async throws {
        let services = ScriptedHTTPTransport.communityServicesWithOpenID()
        services.on("POST", "/_symorva/v1/wallet/transfers/prepare") { _ in .json(200, Self.draftJSON) }
        let community = try await signedInCommunity(wallet: true, transport: services)
        let wallet = try #require(community.wallet)
        #expect(wallet.member == SessionSamples.alice)
        let alice = try #require(community.module(AccountWallet.self))
        let observing = wallet.pendingCommands.subscribe { _ in }
        defer { observing() }
        #expect(alice.pendingCommands.observerCount == 1)

        let draft = try await wallet.prepareTransfer(
            to: SessionSamples.bob, asset: Asset(code: "ORB", precision: 2),
            amount: try Amount("25.00", precision: 2))
        #expect(draft.canConfirm)

        try await switchToBob(community)
        #expect(community.wallet === wallet)
        #expect(wallet.member == SessionSamples.bob)
        let bob = try #require(community.module(AccountWallet.self))
        #expect(alice.pendingCommands.observerCount == 0)
        #expect(bob.pendingCommands.observerCount == 1)
        await #expect(throws: TransferError.accountEnded) { try await draft.confirm(with: .pin(Secret("4711"))) }
        await #expect(throws: TransferError.accountEnded) { try await alice.refreshBalances() }
        #expect(!services.requests.contains { $0.url.path.hasSuffix("/confirm") })
        await community.shutdown()
    }

    /// A draft for 25.00 ORB from alice to bob (the example.org accounts of these tests).
    static let draftJSON = """
        {"draft_id": "d_abc", "recipient": "@bob:example.org", "asset": "ORB", "precision": 2, "amount": "25.00",
         "fee": "0.50", "total": "25.50", "created_at_ms": 1700000000000, "expires_at_ms": 1700000120000,
         "expires_in_ms": 120000, "verification_methods": ["pin"],
         "sealing_key": {"algorithm": "x25519-xsalsa20poly1305-sealedbox", "key_id": "k1",
                         "public_key": "\(Data([UInt8](repeating: 7, count: 32)).base64EncodedString())"},
         "payload_version": "symorva-wallet-confirm/1"}
        """
}
