import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

@testable import SymorvaE2EE

/// Room key requests between two devices of one account, through their stores and engines
/// (no network: the to-device messages one writes are the rows the other's sync would store).
@Suite("Room key requests in the crypto store and engine")
struct KeyRequestEngineTests {
    let user = UserID("@alice:example.org")

    let fixture = EngineFixture()
    var driver: OlmCryptoDriver { fixture.driver }

    /// A device of the account, its account loaded.
    func device(_ deviceID: String) async throws -> EngineFixture.Device {
        try await fixture.device(user.rawValue, deviceID)
    }

    /// `device` as another device's store lists it after a `keys/query`.
    func listed(_ device: EngineFixture.Device) async throws -> CryptoStore.Device { try await device.listed() }

    /// Stores a to-device event in `device`'s database, as chat's sync ingest does.
    func deliver(type: String, sender: UserID, content: JSONValue, to device: EngineFixture.Device) async throws {
        try await fixture.deliver(type: type, sender: sender, content: content, to: device)
    }

    @Test("A request is recorded once per session; the key's arrival turns a sent request into a cancellation")
    func outgoingRequestLifecycle() async throws {
        let phone = try await device("PHONE")
        let store = phone.store
        #expect(
            try await store.recordKeyRequest(
                requestID: "r1", roomID: "!r:x", sessionID: "s1", senderKey: "k", sender: "@bob:example.org"))
        #expect(
            !(try await store.recordKeyRequest(
                requestID: "r2", roomID: "!r:x", sessionID: "s1", senderKey: "k", sender: "@bob:example.org")))
        #expect(
            try await store.recordKeyRequest(
                requestID: "r3", roomID: "!r:x", sessionID: "s2", senderKey: "k", sender: "@bob:example.org"))
        let pending = try await store.keyRequestsToSend()
        #expect(pending.map(\.requestID) == ["r1", "r3"])
        #expect(pending.allSatisfy { !$0.isCancellation })
        try await store.keyRequestLeft(pending[0])
        #expect(try await store.keyRequestsToSend().map(\.requestID) == ["r3"])
        #expect(try await store.hasOpenKeyRequest(roomID: "!r:x", sessionID: "s1"))

        // The keys arrive: the sent one must be cancelled, the unsent one is simply dropped.
        let session = try driver.newOutboundGroupSession()
        let inbound = try driver.inboundGroupSession(sessionKey: try session.sessionKey())
        for sessionID in ["s1", "s2"] {
            let row = CryptoStore.InboundSessionRow(
                roomID: "!r:x", sessionID: sessionID, senderKey: "k", signingKey: "e", forwarded: false,
                pickle: try inbound.pickle(key: try SecretBox.generateKey()))
            try await deliver(type: "m.dummy", sender: user, content: .object([:]), to: phone)
            let rowID = try #require(try await store.toDeviceBatch(limit: 1).first?.id)
            let arrived = try await store.apply(
                CryptoStore.ToDeviceOutcome(rowID: rowID, inboundSession: row), nowMilliseconds: 0)
            #expect(arrived.requestedKeyArrived == (sessionID == "s1"))
        }
        let cancellations = try await store.keyRequestsToSend()
        #expect(cancellations.map(\.requestID) == ["r1"])
        #expect(cancellations.allSatisfy { $0.isCancellation })
        #expect(!(try await store.hasOpenKeyRequest(roomID: "!r:x", sessionID: "s1")))
        try await store.keyRequestLeft(cancellations[0])
        #expect(try await store.openKeyRequestCount() == 0)
    }

    @Test("Requests of another own device are kept until cancelled; this device's own and other users' are dropped")
    func incomingRequests() async throws {
        let laptop = try await device("LAPTOP")
        func request(_ action: String, from device: String, id: String) -> JSONValue {
            .object([
                "action": .string(action), "request_id": .string(id), "requesting_device_id": .string(device),
                "body": .object([
                    "algorithm": .string("m.megolm.v1.aes-sha2"), "room_id": .string("!r:x"),
                    "session_id": .string("s1"), "sender_key": .string("k"),
                ]),
            ])
        }
        try await deliver(
            type: "m.room_key_request", sender: user, content: request("request", from: "PHONE", id: "a"), to: laptop)
        try await deliver(
            type: "m.room_key_request", sender: user, content: request("request", from: "LAPTOP", id: "b"), to: laptop)
        try await deliver(
            type: "m.room_key_request", sender: UserID("@mallory:example.org"),
            content: request("request", from: "EVIL", id: "c"), to: laptop)
        let report = try await laptop.engine.processToDevice(nowMilliseconds: 0)
        #expect(report == ToDeviceReport(processed: 3, keyRequestsReceived: true))
        #expect(
            try await laptop.store.incomingKeyRequests()
                == [CryptoStore.IncomingKeyRequest(deviceID: "PHONE", requestID: "a", roomID: "!r:x", sessionID: "s1")])

        try await deliver(
            type: "m.room_key_request", sender: user, content: request("request_cancellation", from: "PHONE", id: "a"),
            to: laptop)
        #expect(try await laptop.engine.processToDevice(nowMilliseconds: 0) == ToDeviceReport(processed: 1))
        #expect(try await laptop.store.incomingKeyRequests().isEmpty)
    }

    @Test(
        "A sibling's forwarded key is stored under the original sender's keys, only as the answer to an open request"
    )
    func forwardedKeyKeepsTheOriginalSender() async throws {
        let phone = try await device("PHONE")
        let laptop = try await device("LAPTOP")
        let (phoneDevice, laptopDevice, bobSession) = try await forwardingPair(phone, laptop)

        let request = CryptoStore.IncomingKeyRequest(
            deviceID: "LAPTOP", requestID: "q1", roomID: "!r:x", sessionID: bobSession.sessionID)
        let unknown = CryptoStore.IncomingKeyRequest(
            deviceID: "LAPTOP", requestID: "q2", roomID: "!r:x", sessionID: "nope")
        let answer = try await phone.engine.forwardedKeyMessages(
            for: [(request, laptopDevice), (unknown, laptopDevice)], nowMilliseconds: 0)
        #expect(answer.answered == [request])
        #expect(answer.unanswerable == [unknown])
        let content = try #require(answer.messages[user.rawValue]?["LAPTOP"])

        // Without an open request of its own, the laptop drops the forwarded key.
        try await deliver(type: "m.room.encrypted", sender: user, content: content, to: laptop)
        _ = try await laptop.engine.processToDevice(nowMilliseconds: 0)
        #expect(try await laptop.store.inboundSession(roomID: "!r:x", sessionID: bobSession.sessionID) == nil)

        // With one, it keeps it — as Bob's session, not the phone's — and the request becomes a cancellation.
        #expect(
            try await laptop.store.recordKeyRequest(
                requestID: "q1", roomID: "!r:x", sessionID: bobSession.sessionID, senderKey: "BOB_CURVE",
                sender: "@bob:example.org"))
        try await laptop.store.keyRequestLeft(try #require(try await laptop.store.keyRequestsToSend().first))
        let again = try await phone.engine.forwardedKeyMessages(for: [(request, laptopDevice)], nowMilliseconds: 0)
        try await deliver(
            type: "m.room.encrypted", sender: user, content: try #require(again.messages[user.rawValue]?["LAPTOP"]),
            to: laptop)
        let report = try await laptop.engine.processToDevice(nowMilliseconds: 0)
        #expect(report.requestedKeysArrived)
        let stored = try #require(
            try await laptop.store.inboundSession(roomID: "!r:x", sessionID: bobSession.sessionID))
        #expect(stored.senderKey == "BOB_CURVE")
        #expect(stored.signingKey == "BOB_ED")
        #expect(stored.forwarded)
        #expect(try await laptop.store.keyRequestsToSend().map(\.isCancellation) == [true])

        // A forwarded session is not forwarded again.
        let onward = try await laptop.engine.forwardedKeyMessages(for: [(request, phoneDevice)], nowMilliseconds: 0)
        #expect(onward.answered.isEmpty)
        #expect(onward.unanswerable == [request])
    }
}

