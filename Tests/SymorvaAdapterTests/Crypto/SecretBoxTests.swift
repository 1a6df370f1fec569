import SymorvaCrypto
import SymorvaRuntime
import SymorvaStore
import Testing

@Suite("Secrets at rest")
struct SecretBoxTests {
    private let associatedData = SecretBox.associatedData(account: "@alice:example.org", field: "access_token")

    @Test("Sealing then opening returns the secret")
    func roundTrip() throws {
        let box = try SecretBox(key: SecretBox.generateKey())
        let sealed = try box.seal(Secret("syt_YWxpY2U_token"), associatedData: associatedData)
        #expect(sealed.first == SecretBox.formatVersion)
        #expect(sealed.count == 1 + 24 + "syt_YWxpY2U_token".utf8.count + 16)
        #expect(try box.openString(sealed, associatedData: associatedData).exposedValue == "syt_YWxpY2U_token")
        #expect(try box.open(box.seal(Secret([]), associatedData: []), associatedData: []).exposedValue == [])
    }

    @Test("Each seal uses a fresh nonce")
    func freshNonce() throws {
        let box = try SecretBox(key: SecretBox.generateKey())
        let first = try box.seal(Secret("same"), associatedData: associatedData)
        let second = try box.seal(Secret("same"), associatedData: associatedData)
        #expect(first != second)
    }

    @Test("Any modified byte fails with decryptionFailed")
    func tamper() throws {
        let box = try SecretBox(key: SecretBox.generateKey())
        let sealed = try box.seal(Secret("secret"), associatedData: associatedData)
        for index in sealed.indices {
            var tampered = sealed
            tampered[index] ^= 0x01
            #expect(throws: SecretsError.decryptionFailed) { try box.open(tampered, associatedData: associatedData) }
        }
        for length in [0, 1, 24, 40, sealed.count - 1] {
            #expect(throws: SecretsError.decryptionFailed) {
                try box.open(Array(sealed.prefix(length)), associatedData: associatedData)
            }
        }
    }

    @Test("A ciphertext moved to another row or field fails")
    func wrongAssociatedData() throws {
        let box = try SecretBox(key: SecretBox.generateKey())
        let sealed = try box.seal(Secret("secret"), associatedData: associatedData)
        for other in [
            SecretBox.associatedData(account: "@bob:example.org", field: "access_token"),
            SecretBox.associatedData(account: "@alice:example.org", field: "refresh_token"),
            SecretBox.associatedData(account: "@alice:example.orga", field: "ccess_token"),
        ] {
            #expect(throws: SecretsError.decryptionFailed) { try box.open(sealed, associatedData: other) }
        }
    }

    @Test("Another key fails, and keys must be 32 bytes")
    func wrongKey() throws {
        let sealed = try SecretBox(key: SecretBox.generateKey()).seal(Secret("secret"), associatedData: [])
        let other = try SecretBox(key: SecretBox.generateKey())
        #expect(throws: SecretsError.decryptionFailed) { try other.open(sealed, associatedData: []) }
        #expect(throws: SecretsError.invalidKey(length: 16)) {
            try SecretBox(key: Secret([UInt8](repeating: 1, count: 16)))
        }
    }

    @Test("Sealed tokens survive a round trip through the database")
    func throughDatabase() async throws {
        let folder = try TemporaryDirectory()
        let db = try await SQLiteDatabase.open(path: folder.file("a.sqlite"))
        try await db.execute("CREATE TABLE secrets(account TEXT, field TEXT, value BLOB)")
        let box = try SecretBox(key: FileKeyProvider(directory: folder.file("keys")).key(for: "@alice:example.org"))
        let sealed = try box.seal(Secret("token-1"), associatedData: associatedData)
        try await db.execute(
            "INSERT INTO secrets VALUES (?, ?, ?)", ["@alice:example.org", "access_token", .blob(sealed)])
        let stored = try #require(try await db.queryOne("SELECT value FROM secrets") { $0.blob(0) })
        #expect(try box.openString(stored, associatedData: associatedData).exposedValue == "token-1")
    }
}
