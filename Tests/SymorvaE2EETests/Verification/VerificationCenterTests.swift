import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// The verification center's timers on a manual clock (a request nobody answers is cancelled
/// with `m.timeout` after two minutes, and the cancel is sent) and its to-device addressing:
/// `m.accepted` to the devices that did not answer a request to every device, and
/// `m.unknown_transaction` to a message of no flow.
@Suite("Verification center")
struct VerificationCenterTests {
    @Test("An unanswered request is cancelled m.timeout after 2 minutes, and the cancel goes to the device")
    func requestTimesOut() async throws {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        let sent = RoomKeySharingTests.SentBodies()
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.key.verification.") { request in
            if let body = try? JSONValue(parsing: request.body) { sent.withLock { $0.append(body) } }
            return .json(200, "{}")
        }
        let clock = ManualClock()
        let center = VerificationCenter(
            userID: alice.userID, deviceID: DeviceID("ALICE"), engine: alice.engine, store: alice.store,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: OlmProtocolTests.FixedClock(milliseconds: 1_000), clock: clock,
            logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
        let verification = try await center.request(user: bob.userID, device: DeviceID("BOB"), startDirectly: false)
        #expect(verification.state.value == .requested)
        try await clock.waitForSleepers(count: 2)  // the overall and the request timers
        await clock.advance(by: .seconds(120))
        try await verification.state.wait { $0 == .cancelled(code: "m.timeout", byUs: true) }
        let codes = sent.withLock { bodies in
            bodies.compactMap { body -> String? in
                guard case .object(let top) = body, case .object(let messages)? = top["messages"],
                    case .object(let toBob)? = messages[bob.userID.rawValue], case .object(let content)? = toBob["BOB"],
                    case .string(let code)? = content["code"]
                else { return nil }
                return code
            }
        }
        #expect(codes == ["m.timeout"])
        #expect(sent.withLock { $0.count } == 2)  // the request, then the cancel
    }

    /// One message the homeserver got: its event type and, per device, the content's `code`
    /// (or `transaction_id` when there is no code).
    struct Sent: Equatable, CustomStringConvertible {
        var type: String
        var devices: [String: String]
        var description: String { "\(type) \(devices.sorted { $0.key < $1.key })" }
    }

    static func sent(_ transport: ScriptedHTTPTransport, to user: UserID) -> [Sent] {
        transport.requests.compactMap { request -> Sent? in
            let path = request.url.path
            guard path.contains("/sendToDevice/"), case .object(let top)? = try? JSONValue(parsing: request.body),
                case .object(let messages)? = top["messages"], case .object(let toUser)? = messages[user.rawValue]
            else { return nil }
            let type = path.components(separatedBy: "/sendToDevice/")[1].components(separatedBy: "/")[0]
            var devices: [String: String] = [:]
            for (device, content) in toUser {
                guard case .object(let fields) = content else { continue }
                if case .string(let code)? = fields["code"] {
                    devices[device] = code
                } else if case .string(let id)? = fields["transaction_id"] {
                    devices[device] = id
                }
            }
            return Sent(type: type, devices: devices)
        }
    }

    static func inbox(_ type: VerificationMessages.Kind, from sender: UserID, _ content: [String: JSONValue])
        throws -> VerificationInboxMessage
    {
        let event = JSONValue.object([
            "type": .string(type.rawValue), "sender": .string(sender.rawValue), "content": .object(content),
        ])
        return VerificationInboxMessage(
            type: type.rawValue, sender: sender.rawValue, raw: try event.canonicalEncoding())
    }

    static func center(for alice: EngineFixture.Device, transport: ScriptedHTTPTransport) -> VerificationCenter {
        VerificationCenter(
            userID: alice.userID, deviceID: DeviceID(alice.deviceID), engine: alice.engine, store: alice.store,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: OlmProtocolTests.FixedClock(milliseconds: 1_000), clock: ManualClock(),
            logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
    }

    @Test(
        "A request to every device: the first device's ready wins, the other devices get m.accepted, a late ready from one of them is ignored"
    )
    func acceptedGoesToTheOtherDevices() async throws {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let phone = try await fixture.device("@bob:example.org", "PHONE")
        let laptop = try await fixture.device("@bob:example.org", "LAPTOP")
        let tablet = try await fixture.device("@bob:example.org", "TABLET")
        _ = try await alice.store.storeQueried(
            [phone.userID: [try await phone.listed(), try await laptop.listed(), try await tablet.listed()]],
            users: [phone.userID])
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.key.verification.") { _ in
            .json(200, "{}")
        }
        let center = Self.center(for: alice, transport: transport)
        let verification = try await center.request(user: phone.userID, device: nil, startDirectly: false)
        let id = verification.transactionID
        #expect(
            Self.sent(transport, to: phone.userID) == [Sent(type: "m.key.verification.request", devices: ["*": id])])