extension KeyRequestEngineTests {
    /// Introduces the two devices, gives `phone` Bob's session (Bob's device shared it with the
    /// phone only) and an Olm session to `laptop` on a one-time key the laptop signed.
    func forwardingPair(_ phone: EngineFixture.Device, _ laptop: EngineFixture.Device) async throws -> (
        phone: CryptoStore.Device, laptop: CryptoStore.Device, bobSession: any OutboundGroupSession
    ) {
        let phoneDevice = try await listed(phone)
        let laptopDevice = try await listed(laptop)
        _ = try await phone.store.storeQueried([user: [laptopDevice]], users: [user])
        _ = try await laptop.store.storeQueried([user: [phoneDevice]], users: [user])
        let bobSession = try driver.newOutboundGroupSession()
        let phoneKey = try #require(await phone.engine.pickleKey)
        try await phone.store.saveInboundSession(
            CryptoStore.InboundSessionRow(
                roomID: "!r:x", sessionID: bobSession.sessionID, senderKey: "BOB_CURVE", signingKey: "BOB_ED",
                forwarded: false,
                pickle: try driver.inboundGroupSession(sessionKey: try bobSession.sessionKey()).pickle(key: phoneKey)))
        try await fixture.connect(phone, to: laptop)
        return (phoneDevice, laptopDevice, bobSession)
    }

