import Foundation
import SymorvaMachines
import SymorvaRuntime
import Testing

@testable import SymorvaCrypto
@testable import SymorvaFeatureKit
@testable import SymorvaSession
@testable import SymorvaStore

/// A data folder of its own per test.
final class TestDataDirectory: Sendable {
    let path = NSTemporaryDirectory() + "symorva-kit-\(UUID().uuidString)"
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

enum SessionSamples {
    static let alice = UserID("@alice:example.org")
    static let bob = UserID("@bob:example.org")
    static let server = HomeserverInfo(
        baseURL: HomeserverURL("https://matrix.example.org")!, serverName: "example.org",
        versions: ServerVersions(versions: ["v1.11"], unstableFeatures: ["org.matrix.simplified_msc3575": true]))

    static func session(
        _ user: UserID = alice, access: String = "syt_access_CANARY_1234567890",
        refresh: String? = "syr_refresh_CANARY_0987654321"
    ) -> Session {
        Session(
            userID: user, deviceID: DeviceID("DEVICEA"), homeserver: server,
            tokens: SessionTokens(
                accessToken: Secret(access), refreshToken: refresh.map(Secret.init),
                expiry: TokenExpiry(issuedAt: Timestamp(millisecondsSince1970: 1_000), lifetime: .seconds(300))))
    }

    static func storage(_ data: TestDataDirectory) -> AccountStorage {
        AccountStorage(
            dataDirectory: data.path, keyProvider: FileKeyProvider(directory: data.path + "/keys"),
            migrations: .community(modules: []), logger: Logger(category: "test", center: LogCenter(threshold: .error)))
    }
}

@Suite("Session store")
struct SessionStoreTests {
    let data = TestDataDirectory()

    @Test("A saved session loads back equal, soft-logout mark included")
    func roundTrip() async throws {
        let store = try await SessionSamples.storage(data).sessionStore(for: SessionSamples.alice)
        let session = SessionSamples.session()
        try await store.save(session, savedAt: Timestamp(millisecondsSince1970: 5))
        #expect(try await store.load() == StoredSession(session: session))
        try await store.markSoftLoggedOut()
        #expect(try await store.load() == StoredSession(session: session, isSoftLoggedOut: true))
    }

    @Test("An empty store loads nothing")
    func empty() async throws {
        let store = try await SessionSamples.storage(data).sessionStore(for: SessionSamples.alice)
        #expect(try await store.load() == nil)
    }

    @Test("Tokens are not in the database files, in any form that grep could find")
    func tokensEncryptedAtRest() async throws {
        let storage = SessionStoreTests.storage(data)
        let store = try await storage.sessionStore(for: SessionSamples.alice)
        try await store.save(SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 5))
        let folder = AccountDatabase.directory(for: SessionSamples.alice, in: data.path)
        var bytes: [UInt8] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
            bytes += Array(FileManager.default.contents(atPath: folder + "/" + name) ?? Data())
        }
        #expect(bytes.count > 0)
        let haystack = String(decoding: bytes, as: UTF8.self)
        #expect(haystack.contains("@alice:example.org"))  // the row is there…
        #expect(!haystack.contains("CANARY"))  // …but not the tokens
    }

    @Test("A flipped byte in a sealed token fails with decryptionFailed, not a crash")
    func tamperedToken() async throws {
        let store = try await SessionSamples.storage(data).sessionStore(for: SessionSamples.alice)
        try await store.save(SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 5))
        // Byte 31 becomes another value whatever it was (setting it to 0 left a sealed token whose
        // byte was already 0 untouched: a failure once in 256 runs).
        try await store.database.execute(
            """
            UPDATE session_current SET access_token = substr(access_token, 1, 30)
                || CASE WHEN substr(access_token, 31, 1) = x'00' THEN x'01' ELSE x'00' END
                || substr(access_token, 32)
            """)
        await #expect(throws: AccountStorageError.secrets(.decryptionFailed)) { try await store.load() }
    }

    @Test("A sealed token moved to the other column fails to open")
    func movedToken() async throws {
        let store = try await SessionSamples.storage(data).sessionStore(for: SessionSamples.alice)
        try await store.save(SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 5))
        try await store.database.execute("UPDATE session_current SET access_token = refresh_token")
        await #expect(throws: AccountStorageError.secrets(.decryptionFailed)) { try await store.load() }
    }

    @Test("A database copied to another account's folder fails to open there")
    func copiedToAnotherAccount() async throws {
        let storage = SessionStoreTests.storage(data)
        try await storage.sessionStore(for: SessionSamples.alice).save(
            SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 5))
        let bobStore = try await storage.sessionStore(for: SessionSamples.bob)
        let alice = try await storage.database(for: SessionSamples.alice).database
        let row = try await alice.run { db throws(StoreError) in
            try db.queryOne("SELECT access_token FROM session_current") { $0.blob(0) }!
        }
        try await bobStore.save(SessionSamples.session(.bob), savedAt: Timestamp(millisecondsSince1970: 5))
        try await bobStore.database.execute("UPDATE session_current SET access_token = ?", [.blob(row)])
        await #expect(throws: AccountStorageError.secrets(.decryptionFailed)) { try await bobStore.load() }
    }

    @Test("Another key cannot open the tokens")
    func wrongKey() async throws {
        let storage = SessionStoreTests.storage(data)
        try await storage.sessionStore(for: SessionSamples.alice).save(
            SessionSamples.session(), savedAt: Timestamp(millisecondsSince1970: 5))
        let database = try await storage.database(for: SessionSamples.alice)
        let other = try SessionStore(database: database, key: try SecretBox.generateKey())
        await #expect(throws: AccountStorageError.secrets(.decryptionFailed)) { try await other.load() }
    }

    @Test("Saving another account's session in this store is refused")
    func wrongAccount() async throws {
        let store = try await SessionSamples.storage(data).sessionStore(for: SessionSamples.alice)
        await #expect(throws: AccountStorageError.unknownAccount) {
            try await store.save(SessionSamples.session(.bob), savedAt: Timestamp(millisecondsSince1970: 5))
        }
    }

    static func storage(_ data: TestDataDirectory) -> AccountStorage { SessionSamples.storage(data) }
}

extension UserID {
    fileprivate static var bob: UserID { SessionSamples.bob }
}