        let ready: [String: JSONValue] = [
            "transaction_id": .string(id), "from_device": .string("LAPTOP"), "methods": .array([.string("m.sas.v1")]),
        ]
        await center.deliver([try Self.inbox(.ready, from: phone.userID, ready)])
        #expect(verification.state.value == .ready)
        #expect(verification.otherDeviceID == DeviceID("LAPTOP"))
        #expect(
            Self.sent(transport, to: phone.userID).last
                == Sent(type: "m.key.verification.cancel", devices: ["PHONE": "m.accepted", "TABLET": "m.accepted"]))

        // The phone answers too, late: ignored, nothing sent, the flow stays with the laptop.
        var late = ready
        late["from_device"] = .string("PHONE")
        let count = transport.requests.count
        await center.deliver([try Self.inbox(.ready, from: phone.userID, late)])
        #expect(verification.state.value == .ready && verification.otherDeviceID == DeviceID("LAPTOP"))
        #expect(transport.requests.count == count)

        // The flow goes on with the laptop: a start from it is accepted (sent to it alone).
        await verification.startSAS()
        #expect(Self.sent(transport, to: phone.userID).last?.devices.keys.sorted() == ["LAPTOP"])
    }

    @Test(
        "A message of no flow is answered m.unknown_transaction (at its from_device, else every device); a cancel, our own echo and a request are not"
    )
    func unknownTransaction() async throws {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.key.verification.") { _ in
            .json(200, "{}")
        }
        let center = Self.center(for: alice, transport: transport)
        await center.deliver([
            try Self.inbox(.key, from: bob.userID, ["transaction_id": .string("gone-1"), "key": .string("abc")]),
            try Self.inbox(
                .ready, from: bob.userID,
                [
                    "transaction_id": .string("gone-2"), "from_device": .string("BOB"),
                    "methods": .array([.string("m.sas.v1")]),
                ]),
            try Self.inbox(
                .cancel, from: bob.userID, ["transaction_id": .string("gone-3"), "code": .string("m.user")]),
            try Self.inbox(
                .mac, from: alice.userID,
                ["transaction_id": .string("gone-4"), "from_device": .string("ALICE"), "mac": .object([:])]),
        ])
        #expect(
            Self.sent(transport, to: bob.userID) == [
                Sent(type: "m.key.verification.cancel", devices: ["*": "m.unknown_transaction"]),
                Sent(type: "m.key.verification.cancel", devices: ["BOB": "m.unknown_transaction"]),
            ])
        #expect(Self.sent(transport, to: alice.userID).isEmpty)
        let cancelled = transport.requests.compactMap { try? JSONValue(parsing: $0.body) }.flatMap {
            body -> [String] in
            guard case .object(let top) = body, case .object(let messages)? = top["messages"],
                case .object(let toBob)? = messages[bob.userID.rawValue]
            else { return [] }
            return toBob.values.compactMap {
                guard case .object(let fields) = $0, case .string(let id)? = fields["transaction_id"] else {
                    return nil
                }
                return id
            }
        }
        #expect(cancelled == ["gone-1", "gone-2"])
        // A request of a new transaction opens a flow instead (nothing sent until accepted).
        await center.deliver([
            try Self.inbox(
                .request, from: bob.userID,
                [
                    "transaction_id": .string("new-1"), "from_device": .string("BOB"),
                    "methods": .array([.string("m.sas.v1")]), "timestamp": .number(1_000),
                ])
        ])
        #expect(transport.requests.count == 2)
        #expect(center.incoming.observable.value?.transactionID == "new-1")
    }

    @Test(
        "QR on a manual clock: Bob scanned Alice's code, nobody confirms: after 10 minutes m.timeout, the cancel goes to Bob"
    )
    func qrFlowTimesOut() async throws {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        // Both cross-signing identities as this device knows them: Alice holds hers, Bob's is pinned.
        let aliceKeys = try CrossSigningKeys(newFor: alice.userID, driver: fixture.driver)
        try await alice.store.saveCrossSigningKeys(
            .init(
                masterKey: aliceKeys.master.publicKey, masterSeed: aliceKeys.master.seed,
                selfSigningSeed: aliceKeys.selfSigning.seed, userSigningSeed: aliceKeys.userSigning.seed))
        let bobMaster = UnpaddedBase64.encode([UInt8](repeating: 7, count: 32))
        _ = try await alice.store.storeQueried(
            [bob.userID: [try await bob.listed()]], users: [bob.userID],
            identities: [
                bob.userID: UserIdentity(
                    userID: bob.userID, masterKey: bobMaster, selfSigningKey: nil, userSigningKey: nil,
                    masterKeyObject: .object([:]), isVerified: false)
            ])
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.key.verification.") { _ in
            .json(200, "{}")
        }
        let clock = ManualClock()
        let center = VerificationCenter(
            userID: alice.userID, deviceID: DeviceID("ALICE"), engine: alice.engine, store: alice.store,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: OlmProtocolTests.FixedClock(milliseconds: 1_000), clock: clock,
            logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
        let verification = try await center.request(user: bob.userID, device: DeviceID("BOB"), startDirectly: false)
        let id = verification.transactionID
        try await clock.waitForSleepers(count: 2)  // the overall and the request timers
        await center.deliver([
            try Self.inbox(
                .ready, from: bob.userID,
                [
                    "transaction_id": .string(id), "from_device": .string("BOB"),
                    "methods": .array(KeyVerificationMethod.ours.map { .string($0) }),
                ])
        ])
        let code = try #require(await verification.qrCode())
        let payload = try QRVerificationPayload(parsing: code)
        #expect(payload.mode == .verifyingAnotherUser)
        await center.deliver([
            try Self.inbox(
                .start, from: bob.userID,
                [
                    "transaction_id": .string(id), "from_device": .string("BOB"),
                    "method": .string(KeyVerificationMethod.reciprocate),
                    "secret": .string(UnpaddedBase64.encode(payload.sharedSecret)),
                ])
        ])
        #expect(verification.state.value == .otherDeviceScanned)
        await clock.advance(by: .seconds(600))
        try await verification.state.wait { $0 == .cancelled(code: "m.timeout", byUs: true) }
        #expect(
            Self.sent(transport, to: bob.userID).last
                == Sent(type: "m.key.verification.cancel", devices: ["BOB": "m.timeout"]))
    }
}