    @Test(
        "Under the strict policy a sibling the account did not cross-sign gets no forwarded key, and its forwarded key is dropped even as the answer to an open request"
    )
    func strictPolicyIgnoresUnsignedSiblings() async throws {
        let phone = try await fixture.device(user.rawValue, "PHONE", roomKeyPolicy: .crossSignedOnly)
        let laptop = try await fixture.device(user.rawValue, "LAPTOP", roomKeyPolicy: .crossSignedOnly)
        let (_, laptopDevice, bobSession) = try await forwardingPair(phone, laptop)

        // The laptop asks; the phone (no identity holds either of them) drops the request unanswered.
        try await deliver(
            type: "m.room_key_request", sender: user,
            content: .object([
                "action": .string("request"), "request_id": .string("q1"), "requesting_device_id": .string("LAPTOP"),
                "body": .object([
                    "algorithm": .string("m.megolm.v1.aes-sha2"), "room_id": .string("!r:x"),
                    "session_id": .string(bobSession.sessionID),
                ]),
            ]), to: phone)
        _ = try await phone.engine.processToDevice(nowMilliseconds: 0)
        #expect(try await phone.store.incomingKeyRequests().map(\.requestID) == ["q1"])
        let interpreter = CryptoInterpreter(
            engine: phone.engine, requester: NoRequests(), wallClock: SetClock(), logger: Logger(category: "test"))
        #expect(try await interpreter.answerKeyRequests().get() == KeyRequestAnswers(answered: 0))
        #expect(try await phone.store.incomingKeyRequests().isEmpty)

        // A forwarded key from the phone (made as the permissive policy would): the laptop has an
        // open request for the session and still drops it, and the request stays open.
        #expect(
            try await laptop.store.recordKeyRequest(
                requestID: "q1", roomID: "!r:x", sessionID: bobSession.sessionID, senderKey: "BOB_CURVE",
                sender: "@bob:example.org"))
        let request = CryptoStore.IncomingKeyRequest(
            deviceID: "LAPTOP", requestID: "q1", roomID: "!r:x", sessionID: bobSession.sessionID)
        let answer = try await phone.engine.forwardedKeyMessages(for: [(request, laptopDevice)], nowMilliseconds: 0)
        #expect(answer.answered == [request], "the engine's forwarding itself does not check the policy")
        try await deliver(
            type: "m.room.encrypted", sender: user, content: try #require(answer.messages[user.rawValue]?["LAPTOP"]),
            to: laptop)
        let report = try await laptop.engine.processToDevice(nowMilliseconds: 0)
        #expect(!report.requestedKeysArrived)
        #expect(try await laptop.store.inboundSession(roomID: "!r:x", sessionID: bobSession.sessionID) == nil)
        #expect(try await laptop.store.hasOpenKeyRequest(roomID: "!r:x", sessionID: bobSession.sessionID))
    }

    @Test("One sender's events open at most a bounded number of key requests in a room; other senders still ask")
    func requestsBoundedPerSender() async throws {
        let phone = try await device("PHONE")
        let mallory: UserID = "@mallory:example.org"
        var recorded = 0
        for index in 0..<20 {
            if try await phone.store.recordKeyRequest(
                requestID: "m\(index)", roomID: "!r:x", sessionID: "made-up-\(index)", senderKey: "k", sender: mallory)
            {
                recorded += 1
            }
        }
        #expect(recorded == CryptoStore.openKeyRequestsPerSender)
        #expect(
            try await phone.store.recordKeyRequest(
                requestID: "b1", roomID: "!r:x", sessionID: "bobs", senderKey: "k", sender: "@bob:example.org"))
        #expect(
            try await phone.store.recordKeyRequest(
                requestID: "m-elsewhere", roomID: "!other:x", sessionID: "made-up", senderKey: "k", sender: mallory))
    }
}

