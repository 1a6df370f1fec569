import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// A stand-in for the crypto module's two sides (the real one is `SymorvaE2EE`, tested against
/// Synapse): it "encrypts" and seals by flipping every byte, so a test can tell whether
/// something written or sent still holds the plaintext, and recognises what it sealed.
final class FlippingRoomCrypto: RoomEncryptor, RoomDecryptor {
    let encrypted = Lock<[RoomID]>([])
    /// The recipients of each encryption (``EncryptedRoom/recipients``).
    let recipients = Lock<[[UserID]]>([])
    /// Whether the "room key" is there: without it every decryption waits (`nil`).
    let hasKey = Lock(true)
    /// How many decryptions were asked for.
    let decryptions = Lock(0)
    /// The sending device's trust the decryptor reports (the chat store's name), if any.
    let senderTrust = Lock<String?>(nil)
    /// Senders whose device is not trusted: their events are refused until it is.
    let untrustedSenders = Lock<Set<String>>([])

    static func flipped(_ bytes: [UInt8]) -> [UInt8] { bytes.map { $0 ^ 0x5A } }

    func encrypt(_ content: MessageContent, in room: EncryptedRoom) async throws(SendError) -> MessageContent {
        encrypted.withLock { $0.append(room.roomID) }
        recipients.withLock { $0.append(room.recipients) }
        let ciphertext = Data(Self.flipped(Array(content.json.utf8))).base64EncodedString()
        return MessageContent(
            eventType: "m.room.encrypted",
            json: #"{"algorithm":"m.megolm.v1.aes-sha2","ciphertext":"\#(ciphertext)"}"#)
    }

    func seal(_ content: [UInt8], transactionID: TransactionID) -> [UInt8]? {
        Self.flipped(content) + Array("|\(transactionID.rawValue)".utf8)
    }

    func open(_ sealed: [UInt8], transactionID: TransactionID) -> [UInt8]? {
        let suffix = Array("|\(transactionID.rawValue)".utf8)
        guard sealed.count >= suffix.count, Array(sealed.suffix(suffix.count)) == suffix else { return nil }
        return Self.flipped(Array(sealed.dropLast(suffix.count)))
    }

    func decrypt(_ content: [UInt8], in roomID: RoomID, eventID: EventID, sender: UserID) async -> DecryptionOutcome? {
        decryptions.withLock { $0 += 1 }
        guard hasKey.withLock({ $0 }) else { return nil }
        if untrustedSenders.withLock({ $0.contains(sender.rawValue) }) {
            return .refusedUntilSenderTrusted(reason: UnableToDecryptReason.senderNotCrossSigned.rawValue)
        }
        guard let ciphertext = RawJSON.string("ciphertext", in: content), let data = Data(base64Encoded: ciphertext)
        else { return nil }
        return .decrypted(
            type: "m.room.message", content: data.map { $0 } + Array("|\(eventID.rawValue)".utf8),
            senderKey: "curve", senderDevice: "ALICEDEVICE", deviceKnown: true,
            senderTrust: senderTrust.withLock { $0 })
    }

    func open(_ sealed: [UInt8], eventID: EventID) -> [UInt8]? {
        open(sealed, transactionID: TransactionID(eventID.rawValue))
    }

    /// The rooms whose keys were asked for again, and how many requests each is to send.
    let askedAgain = Lock<[RoomID]>([])
    let requestsToResend = Lock(0)

    func requestKeysAgain(in roomID: RoomID) async throws(StoreError) -> Int {
        askedAgain.withLock { $0.append(roomID) }
        return requestsToResend.withLock { $0 }
    }
}

extension SendReceipt {
    /// Waits until the receipt says sent.
    func sent() async throws {
        try await state.wait { state in
            if case .sent = state { return true }
            return false
        }
    }
}

/// How a conversation knows whether its room is encrypted, and that what the member writes
/// there is never in the clear: not on the wire, not in the store.
@Suite("Conversation encryption state, and sealed queued messages")
struct ConversationEncryptionTests {
    static let roomID = RoomID("!vault:example.org")
    static let me = UserID("@me:example.org")
    static let encryptionStatePath = "/_matrix/client/v3/rooms/!vault:example.org/state/m.room.encryption"
    static let membersPath = "/_matrix/client/v3/rooms/!vault:example.org/members"

