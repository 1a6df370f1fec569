import Foundation
import SymorvaChatStore
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// The answering side of secret sharing across a restart: a request of another own device that
/// arrived (stored with its to-device event) but was not answered before the process ended is
/// checked and answered when `AccountCrypto` starts again — over Olm, to the device only because
/// the account cross-signed it — and leaves the store. The homeserver is the scripted HTTP double;
/// the asking device is a real engine that decrypts the answer.
@Suite("Secret requests of our other devices across a restart")
struct SecretAnswerRestartTests {
    let alice = UserID("@alice:example.org")
    let fixture = EngineFixture()

    final class Folder: Sendable {
        let path: String
        init() throws {
            let url = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            path = url.path
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    /// The `keys/query` answer listing `devices` of Alice and her identity.
    func queryAnswer(devices: [String: JSONValue], identity: CrossSigningKeys) throws -> String {
        let body = try identity.uploadBody()
        let top: [String: JSONValue] = [
            "device_keys": .object([alice.rawValue: .object(devices)]),
            "master_keys": .object([alice.rawValue: body["master_key"]!]),
            "self_signing_keys": .object([alice.rawValue: body["self_signing_key"]!]),
        ]
        return String(decoding: try JSONValue.object(top).canonicalEncoding(), as: UTF8.self)
    }

    func start(
        _ folder: Folder, key: Secret<[UInt8]>, transport: ScriptedHTTPTransport
    ) async throws -> AccountCrypto {
        let database = try await SQLiteDatabase.open(
            path: folder.path + "/account.db", migrations: ChatSchema.migrations)
        try await database.migrate(feature: CryptoStore.feature, CryptoStore.migrations)
        transport.on("POST", "/_matrix/client/v3/keys/upload") { _ in
            .json(200, #"{"one_time_key_counts": {"signed_curve25519": 50}}"#)
        }
        return try await AccountCrypto(
            userID: alice, deviceID: DeviceID("LAPTOP"), database: database, secretsKey: key,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: alice,
                accessToken: Secret("token"), transport: transport),
            scope: AccountScope(label: alice.rawValue), clock: ManualClock(), wallClock: SystemWallClock(),
            tracer: Tracer(), logCenter: LogCenter(threshold: .trace))
    }

    @Test(
        "A request stored before a restart is answered at start: the secret goes over Olm to the cross-signed asking device, and the request leaves the store"
    )
    func storedRequestAnswered() async throws {
        let driver = OlmCryptoDriver()
        let identity = try CrossSigningKeys(newFor: alice, driver: driver)
        // The asking device (a real engine): its keys, cross-signed by the account.
        let phone = try await fixture.device(alice.rawValue, "PHONE")
        let upload = try JSONValue(
            parsing: try #require(try await phone.engine.prepareUpload(KeyUploadPlan(deviceKeys: true)).body))
        guard case .object(let top) = upload, let phoneKeys = top["device_keys"] else {
            throw TestFailure("no device keys")
        }
        let oneTimeKey = try await fixture.claimKey(of: phone)

        // The first run of the laptop: it holds the identity; PHONE's request arrived, stored
        // with its event, and the process ended before an answer.
        let folder = try Folder()
        let key = try SecretBox.generateKey()
        let request = IncomingSecretRequest(deviceID: "PHONE", requestID: "ask-1", name: SecretName.master)
        try await storeFirstRun(in: folder, key: key, identity: identity, request: request)

        // The second run.
        let transport = ScriptedHTTPTransport()
        let answer = try queryAnswer(devices: ["PHONE": try identity.signDevice(phoneKeys)], identity: identity)
        transport.on("POST", "/_matrix/client/v3/keys/query") { _ in .json(200, answer) }
        let claim = try JSONValue.object([
            "one_time_keys": .object([
                alice.rawValue: .object(["PHONE": .object(["signed_curve25519:AAAAAQ": oneTimeKey])])
            ])
        ]).canonicalEncoding()
        transport.on("POST", "/_matrix/client/v3/keys/claim") { _ in .json(200, String(decoding: claim, as: UTF8.self))
        }
        let sent = Lock<[[UInt8]]>([])
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.room.encrypted/") { request in
            sent.withLock { $0.append(request.body) }
            return .json(200, "{}")
        }
        let crypto = try await start(folder, key: key, transport: transport)
        #expect(
            crypto.secretAnswers.states.value == .checking(batch: [request], queued: []),
            "started from the stored request")
        await crypto.start()
        try await crypto.secretAnswers.states.wait { $0 == .idle }
        #expect(try await crypto.store.incomingSecretRequests().isEmpty, "answered: forgotten")

        // The phone decrypts the answer: the master key's seed, for its request.
        let body = try #require(sent.withLock { $0.first })
        guard case .object(let put)? = try? JSONValue(parsing: body), case .object(let messages)? = put["messages"],
            case .object(let forAlice)? = messages[alice.rawValue], let content = forAlice["PHONE"]
        else { throw TestFailure("no answer for PHONE") }
        let arrivals = Lock<[(requestID: String, secret: Secret<String>)]>([])
        await phone.engine.secretSharing.setArrivalHandler { requestID, _, secret in
            arrivals.withLock { $0.append((requestID, secret)) }
        }
        try await fixture.deliver(sender: alice, content: content, to: phone)
        _ = try await phone.engine.processToDevice(nowMilliseconds: 0)
        let arrived = try #require(arrivals.withLock { $0.first })
        #expect(arrived.requestID == "ask-1")
        #expect(arrived.secret == Secret(UnpaddedBase64.encode(identity.master.seed.exposedValue)))
        await crypto.stop()
    }

