import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import SymorvaTransport

/// One registered account with a AccountChat on its own temporary database.
struct ChatTestAccount: Sendable {
    let account: RegisteredAccount
    let userID: UserID
    let databasePath: String
    let homeserverURL: HomeserverURL

    /// Registers a fresh account.
    static func register(_ prefix: String, transport: any HTTPTransport) async throws -> ChatTestAccount {
        let environment = DevEnvironment.current!
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername(prefix), in: environment, transport: transport)
        let directory = FileManager.default.temporaryDirectory.appending(path: "symorva-chat-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return ChatTestAccount(
            account: account, userID: UserID(account.userID)!, databasePath: directory.appending(path: "chat.db").path,
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!)
    }

    /// A new client (and database connection) for the account; `homeserverURL` overrides the
    /// base URL (a proxy in front of Synapse).
    func makeClient(
        transport: any HTTPTransport, homeserverURL: HomeserverURL? = nil, options: ChatOptions = .testing
    ) async throws -> AccountChat {
        let store = try await ChatStore.open(path: databasePath)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL ?? self.homeserverURL, userID: userID, accessToken: account.accessToken,
            transport: transport)
        return AccountChat(
            requester: requester, database: store.database, scope: AccountScope(label: userID.rawValue),
            options: options)
    }
}

extension ChatOptions {
    /// Short delays so that a test waiting for a retry after an outage does not wait minutes.
    static let testing = ChatOptions(
        longPollTimeout: .seconds(5),
        syncBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)),
        sendBackoff: RetryBackoff(initialDelay: .milliseconds(200), maximumDelay: .seconds(1)))
}

extension AccountChat {
    /// Starts and waits until the first sync is committed.
    func startAndSync() async throws {
        try await start()
        try await syncState.wait(timeout: .seconds(60)) { state in
            if case .live = state { return true }
            return false
        }
    }

    /// Waits until the list shows `roomID` as `membership`.
    @discardableResult
    func waitForConversation(_ roomID: RoomID, _ membership: ConversationMembership = .joined) async throws
        -> ConversationListItem
    {
        let list = try await conversations.wait(timeout: .seconds(60)) { $0[roomID]?.membership == membership }
        return list[roomID]!
    }
}

extension Conversation {
    /// Observes the timeline (making it live) until the returned function is called.
    func observe() -> @Sendable () -> Void {
        timeline.subscribe { _ in }
    }

    /// Waits until the timeline satisfies `predicate`.
    @discardableResult
    func waitForTimeline(_ predicate: @escaping @Sendable ([TimelineItem]) -> Bool) async throws -> [TimelineItem] {
        try await timeline.wait(timeout: .seconds(60), until: predicate)
    }
}

extension TimelineItem {
    /// The body of a text message, else `nil`.
    var text: String? {
        if case .message(_, let body) = content { return body }
        return nil
    }
}

extension [TimelineItem] {
    /// The bodies of the text messages, in order.
    var texts: [String] { compactMap(\.text) }
}

extension SendReceipt {
    /// Waits until the receipt says sent.
    func waitUntilSent() async throws {
        try await state.wait(timeout: .seconds(60)) { state in
            if case .sent = state { return true }
            return false
        }
    }
}

extension ChatClient {
    /// Waits until the active account's list shows `roomID` as `membership`.
    @discardableResult
    func waitForConversation(_ roomID: RoomID, _ membership: ConversationMembership = .joined) async throws
        -> ConversationListItem
    {
        let list = try await conversations.observable.wait(timeout: .seconds(60)) {
            $0[roomID]?.membership == membership
        }
        return list[roomID]!
    }
}