    let transport = ScriptedHTTPTransport()
    let crypto = FlippingRoomCrypto()

    init() {
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/rooms/!vault:example.org/send/") { request in
            .json(200, #"{"event_id": "$sent-\#(request.url.path.split(separator: "/").last ?? "")"}"#)
        }
        // The room's members as the server has them: Bob too, whom lazy loading left out.
        transport.on("GET", Self.membersPath) { _ in
            .json(
                200,
                #"{"chunk": [{"type": "m.room.member", "state_key": "@me:example.org", "event_id": "$join-me", "sender": "@me:example.org", "origin_server_ts": 1, "content": {"membership": "join"}}, {"type": "m.room.member", "state_key": "@bob:example.org", "event_id": "$join-bob", "sender": "@bob:example.org", "origin_server_ts": 2, "content": {"membership": "join"}}]}"#
            )
        }
    }

    func chat(on store: ChatStore) -> AccountChat {
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Self.me, accessToken: Secret("token"),
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Self.me.rawValue),
            clock: ManualClock(), tracer: Tracer())
        chat.setEncryptor(crypto)
        chat.setDecryptor(crypto)
        return chat
    }

    /// A store holding the room: only our membership (its state not synced, as right after a
    /// join) or its full state, with or without `m.room.encryption`.
    func store(fullState: Bool, encrypted: Bool = false) async throws -> ChatStore {
        let store = try await ChatStore.open(path: ":memory:")
        var events = [ConversationReactionTests.member(Self.me.rawValue, id: "$join-me")]
        if fullState {
            events.insert(
                #"{"type": "m.room.create", "state_key": "", "event_id": "$create", "sender": "@me:example.org", "origin_server_ts": 1, "content": {"room_version": "10"}}"#,
                at: 0)
        }
        if encrypted {
            events.append(Self.encryptionEvent)
        }
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b1", events))
        return store
    }

    static let encryptionEvent =
        #"{"type": "m.room.encryption", "state_key": "", "event_id": "$encryption", "sender": "@me:example.org", "origin_server_ts": 2, "content": {"algorithm": "m.megolm.v1.aes-sha2"}}"#

    static func sync(_ batch: String, _ events: [String]) -> [UInt8] {
        Array(
            #"""
            {"next_batch": "\#(batch)", "rooms": {"join": {"\#(roomID.rawValue)": {
              "timeline": {"events": [\#(events.joined(separator: ", "))], "limited": false}
            }}}}
            """#.utf8)
    }

    /// The event types the room's sends went out as, in order.
    var sentTypes: [String] {
        transport.requests.compactMap { request in
            let path = request.url.path.split(separator: "/").map(String.init)
            guard request.method == .put, path.count > 6, path[5] == "send" else { return nil }
            return path[6]
        }
    }

    var sentBodies: String {
        transport.requests.filter { $0.method == .put }.map { String(decoding: $0.body, as: UTF8.self) }
            .joined(separator: "\n")
    }

    @Test(
        "A room whose state has not synced is unknown; a send asks the server, which says encrypted: it leaves encrypted"
    )
    func unknownThenEncryptedByTheServer() async throws {
        transport.on("GET", Self.encryptionStatePath) { _ in .json(200, #"{"algorithm": "m.megolm.v1.aes-sha2"}"#) }
        let chat = chat(on: try await store(fullState: false))
        let conversation = try await chat.conversation(id: Self.roomID)
        #expect(conversation.encryption.value == .unknown)

        let receipt = try await conversation.send(.text("the vault code"))
        try await receipt.sent()
        #expect(conversation.encryption.value == .encrypted)
        #expect(sentTypes == ["m.room.encrypted"])
        #expect(!sentBodies.contains("vault code"))
        #expect(crypto.encrypted.withLock { $0 } == [Self.roomID])
        // Only our membership was stored (as right after a join): the key's recipients come
        // from the server's member list.
        #expect(crypto.recipients.withLock { $0 } == [[Self.me, UserID("@bob:example.org")].sorted()])
        // Asked once; the next message needs no question.
        try await conversation.send(.text("again")).sent()
        #expect(transport.count("GET", Self.encryptionStatePath) == 1)
        #expect(transport.count("GET", Self.membersPath) == 1)
        #expect(sentTypes == ["m.room.encrypted", "m.room.encrypted"])
    }

    @Test("Unknown, and the server has no m.room.encryption (404): plaintext, and the room is not encrypted")
    func unknownThenPlaintext() async throws {
        let chat = chat(on: try await store(fullState: false))
        let conversation = try await chat.conversation(id: Self.roomID)
        let receipt = try await conversation.send(.text("hello"))
        try await receipt.sent()
        #expect(conversation.encryption.value == .notEncrypted)
        #expect(sentTypes == ["m.room.message"])
        #expect(transport.count("GET", Self.encryptionStatePath) == 1)
    }

    @Test("Unknown, and the server cannot be asked: the send fails with a typed error, nothing is queued or sent")
    func unknownAndUnreachable() async throws {
        transport.on("GET", Self.encryptionStatePath) { _ in .failure(.connectFailed) }
        let chat = chat(on: try await store(fullState: false))
        let conversation = try await chat.conversation(id: Self.roomID)
        await #expect(throws: ChatError.network) { _ = try await conversation.send(.text("not in the clear")) }
        #expect(conversation.encryption.value == .unknown)
        #expect(try await chat.store.queuedMessages().isEmpty)
        #expect(sentTypes.isEmpty)
    }

    @Test(
        "Full state without m.room.encryption is notEncrypted without asking; its state event arriving makes it encrypted for good"
    )
    func syncedStateDecides() async throws {
        let chat = chat(on: try await store(fullState: true))
        let conversation = try await chat.conversation(id: Self.roomID)
        #expect(conversation.encryption.value == .notEncrypted)
        try await conversation.send(.text("plain")).sent()

        _ = try await SyncIngestor(store: chat.store).ingest(Self.sync("b2", [Self.encryptionEvent]))
        var change = SyncChanges.Room(roomID: Self.roomID, membership: .joined)
        change.encryptionEnabled = true
        await conversation.apply(change)
        #expect(conversation.encryption.value == .encrypted)
        try await conversation.send(.text("sealed")).sent()
        #expect(sentTypes == ["m.room.message", "m.room.encrypted"])
        // A later state event without an algorithm does not turn it off.
        _ = try await SyncIngestor(store: chat.store).ingest(
            Self.sync(
                "b3",
                [
                    #"{"type": "m.room.encryption", "state_key": "", "event_id": "$off", "sender": "@me:example.org", "origin_server_ts": 3, "content": {}}"#
                ]))
        await conversation.refreshEncryption()
        #expect(conversation.encryption.value == .encrypted)
        #expect(try await chat.store.encryptionKnowledge(roomID: Self.roomID)?.isEncrypted == true)
        #expect(transport.count("GET", Self.encryptionStatePath) == 0)
    }

    @Test("A message queued for an encrypted room is stored sealed; a restart opens it and sends the same ciphertext")
    func queuedContentIsSealed() async throws {
        // The first attempt fails (503): the message stays queued, encrypted and stored.
        transport.on(
            "PUT", pathPrefix: "/_matrix/client/v3/rooms/!vault:example.org/send/",
            ScriptedHTTPTransport.sequence([.json(503, #"{"errcode": "M_UNKNOWN"}"#)]))
        let store = try await store(fullState: true, encrypted: true)
        let chat = chat(on: store)
        let conversation = try await chat.conversation(id: Self.roomID)
        #expect(conversation.encryption.value == .encrypted)
        let receipt = try await conversation.send(.text("launch code 0000"))
        try await conversation.sendQueue.states.wait { state in
            if case .waitingRetry = state.status { return true }
            return false
        }
        let rows = try await store.queuedMessages()
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row.contentIsSealed)
        #expect(!String(decoding: row.content, as: UTF8.self).contains("launch code"))
        #expect(row.encryptedContent != nil)
        let raw = try await store.databaseForTesting.queryAll("SELECT content FROM send_queue") { $0.blob(0) }
        #expect(raw.allSatisfy { !String(decoding: $0, as: UTF8.self).contains("launch code") })
        #expect(receipt.state.value == .sending)
        await chat.stop()

        // Another run on the same store: the queue holds the plaintext in memory only, and the
        // stored ciphertext goes out under the same transaction ID.
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/rooms/!vault:example.org/send/") { request in
            .json(200, #"{"event_id": "$sent-\#(request.url.path.split(separator: "/").last ?? "")"}"#)
        }
        let again = self.chat(on: store)
        let restored = try await again.conversation(id: Self.roomID)
        let item = try #require(await restored.sendQueue.currentState.items.first)
        #expect(item.transactionID.rawValue == row.transactionID)
        #expect(item.content.json.contains("launch code 0000"))
        #expect(item.encryptedContent?.json == row.encryptedContent.map { String(decoding: $0, as: UTF8.self) })
        try await restored.sendQueue.states.wait {
            $0.items.allSatisfy { if case .sent = $0.status { true } else { false } }
        }
        let puts = transport.requests.filter { $0.method == .put }
        #expect(puts.count == 2)
        #expect(Set(puts.map(\.url.path)).count == 1, "the retry reuses the transaction ID")
        #expect(Set(puts.map(\.body)).count == 1, "the retry sends the same ciphertext")
        #expect(crypto.encrypted.withLock { $0.count } == 1, "encrypted once")
    }

    @Test("Without an encryptor a message to an encrypted room is refused at once: nothing stored in the clear")
    func noEncryptor() async throws {
        let store = try await store(fullState: true, encrypted: true)
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Self.me, accessToken: Secret("token"),
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Self.me.rawValue),
            clock: ManualClock(), tracer: Tracer())
        let conversation = try await chat.conversation(id: Self.roomID)
        await #expect(throws: ChatError.encryptionUnavailable) { _ = try await conversation.send(.text("secret")) }
        #expect(try await store.queuedMessages().isEmpty)
        #expect(sentTypes.isEmpty)
        await #expect(throws: ChatError.encryptionUnavailable) { try await conversation.requestMissingKeys() }
    }

    @Test("requestMissingKeys asks the crypto module to send the room's unanswered key requests again")
    func requestMissingKeysAgain() async throws {
        let chat = chat(on: try await store(fullState: true, encrypted: true))
        let conversation = try await chat.conversation(id: Self.roomID)
        crypto.requestsToResend.withLock { $0 = 2 }
        #expect(try await conversation.requestMissingKeys() == 2)
        #expect(crypto.askedAgain.withLock { $0 } == [Self.roomID])
    }

    @Test("enableEncryption sends m.room.encryption (Megolm, rotation stated) and the room is encrypted from then on")
    func enableEncryption() async throws {
        transport.on("PUT", Self.encryptionStatePath) { _ in .json(200, #"{"event_id": "$enc"}"#) }
        let chat = chat(on: try await store(fullState: true))
        let conversation = try await chat.conversation(id: Self.roomID)
        #expect(conversation.encryption.value == .notEncrypted)
        try await conversation.enableEncryption()
        #expect(conversation.encryption.value == .encrypted)
        let put = try #require(transport.requests.first { $0.url.path == Self.encryptionStatePath })
        let body = try #require(try JSONSerialization.jsonObject(with: Data(put.body)) as? [String: Any])
        #expect(body["algorithm"] as? String == "m.megolm.v1.aes-sha2")
        #expect(body["rotation_period_msgs"] as? Int == 100)
        try await conversation.send(.text("from now on")).sent()
        #expect(sentTypes == ["m.room.encrypted"])
        // Already encrypted: nothing more to send.
        try await conversation.enableEncryption()
        #expect(transport.count("PUT", Self.encryptionStatePath) == 1)
    }

    @Test("enableEncryption refused (403) throws the server's error and leaves the room as it was")
    func enableEncryptionRefused() async throws {
        transport.on("PUT", Self.encryptionStatePath) { _ in .json(403, #"{"errcode": "M_FORBIDDEN", "error": "no"}"#) }
        let chat = chat(on: try await store(fullState: true))
        let conversation = try await chat.conversation(id: Self.roomID)
        await #expect(throws: ChatError.server(status: 403, errorCode: "M_FORBIDDEN")) {
            try await conversation.enableEncryption()
        }
        #expect(conversation.encryption.value == .notEncrypted)
    }

    @Test("The conversation list previews a decrypted latest message, opened in memory; the store keeps it sealed")
    func decryptedPreview() async throws {
        let store = try await store(fullState: true, encrypted: true)
        let ciphertext = Data(FlippingRoomCrypto.flipped(Array(#"{"msgtype":"m.text","body":"see you at noon"}"#.utf8)))
            .base64EncodedString()
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "b2",
                [
                    #"{"type": "m.room.encrypted", "event_id": "$secret", "sender": "@alice:example.org", "origin_server_ts": 5, "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "\#(ciphertext)"}}"#
                ]))
        let chat = chat(on: store)
        await chat.decryptPending()
        let item = try #require(chat.conversations.value.items.first { $0.id == Self.roomID })
        #expect(item.lastMessage?.body == "see you at noon")
        #expect(item.lastMessage?.type == "m.room.message")
        #expect(item.lastMessage?.messageType == "m.text")
        let stored = try await store.databaseForTesting.queryAll("SELECT preview_body FROM rooms") {
            $0.optionalString(0)
        }
        #expect(stored == [nil])
        let sealed = try await store.databaseForTesting.queryAll("SELECT content FROM decrypted_events") { $0.blob(0) }
        #expect(sealed.count == 1 && !String(decoding: sealed[0], as: UTF8.self).contains("noon"))
    }

    static func encryptedEvent(_ index: Int, body: String) -> String {
        let ciphertext = Data(FlippingRoomCrypto.flipped(Array(#"{"msgtype":"m.text","body":"\#(body)"}"#.utf8)))
            .base64EncodedString()
        return
            #"{"type": "m.room.encrypted", "event_id": "$e\#(index)", "sender": "@alice:example.org", "origin_server_ts": \#(10 + index), "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "\#(ciphertext)"}}"#
    }

    @Test("Our own message's remote echo shows what we wrote at once, before the decryption pass has read it")
    func ownEchoNeverUndecryptable() async throws {
        let store = try await store(fullState: true, encrypted: true)
        crypto.hasKey.withLock { $0 = false }  // the decryption pass cannot read it (yet)
        let chat = chat(on: store)
        let conversation = try await chat.conversation(id: Self.roomID)
        let stop = conversation.timeline.subscribe { _ in }
        defer { stop() }
        let receipt = try await conversation.send(.text("on my way"))
        try await receipt.sent()
        guard case .sent(let eventID) = receipt.state.value else { throw TestFailure("not sent") }
        let transactionID = try #require(receipt.transactionIDs.first)
        let ciphertext = Data(FlippingRoomCrypto.flipped(Array(#"{"msgtype":"m.text","body":"on my way"}"#.utf8)))
            .base64EncodedString()
        let echo =
            #"{"type": "m.room.encrypted", "event_id": "\#(eventID.rawValue)", "sender": "\#(Self.me.rawValue)", "origin_server_ts": 30, "unsigned": {"transaction_id": "\#(transactionID.rawValue)"}, "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "\#(ciphertext)"}}"#
        // Stored and handed to the conversation, as the sync loop's commit does.
        let body = try SyncResponseDecoder.decode(Self.sync("b2", [echo]))
        _ = try await SyncIngestor(store: store).ingest(body)
        for room in SyncChanges(body).rooms { await conversation.apply(room) }
        try await conversation.timeline.wait { $0.contains { $0.eventID == eventID } }
        let shown = conversation.timeline.value.first { $0.eventID == eventID }?.content
        guard case .message(_, let body)? = shown else {
            Issue.record("our own message shows as \(String(describing: shown))")
            return
        }
        #expect(body == "on my way")
        // The store still holds nothing of it in the clear.
        let rows = try await store.databaseForTesting.queryAll("SELECT content FROM decrypted_events") { $0.blob(0) }
        #expect(rows.count == 1 && !String(decoding: rows[0], as: UTF8.self).contains("on my way"))
    }

    @Test("The room as the crypto module gets it: joined and invited members, history visibility, rotation")
    func encryptedRoomFromState() async throws {
        let store = try await store(fullState: true)
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "b2",
                [
                    #"{"type": "m.room.encryption", "state_key": "", "event_id": "$enc", "sender": "@me:example.org", "origin_server_ts": 3, "content": {"algorithm": "m.megolm.v1.aes-sha2", "rotation_period_ms": 7200000, "rotation_period_msgs": 20}}"#,
                    #"{"type": "m.room.history_visibility", "state_key": "", "event_id": "$hv", "sender": "@me:example.org", "origin_server_ts": 4, "content": {"history_visibility": "joined"}}"#,
                    #"{"type": "m.room.member", "state_key": "@carol:example.org", "event_id": "$inv", "sender": "@me:example.org", "origin_server_ts": 5, "content": {"membership": "invite"}}"#,
                    #"{"type": "m.room.member", "state_key": "@dave:example.org", "event_id": "$left", "sender": "@dave:example.org", "origin_server_ts": 6, "content": {"membership": "leave"}}"#,
                ]))
        let room = try #require(try await store.encryptedRoom(Self.roomID))
        #expect(room.joined == [Self.me])
        #expect(room.invited == ["@carol:example.org"])
        #expect(room.historyVisibility == "joined")
        #expect(room.rotationPeriodMilliseconds == 7_200_000)
        #expect(room.rotationPeriodMessages == 20)
        #expect(room.recipients == [Self.me])
        #expect(try await store.encryptedRoom(RoomID("!unknown:example.org")) == nil)
    }

    @Test("/members fills in the members the store lacks and corrects older ones; a newer stored member stays")
    func membersFromServer() async throws {
        let store = try await store(fullState: true)
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "b2",
                [
                    #"{"type": "m.room.member", "state_key": "@carol:example.org", "event_id": "$carol-join", "sender": "@carol:example.org", "origin_server_ts": 50, "content": {"membership": "join"}}"#,
                    #"{"type": "m.room.member", "state_key": "@dave:example.org", "event_id": "$dave-join", "sender": "@dave:example.org", "origin_server_ts": 5, "content": {"membership": "join"}}"#,
                ]))
        // The server's list: Bob (unknown here), Carol's older invite (a sync committed her join
        // after the server answered), Dave's newer leave, and a non-member event (ignored).
        let members = Array(
            #"""
            {"chunk": [
              {"type": "m.room.member", "state_key": "@bob:example.org", "event_id": "$bob", "sender": "@bob:example.org", "origin_server_ts": 40, "content": {"membership": "join"}},
              {"type": "m.room.member", "state_key": "@carol:example.org", "event_id": "$carol-invite", "sender": "@me:example.org", "origin_server_ts": 30, "content": {"membership": "invite"}},
              {"type": "m.room.member", "state_key": "@dave:example.org", "event_id": "$dave-leave", "sender": "@dave:example.org", "origin_server_ts": 60, "content": {"membership": "leave"}},
              {"type": "m.room.topic", "state_key": "", "event_id": "$topic", "sender": "@me:example.org", "origin_server_ts": 70, "content": {"topic": "x"}}
            ]}
            """#.utf8)
        let changed = try await store.storeMembers(
            roomID: Self.roomID, page: SyncResponseDecoder.decodeMessages(members))
        #expect(changed == 2)
        let room = try #require(try await store.encryptedRoom(Self.roomID))
        #expect(room.joined == ["@bob:example.org", "@carol:example.org", Self.me])
        #expect(
            try await store.storeMembers(roomID: RoomID("!unknown:example.org"), page: MessagesPage()) == nil)
    }

    @Test("An encrypted edit (its relation in the clear, its new content encrypted) shows in place of the original")
    func encryptedEditInPlace() async throws {
        let store = try await store(fullState: true, encrypted: true)
        let newContent =
            #"{"msgtype":"m.text","body":"* see you at one","m.new_content":{"msgtype":"m.text","body":"see you at one"}}"#
        let ciphertext = Data(FlippingRoomCrypto.flipped(Array(newContent.utf8))).base64EncodedString()
        let edit =
            #"{"type": "m.room.encrypted", "event_id": "$edit", "sender": "@alice:example.org", "origin_server_ts": 20, "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "\#(ciphertext)", "m.relates_to": {"rel_type": "m.replace", "event_id": "$e1"}}}"#
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync("b2", [Self.encryptedEvent(1, body: "see you at noon"), edit]))
        let chat = chat(on: store)
        await chat.decryptPending()
        let conversation = try await chat.conversation(id: Self.roomID)
        let stop = conversation.timeline.subscribe { _ in }
        defer { stop() }
        try await conversation.timeline.wait { $0.contains { $0.eventID == EventID("$e1") && $0.isEdited } }
        let items = conversation.timeline.value
        #expect(!items.contains { $0.eventID == EventID("$edit") }, "the edit is not a row of its own")
        let original = items.first { $0.eventID == EventID("$e1") }
        guard case .message(_, let body)? = original?.content else {
            Issue.record("not a message: \(String(describing: original?.content))")
            return
        }
        #expect(body == "see you at one")
    }

    @Test(
        "The sending device's trust at decryption is kept with the event: a message from a device not cross-signed is marked, later ones as they were read"
    )
    func senderTrustAtDecryption() async throws {
        let store = try await store(fullState: true, encrypted: true)
        crypto.senderTrust.withLock { $0 = SenderDeviceTrust.notCrossSigned.rawValue }
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b2", [Self.encryptedEvent(1, body: "before")]))
        let chat = chat(on: store)
        await chat.decryptPending()
        // Alice's device is cross-signed from then on: what was read before keeps its mark.
        crypto.senderTrust.withLock { $0 = SenderDeviceTrust.crossSigned.rawValue }
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b3", [Self.encryptedEvent(2, body: "after")]))
        await chat.decryptPending()
        crypto.senderTrust.withLock { $0 = nil }
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b4", [Self.encryptedEvent(3, body: "unsaid")]))
        await chat.decryptPending()
        let conversation = try await chat.conversation(id: Self.roomID)
        let stop = conversation.timeline.subscribe { _ in }
        defer { stop() }
        try await conversation.timeline.wait { items in
            [EventID("$e1"), EventID("$e2"), EventID("$e3")].allSatisfy { id in
                items.contains { $0.eventID == id && $0.encryption != nil }
            }
        }
        let items = conversation.timeline.value
        let first = try #require(items.first { $0.eventID == EventID("$e1") }?.encryption)
        let second = try #require(items.first { $0.eventID == EventID("$e2") }?.encryption)
        let third = try #require(items.first { $0.eventID == EventID("$e3") }?.encryption)
        #expect(first.senderTrust == .notCrossSigned && first.isFromDeviceNotCrossSigned)
        #expect(second.senderTrust == .crossSigned && !second.isFromDeviceNotCrossSigned)
        #expect(third.senderTrust == nil && !third.isFromDeviceNotCrossSigned, "not recorded: not marked")
        let stored = try await store.databaseForTesting.queryAll(
            "SELECT event_id, sender_trust FROM decrypted_events ORDER BY event_id"
        ) { "\($0.string(0))=\($0.optionalString(1) ?? "NULL")" }
        #expect(stored == ["$e1=notCrossSigned", "$e2=crossSigned", "$e3=NULL"])
    }

    @Test("An event without its key is tried once, then waits for keys; when keys arrive it is decrypted")
    func waitsForKeys() async throws {
        let store = try await store(fullState: true, encrypted: true)
        crypto.hasKey.withLock { $0 = false }
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b2", [Self.encryptedEvent(1, body: "later")]))
        let chat = chat(on: store)  // setting the decryptor starts the first pass
        let database = store.databaseForTesting
        let deadline = ContinuousClock.now + TestWaiting.defaultTimeout
        while try await database.queryOne("SELECT waiting FROM pending_decryption", [], { $0.int(0) }) != 1,
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(10))
        }
        await chat.decryptPending(continuing: false)
        #expect(crypto.decryptions.withLock { $0 } == 1, "tried again without new keys")
        #expect(try await store.undecryptedEvents(limit: 10).isEmpty, "it waits for keys")

        crypto.hasKey.withLock { $0 = true }
        chat.roomKeysArrived()
        try await chat.conversations.wait {
            $0[Self.roomID]?.lastMessage?.body == "later"
        }
        #expect(
            try await store.databaseForTesting.queryOne("SELECT COUNT(*) FROM pending_decryption") { $0.int(0) } == 0)
    }

    @Test(
        "A message refused while its sender's device is not trusted shows senderNotCrossSigned, and reads once that sender's devices are queried and the device is trusted; other senders' refusals stay"
    )
    func refusedUntilSenderTrusted() async throws {
        let store = try await store(fullState: true, encrypted: true)
        crypto.untrustedSenders.withLock { $0 = ["@alice:example.org", "@carol:example.org"] }
        let carols = Self.encryptedEvent(2, body: "from carol").replacingOccurrences(
            of: "@alice:example.org", with: "@carol:example.org")
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync("b2", [Self.encryptedEvent(1, body: "from alice"), carols]))
        let chat = chat(on: store)
        await chat.decryptPending(continuing: false)
        let conversation = try await chat.conversation(id: Self.roomID)
        let stop = conversation.timeline.subscribe { _ in }
        defer { stop() }
        try await conversation.timeline.wait { items in
            [EventID("$e1"), EventID("$e2")].allSatisfy { id in
                items.contains { $0.eventID == id && $0.content == .unableToDecrypt(.senderNotCrossSigned) }
            }
        }
        let database = store.databaseForTesting
        #expect(try await store.undecryptedEvents(limit: 10).isEmpty, "refused: not tried at every pass")
        #expect(try await database.queryOne("SELECT COUNT(*) FROM pending_decryption") { $0.int(0) } == 2)
        let tried = crypto.decryptions.withLock { $0 }

        // Alice's device is cross-signed; a query of someone else does not touch her message.
        crypto.untrustedSenders.withLock { $0 = ["@carol:example.org"] }
        chat.senderDevicesUpdated([UserID("@bob:example.org")])
        await chat.decryptPending(continuing: false)
        #expect(crypto.decryptions.withLock { $0 } == tried)
        // Her devices queried: her message is tried again and reads; Carol's stays refused.
        chat.senderDevicesUpdated([UserID("@alice:example.org")])
        try await conversation.timeline.wait { items in
            items.contains { $0.eventID == EventID("$e1") && $0.content == .message(.text, body: "from alice") }
        }
        #expect(crypto.decryptions.withLock { $0 } == tried + 1)
        #expect(
            conversation.timeline.value.first { $0.eventID == EventID("$e2") }?.content
                == .unableToDecrypt(.senderNotCrossSigned))
        let refused = try await database.queryAll("SELECT event_id FROM undecryptable_events") { $0.string(0) }
        #expect(refused == ["$e2"])
        #expect(try await database.queryOne("SELECT COUNT(*) FROM pending_decryption") { $0.int(0) } == 1)
    }

    @Test("A backlog larger than a pass drains pass after pass, and the query reads only what is pending")
    func backlogDrains() async throws {
        let store = try await store(fullState: true, encrypted: true)
        let count = ChatClientPassSize.value * 2 + 37
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync("b2", (0..<count).map { Self.encryptedEvent($0, body: "message \($0)") }))
        #expect(try await store.undecryptedEvents(limit: .max).count == count)
        let chat = chat(on: store)  // setting the decryptor starts the first pass
        let database = store.databaseForTesting
        let deadline = ContinuousClock.now + TestWaiting.defaultTimeout
        while try await database.queryOne("SELECT COUNT(*) FROM pending_decryption", [], { $0.int(0) }) != 0,
            ContinuousClock.now < deadline
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try await database.queryOne("SELECT COUNT(*) FROM decrypted_events") { $0.int(0) } == count)
        #expect(crypto.decryptions.withLock { $0 } == count, "each event decrypted once")
        _ = chat
    }

    @Test("A redacted encrypted event leaves the pending list")
    func redactedLeavesPending() async throws {
        let store = try await store(fullState: true, encrypted: true)
        _ = try await SyncIngestor(store: store).ingest(Self.sync("b2", [Self.encryptedEvent(1, body: "oops")]))
        #expect(try await store.undecryptedEvents(limit: 10).count == 1)
        _ = try await SyncIngestor(store: store).ingest(
            Self.sync(
                "b3",
                [
                    #"{"type": "m.room.redaction", "event_id": "$r1", "sender": "@alice:example.org", "origin_server_ts": 50, "redacts": "$e1", "content": {}}"#
                ]))
        #expect(try await store.undecryptedEvents(limit: 10).isEmpty)
    }
}

/// The chat's decryption pass size, for tests.
enum ChatClientPassSize {
    static var value: Int { AccountChat.decryptionPassSize }
}