    @Test(
        "A request stored before a restart from a device the account did not cross-sign is refused at start and forgotten; nothing is sent"
    )
    func storedRequestFromUnsignedDeviceRefused() async throws {
        let driver = OlmCryptoDriver()
        let identity = try CrossSigningKeys(newFor: alice, driver: driver)
        let phone = try await fixture.device(alice.rawValue, "PHONE")
        let upload = try JSONValue(
            parsing: try #require(try await phone.engine.prepareUpload(KeyUploadPlan(deviceKeys: true)).body))
        guard case .object(let top) = upload, let phoneKeys = top["device_keys"] else {
            throw TestFailure("no device keys")
        }
        let folder = try Folder()
        let key = try SecretBox.generateKey()
        let request = IncomingSecretRequest(deviceID: "PHONE", requestID: "ask-2", name: SecretName.master)
        try await storeFirstRun(in: folder, key: key, identity: identity, request: request)
        let transport = ScriptedHTTPTransport()
        // PHONE listed with its self-signed keys only: not cross-signed.
        let answer = try queryAnswer(devices: ["PHONE": phoneKeys], identity: identity)
        transport.on("POST", "/_matrix/client/v3/keys/query") { _ in .json(200, answer) }
        let crypto = try await start(folder, key: key, transport: transport)
        await crypto.start()
        try await crypto.secretAnswers.states.wait { $0 == .idle }
        #expect(try await crypto.store.incomingSecretRequests().isEmpty, "refused: forgotten")
        #expect(transport.count("POST", "/_matrix/client/v3/keys/claim") == 0)
        #expect(!transport.requests.contains { $0.url.path.contains("/sendToDevice/m.room.encrypted/") })
        await crypto.stop()
    }

    /// The laptop's first run: it holds `identity`, and `request` arrived, stored with its event;
    /// the process ended before an answer.
    private func storeFirstRun(
        in folder: Folder, key: Secret<[UInt8]>, identity: CrossSigningKeys, request: IncomingSecretRequest
    ) async throws {
        let database = try await SQLiteDatabase.open(
            path: folder.path + "/account.db", migrations: ChatSchema.migrations)
        let store = try await CryptoStore.migrating(on: database, userID: alice, key: key)
        try await store.saveCrossSigningKeys(
            CryptoStore.StoredCrossSigningKeys(
                masterKey: identity.master.publicKey, masterSeed: identity.master.seed,
                selfSigningSeed: identity.selfSigning.seed, userSigningSeed: identity.userSigning.seed))
        try await database.transaction { db throws(StoreError) in
            try CryptoStore.keepIncomingSecretRequest(request, nowMilliseconds: 1, in: db)
        }
    }
}
