import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Testing

@testable import SymorvaE2EE

/// Secret sharing between two devices of one account, through their stores and engines (no
/// network): which `m.secret.request`s are taken in, and which `m.secret.send`s are kept.
@Suite("Secret sharing in the crypto engine")
struct SecretSharingEngineTests {
    let user = UserID("@alice:example.org")
    let fixture = EngineFixture()

    func request(_ name: String, id: String, from device: String, action: String = "request") -> JSONValue {
        var content: [String: JSONValue] = [
            "action": .string(action), "request_id": .string(id), "requesting_device_id": .string(device),
        ]
        if action == "request" { content["name"] = .string(name) }
        return .object(content)
    }

    @Test(
        "Requests are taken only from another device of the account, for a secret shared, stored and handed to the SecretAnswer machine in order; a cancellation withdraws one"
    )
    func requestsTakenIn() async throws {
        let phone = try await fixture.device(user.rawValue, "PHONE")
        let mallory: UserID = "@mallory:example.org"
        let deliveries: [(UserID, JSONValue)] = [
            (user, request("m.cross_signing.master", id: "r1", from: "LAPTOP")),
            (user, request("m.megolm_backup.v1", id: "r2", from: "LAPTOP")),
            (user, request("m.cross_signing.self_signing", id: "r3", from: "LAPTOP")),
            (mallory, request("m.cross_signing.master", id: "r4", from: "EVIL")),  // another user
            (user, request("m.cross_signing.master", id: "r5", from: "PHONE")),  // this device
            (user, request("m.something.else", id: "r6", from: "LAPTOP")),  // not shared
            (user, request("", id: "r3", from: "LAPTOP", action: "request_cancellation")),
        ]
        for (sender, content) in deliveries {
            try await fixture.deliver(type: "m.secret.request", sender: sender, content: content, to: phone)
        }
        let events = Lock<[SecretAnswerMachine.Event]>([])
        let sharing = await phone.engine.secretSharing
        sharing.setIncomingHandler { event in events.withLock { $0.append(event) } }
        let report = try await phone.engine.processToDevice(nowMilliseconds: 0)
        #expect(report.processed == deliveries.count)
        let r1 = IncomingSecretRequest(deviceID: "LAPTOP", requestID: "r1", name: "m.cross_signing.master")
        let r2 = IncomingSecretRequest(deviceID: "LAPTOP", requestID: "r2", name: "m.megolm_backup.v1")
        let r3 = IncomingSecretRequest(deviceID: "LAPTOP", requestID: "r3", name: "m.cross_signing.self_signing")
        // Handed on in order, each once stored.
        #expect(
            events.withLock { $0 } == [
                .requestReceived(r1), .requestReceived(r2), .requestReceived(r3),
                .cancellationReceived(deviceID: "LAPTOP", requestID: "r3"),
            ])
        // Kept in the store until answered (the cancelled one is gone): a restart finds them.
        #expect(try await phone.store.incomingSecretRequests() == [r1, r2])
        #expect(try await phone.store.secretAnswerState() == .checking(batch: [r1, r2], queued: []))
        try await phone.store.forgetIncomingSecretRequests([r1])
        #expect(try await phone.store.incomingSecretRequests() == [r2])
    }

    @Test(
        "A secret that arrives over Olm is handed to the SecretRequest machine with whether it came from another device of the account that is cross-signed; never taken for a room key"
    )
    func secretsKeptFromCrossSignedDevicesOnly() async throws {
        let phone = try await fixture.device(user.rawValue, "PHONE")
        let laptop = try await fixture.device(user.rawValue, "LAPTOP")
        try await fixture.introduce(phone, laptop)
        try await fixture.connect(phone, to: laptop)
        let laptopDevice = try await laptop.listed()
        let sharing = await laptop.engine.secretSharing
        let arrivals = Lock<[(requestID: String, crossSigned: Bool, secret: Secret<String>)]>([])
        sharing.setArrivalHandler { requestID, crossSigned, secret in
            arrivals.withLock { $0.append((requestID, crossSigned, secret)) }
        }
        let secret = Secret("c2VjcmV0IHNlZWQgb2YgMzIgYnl0ZXMgZm9yIHRoZSB0ZXN0IQ")

        func send(_ requestID: String) async throws {
            let answer = try await phone.engine.secretMessages(
                [
                    (
                        IncomingSecretRequest(deviceID: "LAPTOP", requestID: requestID, name: "m.cross_signing.master"),
                        laptopDevice, secret
                    )
                ],
                nowMilliseconds: 0)
            #expect(answer.answered == 1)
            let content = try #require(answer.messages[user.rawValue]?["LAPTOP"])
            try await fixture.deliver(sender: user, content: content, to: laptop)
            _ = try await laptop.engine.processToDevice(nowMilliseconds: 0)
        }

        // The phone is unverified in the laptop's store: the machine is told so (and drops it).
        try await send("q1")
        #expect(arrivals.withLock { $0.map(\.requestID) } == ["q1"])
        #expect(arrivals.withLock { $0.last?.crossSigned } == false)

        // Cross-signed: the machine is told it came from an own cross-signed device (whether it
        // answers an open request is the SecretRequest machine's rule).
        var phoneListed = try await phone.listed()
        phoneListed.trust = .crossSigned
        _ = try await laptop.store.storeQueried([user: [phoneListed, laptopDevice]], users: [user])
        try await send("q2")
        #expect(arrivals.withLock { $0.map(\.requestID) } == ["q1", "q2"])
        #expect(arrivals.withLock { $0.last?.crossSigned } == true)
        #expect(arrivals.withLock { $0.last?.secret } == secret)
        // Nothing of it is a room key.
        #expect(
            try await laptop.database.queryOne("SELECT COUNT(*) FROM e2ee_inbound_group_sessions") { $0.int(0) } == 0)
    }
}
