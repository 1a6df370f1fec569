import Foundation
import SymorvaChat
import SymorvaChatStore
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import Testing

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

    /// A new client (and database connection) for the account, stopped when `run` ends;
    /// `homeserverURL` overrides the base URL (a proxy in front of Synapse).
    func makeClient(
        in run: ChatTestRun, transport: any HTTPTransport, homeserverURL: HomeserverURL? = nil,
        options: ChatOptions = .testing
    ) async throws -> AccountChat {
        let store = try await ChatStore.open(path: databasePath)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL ?? self.homeserverURL, userID: userID, accessToken: account.accessToken,
            transport: transport)
        let client = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: userID.rawValue),
            options: options)
        run.atEnd { await client.stop() }
        return client
    }
}

/// What a chat test started in this process (clients, communities, proxies), ended however the
/// test ends: a failed expectation or a thrown error must not leave sync loops and relays
/// running for the tests after it. `defer` cannot await, so tests run in ``withChatTestRun(_:)``.
final class ChatTestRun: Sendable {
    private let cleanups = Lock<[@Sendable () async -> Void]>([])

    /// Runs `cleanup` when the run ends, before the ones registered earlier. Stopping a client
    /// or closing a proxy the test already stopped or closed does nothing.
    func atEnd(_ cleanup: @escaping @Sendable () async -> Void) {
        cleanups.withLock { $0.append(cleanup) }
    }

    /// Runs every cleanup once, the latest registered first.
    func end() async {
        let cleanups = self.cleanups.withLock { cleanups in
            defer { cleanups.removeAll() }
            return cleanups
        }
        for cleanup in cleanups.reversed() { await cleanup() }
    }
}

/// Runs `body` with a new ``ChatTestRun`` and ends the run when `body` returns or throws.
func withChatTestRun<Result>(_ body: (ChatTestRun) async throws -> Result) async throws -> Result {
    let run = ChatTestRun()
    let result: Result
    do {
        result = try await body(run)
    } catch {
        await run.end()
        throw error
    }
    await run.end()
    return result
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

/// The joined rooms of an initial `/sync` v2 with `filter` (inline JSON), by room ID: what the
/// server itself says of them (its counts, receipts, account data), for tests that compare the
/// device with it.
func joinedRooms(ofSyncFilteredBy filter: String, requester: any MatrixRequester) async throws -> [String: Any] {
    let response = try await requester.send(
        MatrixEndpoint(
            method: .get, path: "/_matrix/client/v3/sync", query: [.init(name: "filter", value: filter)],
            requiresAuth: true))
    let body = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
    return (body["rooms"] as? [String: Any])?["join"] as? [String: Any] ?? [:]
}
