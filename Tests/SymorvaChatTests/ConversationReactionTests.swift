import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// The homeserver's answers to reactions and redactions, scripted on a
/// ``ScriptedHTTPTransport``: a reaction gets the next `$reaction-N` event, a redaction is
/// accepted (or refused with the status set by `answerRedactions(with:)`).
final class ReactionHomeserver: Sendable {
    private struct Counts {
        var requests = 0
        var reactions = 0
        var redactionStatus = 200
    }

    /// The counts, shared with the transport's answer.
    private final class Shared: Sendable {
        let counts = Lock(Counts())
    }

    static let unrecognized: ScriptedHTTPTransport.Answer = { _ in .json(404, #"{"errcode": "M_UNRECOGNIZED"}"#) }

    /// The transport the chat uses.
    let transport = ScriptedHTTPTransport(fallback: unrecognized)
    private let shared = Shared()

    init() {
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/rooms/") { [shared] request in
            let path = Self.components(request)
            guard path.count > 7 else { return .json(404, #"{"errcode": "M_UNRECOGNIZED"}"#) }
            return shared.counts.withLock { counts in
                counts.requests += 1
                switch path[6] {
                case "send":
                    counts.reactions += 1
                    return .json(200, #"{"event_id": "$reaction-\#(counts.reactions)"}"#)
                case "redact" where counts.redactionStatus == 200:
                    return .json(200, #"{"event_id": "$redaction-\#(counts.requests)"}"#)
                case "redact":
                    return .json(counts.redactionStatus, #"{"errcode": "M_FORBIDDEN", "error": "no"}"#)
                default:
                    return .json(404, #"{"errcode": "M_UNRECOGNIZED"}"#)
                }
            }
        }
    }

    /// What was asked of a room, in order, as `METHOD kind [event]`: `PUT send m.reaction`,
    /// `PUT redact $reaction-1`.
    var requests: [String] {
        transport.requests.compactMap { request in
            let path = Self.components(request)
            guard request.method == .put, path.count > 7, path[4] == "rooms" else { return nil }
            return "PUT \(path[6]) \(path[7])"
        }
    }

    /// Answers every later redaction with `status` (`M_FORBIDDEN` unless 200).
    func answerRedactions(with status: Int) { shared.counts.withLock { $0.redactionStatus = status } }

    /// `["", "_matrix", "client", "v3", "rooms", room, kind, …]`, percent-decoded.
    static func components(_ request: HTTPRequest) -> [String] {
        request.url.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    }
}

/// Our reactions before and after sync brings them, with the store and the conversation of a
/// real ``AccountChat`` and the homeserver's answers from a script. The sync loop does not run:
/// the tests store `/sync` batches themselves, so the order of sync and reactions is theirs.
@Suite("Reactions of our own, before and after sync brings them")
struct ConversationReactionTests {
    static let roomID = RoomID("!reactions:example.org")
    static let me = UserID("@me:example.org")
    static let message = EventID("$m1")

    let homeserver = ReactionHomeserver()

    /// A chat on an in-memory store holding the room with alice's message, its timeline observed
    /// and showing the message.
    func observedConversation() async throws -> (AccountChat, Conversation, ObservableValue<[TimelineItem]>.Unsubscribe)
    {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "b1",
                [
                    Self.member("@me:example.org", id: "$join-me"),
                    Self.member("@alice:example.org", id: "$join-alice"),
                    Self.text(id: "$m1", from: "@alice:example.org", body: "hello"),
                ]))
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Self.me, accessToken: Secret("token"),
            transport: homeserver.transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Self.me.rawValue),
            clock: ManualClock(), tracer: Tracer())
        let conversation = try await chat.conversation(id: Self.roomID)
        let stop = conversation.timeline.subscribe { _ in }
        try await conversation.timeline.wait { $0.contains { $0.eventID == Self.message } }
        return (chat, conversation, stop)
    }

    /// Stores a `/sync` batch for the room and makes the conversation read the store again, as
    /// the sync loop's commit does.
    func syncs(_ batch: String, _ events: [String], receipts: String? = nil, into chat: AccountChat) async throws {
        let conversation = try await chat.conversation(id: Self.roomID)
        _ = try await SyncIngestor(store: chat.store).ingest(Self.sync(batch, events, receipts: receipts))
        conversation.requestRebuild()
    }

    @Test("Unreacting before sync has brought our reaction redacts the event the server created for it")
    func unreactBeforeSync() async throws {
        let (chat, conversation, stop) = try await observedConversation()
        defer { stop() }
        let thumbsUp = ReactionSummary(key: "👍", senders: [Self.me], includesOwn: true)

        try await conversation.react(to: Self.message, key: "👍")
        try await conversation.timeline.wait { Self.reactions(in: $0) == [thumbsUp] }
        // Sync has not brought the reaction: the store knows nothing of it.
        try await conversation.unreact(to: Self.message, key: "👍")

        #expect(homeserver.requests == ["PUT send m.reaction", "PUT redact $reaction-1"])
        try await conversation.timeline.wait { Self.reactions(in: $0) == [] }

        // Sync brings the reaction, then its redaction; alice's read receipts mark each rebuild.
        try await syncs(
            "b2", [Self.reaction(id: "$reaction-1", to: "$m1")], receipts: Self.receipt(on: "$m1", ts: 1), into: chat)
        var items = try await conversation.timeline.wait { Self.readers(of: $0) == ["@alice:example.org"] }
        #expect(Self.reactions(in: items) == [], "the reaction shows again before its redaction arrives")
        #expect(conversation.pendingReaction(for: Self.message, key: "👍")?.isAdded == false)

        try await syncs(
            "b3", [Self.redaction(id: "$redaction-2", of: "$reaction-1")],
            receipts: Self.receipt(on: "$m1", ts: 2, user: "@carol:example.org"), into: chat)
        items = try await conversation.timeline.wait { Self.readers(of: $0).count == 2 }
        #expect(Self.reactions(in: items) == [])
        #expect(conversation.pendingReaction(for: Self.message, key: "👍") == nil, "the removal is settled")
        await chat.stop()
    }

    @Test("A reaction sync has not brought yet is not sent twice")
    func reactTwiceBeforeSync() async throws {
        let (chat, conversation, stop) = try await observedConversation()
        defer { stop() }
        try await conversation.react(to: Self.message, key: "👍")
        try await conversation.react(to: Self.message, key: "👍")
        #expect(homeserver.requests == ["PUT send m.reaction"])
        await chat.stop()
    }

    @Test("Reacting again while the removal of our synced reaction is on its way sends a new reaction")
    func reactAgainWhileRemoving() async throws {
        let (chat, conversation, stop) = try await observedConversation()
        defer { stop() }
        let thumbsUp = ReactionSummary(key: "👍", senders: [Self.me], includesOwn: true)
        try await conversation.react(to: Self.message, key: "👍")
        try await syncs(
            "b2", [Self.reaction(id: "$reaction-1", to: "$m1")], receipts: Self.receipt(on: "$m1", ts: 1), into: chat)
        try await conversation.timeline.wait { Self.readers(of: $0) == ["@alice:example.org"] }

        try await conversation.unreact(to: Self.message, key: "👍")
        try await conversation.react(to: Self.message, key: "👍")
        #expect(homeserver.requests == ["PUT send m.reaction", "PUT redact $reaction-1", "PUT send m.reaction"])
        try await conversation.timeline.wait { Self.reactions(in: $0) == [thumbsUp] }
        await chat.stop()
    }

    @Test("A refused unreact of a reaction sync has not brought yet shows the reaction again and keeps its event")
    func refusedUnreactBeforeSync() async throws {
        let (chat, conversation, stop) = try await observedConversation()
        defer { stop() }
        let thumbsUp = ReactionSummary(key: "👍", senders: [Self.me], includesOwn: true)
        try await conversation.react(to: Self.message, key: "👍")
        homeserver.answerRedactions(with: 403)

        await #expect(throws: ChatError.self) { try await conversation.unreact(to: Self.message, key: "👍") }
        try await conversation.timeline.wait { Self.reactions(in: $0) == [thumbsUp] }
        homeserver.answerRedactions(with: 200)
        try await conversation.unreact(to: Self.message, key: "👍")
        #expect(
            homeserver.requests == ["PUT send m.reaction", "PUT redact $reaction-1", "PUT redact $reaction-1"])
        await chat.stop()
    }

    // MARK: Samples

    static func reactions(in items: [TimelineItem]) -> [ReactionSummary]? {
        items.first { $0.eventID == message }?.reactions
    }

    static func readers(of items: [TimelineItem]) -> [UserID] {
        items.first { $0.eventID == message }?.readBy ?? []
    }

    /// A `/sync` batch for `room` (this suite's by default), `limited` from `prevBatch` when given.
    static func sync(
        _ batch: String, _ events: [String], receipts: String? = nil, limitedFrom prevBatch: String? = nil,
        room: RoomID = roomID
    ) -> [UInt8] {
        let ephemeral = receipts.map { #", "ephemeral": {"events": [\#($0)]}"# } ?? ""
        let limited = prevBatch.map { #""limited": true, "prev_batch": "\#($0)""# } ?? #""limited": false"#
        return Array(
            #"""
            {"next_batch": "\#(batch)", "rooms": {"join": {"\#(room.rawValue)": {
              "timeline": {"events": [\#(events.joined(separator: ", "))], \#(limited)}\#(ephemeral)
            }}}}
            """#.utf8)
    }

    static func member(_ user: String, id: String) -> String {
        #"{"type": "m.room.member", "state_key": "\#(user)", "event_id": "\#(id)", "sender": "\#(user)", "origin_server_ts": 1, "content": {"membership": "join"}}"#
    }

    static func text(id: String, from sender: String, body: String) -> String {
        #"{"type": "m.room.message", "event_id": "\#(id)", "sender": "\#(sender)", "origin_server_ts": 2, "content": {"msgtype": "m.text", "body": "\#(body)"}}"#
    }

    static func reaction(id: String, to target: String) -> String {
        #"{"type": "m.reaction", "event_id": "\#(id)", "sender": "\#(me.rawValue)", "origin_server_ts": 3, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "\#(target)", "key": "👍"}}}"#
    }

    static func redaction(id: String, of target: String) -> String {
        #"{"type": "m.room.redaction", "event_id": "\#(id)", "sender": "\#(me.rawValue)", "origin_server_ts": 4, "redacts": "\#(target)", "content": {}}"#
    }

    static func receipt(on eventID: String, ts: Int, user: String = "@alice:example.org") -> String {
        #"{"type": "m.receipt", "content": {"\#(eventID)": {"m.read": {"\#(user)": {"ts": \#(ts)}}}}}"#
    }
}
