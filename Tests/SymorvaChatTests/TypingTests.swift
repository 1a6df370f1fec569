import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// Typing notices as an app sends them, on every keystroke: the room hears one per renewal
/// interval, stopping only after typing, and a failure lets the next call send again.
@Suite("Typing notices: renewed while typing, one request per interval")
struct TypingTests {
    static let roomID = RoomID("!typing:example.org")
    static let me = UserID("@me:example.org")
    static let path = "/_matrix/client/v3/rooms/!typing:example.org/typing/@me:example.org"

    let transport = ScriptedHTTPTransport()
    let clock = ManualClock()
    /// The status the next typing request gets.
    let status = Lock(200)

    init() {
        let status = status
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/rooms/!typing:example.org/typing/") { _ in
            let code = status.withLock { $0 }
            return code == 200 ? .json(200, "{}") : .json(code, #"{"errcode":"M_UNKNOWN","error":"down"}"#)
        }
    }

    func conversation() async throws -> Conversation {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Array(
                #"{"next_batch":"b1","rooms":{"join":{"!typing:example.org":{"timeline":{"events":[{"type":"m.room.member","state_key":"@me:example.org","event_id":"$me","sender":"@me:example.org","origin_server_ts":1,"content":{"membership":"join"}}]}}}}}"#
                    .utf8))
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Self.me, accessToken: Secret("token"),
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Self.me.rawValue),
            clock: clock, tracer: Tracer())
        return try await chat.conversation(id: Self.roomID)
    }

    /// The `typing` values the room was sent, in order.
    var sent: [Bool] {
        transport.requests.filter { $0.url.path == Self.path }.map {
            String(decoding: $0.body, as: UTF8.self).contains(#""typing":true"#)
        }
    }

    @Test(
        "Keystrokes within the renewal interval send one notice; after it, another; stop once; stop without typing sends nothing"
    )
    func renewal() async throws {
        let room = try await conversation()
        try await room.setTyping(false)
        #expect(sent == [], "never said typing: nothing to stop")
        for _ in 0..<5 { try await room.setTyping(true) }
        #expect(sent == [true])
        await clock.advance(by: Conversation.typingRenewal - .seconds(1))
        try await room.setTyping(true)
        #expect(sent == [true])
        await clock.advance(by: .seconds(1))
        try await room.setTyping(true)
        #expect(sent == [true, true], "renewed before the server's timeout runs out")
        #expect(Conversation.typingRenewal < Conversation.typingTimeout)
        try await room.setTyping(false)
        try await room.setTyping(false)
        #expect(sent == [true, true, false])
        try await room.setTyping(true)
        #expect(sent == [true, true, false, true], "typing again after stopping is sent at once")
    }

    @Test("A refused notice is an error, and the next keystroke sends again")
    func failureSendsAgain() async throws {
        let room = try await conversation()
        status.withLock { $0 = 500 }
        await #expect(throws: ChatError.self) { try await room.setTyping(true) }
        status.withLock { $0 = 200 }
        try await room.setTyping(true)
        #expect(sent == [true, true])
        status.withLock { $0 = 500 }
        await #expect(throws: ChatError.self) { try await room.setTyping(false) }
        status.withLock { $0 = 200 }
        try await room.setTyping(false)
        #expect(sent == [true, true, false, false], "a stop that failed is sent again")
    }
}