extension KeyRequestEngineTests {
    /// A wall clock that says what the test sets.
    final class SetClock: WallClock, @unchecked Sendable {
        // @unchecked: set only between the interpreter's passes, on the test's task.
        var milliseconds: Int64 = 0
        var now: Timestamp { Timestamp(millisecondsSince1970: milliseconds) }
    }

    /// A requester that must not be asked: the passes below have nothing to send.
    struct NoRequests: MatrixRequester {
        let userID = UserID("@alice:example.org")
        let homeserverURL = HomeserverURL("https://example.org")!
        func send(_ endpoint: MatrixEndpoint, timeout: Duration?) async throws(MatrixRequestError) -> HTTPResponse {
            Issue.record("unexpected request \(endpoint)")
            throw .invalidRequest
        }
    }

    func request(from device: String, id: String) -> JSONValue {
        .object([
            "action": .string("request"), "request_id": .string(id), "requesting_device_id": .string(device),
            "body": .object([
                "algorithm": .string("m.megolm.v1.aes-sha2"), "room_id": .string("!r:x"),
                "session_id": .string("s-\(id)"), "sender_key": .string("k"),
            ]),
        ])
    }

    @Test("A request of a device that never becomes known waits a day, then is dropped")
    func unknownDeviceRequestsExpire() async throws {
        let laptop = try await device("LAPTOP")
        let clock = SetClock()
        let interpreter = CryptoInterpreter(
            engine: laptop.engine, requester: NoRequests(), wallClock: clock, logger: Logger(category: "test"))
        try await deliver(
            type: "m.room_key_request", sender: user, content: request(from: "GHOST", id: "g1"), to: laptop)
        _ = try await laptop.engine.processToDevice(nowMilliseconds: 1_000)

        clock.milliseconds = 1_000 + CryptoStore.incomingKeyRequestLifetimeMilliseconds - 1
        #expect(try await interpreter.answerKeyRequests().get() == KeyRequestAnswers(answered: 0, waitingForDevices: 1))
        #expect(try await laptop.store.incomingKeyRequests().map(\.requestID) == ["g1"])

        clock.milliseconds = 1_000 + CryptoStore.incomingKeyRequestLifetimeMilliseconds + 1
        #expect(try await interpreter.answerKeyRequests().get() == KeyRequestAnswers(answered: 0))
        #expect(try await laptop.store.incomingKeyRequests().isEmpty)
    }

    @Test("Asked again, the sent and unanswered requests of the room go out once more under new IDs; others stay")
    func requestsGoOutAgain() async throws {
        let phone = try await device("PHONE")
        let store = phone.store
        #expect(
            try await store.recordKeyRequest(
                requestID: "r1", roomID: "!r:x", sessionID: "s1", senderKey: "k", sender: "@bob:example.org"))
        #expect(
            try await store.recordKeyRequest(
                requestID: "r2", roomID: "!r:x", sessionID: "s2", senderKey: "k", sender: "@bob:example.org"))
        #expect(
            try await store.recordKeyRequest(
                requestID: "r3", roomID: "!other:x", sessionID: "s3", senderKey: "k", sender: "@bob:example.org"))
        for request in try await store.keyRequestsToSend() where request.requestID != "r2" {
            try await store.keyRequestLeft(request)
        }
        // r1 and r3 are sent; r2 still waits to go out the first time.
        let fresh = Lock(0)
        let again = try await store.resendKeyRequests(roomID: "!r:x") {
            fresh.withLock {
                $0 += 1
                return "n\($0)"
            }
        }
        #expect(again == 1)
        #expect(try await store.keyRequestsToSend().map(\.requestID) == ["n1", "r2"])
        #expect(try await store.hasOpenKeyRequest(roomID: "!r:x", sessionID: "s1"))
        #expect(try await store.resendKeyRequests(roomID: "!nothing:x") { "never" } == 0)
    }

    @Test("A flood of requests keeps only the newest")
    func requestFloodIsBounded() async throws {
        let laptop = try await device("LAPTOP")
        let limit = CryptoStore.incomingKeyRequestLimit
        for index in 0..<(limit + 20) {
            try await deliver(
                type: "m.room_key_request", sender: user, content: request(from: "GHOST", id: "f\(index)"),
                to: laptop)
            _ = try await laptop.engine.processToDevice(nowMilliseconds: Int64(index))
        }
        let kept = try await laptop.store.incomingKeyRequests().map(\.requestID)
        #expect(kept.count == limit)
        #expect(Set(kept) == Set((20..<(limit + 20)).map { "f\($0)" }))
    }
}
