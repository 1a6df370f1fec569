import Foundation
import SymorvaFeatureKit
import SymorvaMachines
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("Account files are the user's alone")
struct AccountFilePermissionTests {
    static let alice: UserID = "@alice:example.org"

    private func withDataDirectory(_ body: (String) async throws -> Void) async throws {
        let path = NSTemporaryDirectory() + "symorva-permissions-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(path)
    }

    private func mode(_ path: String) -> UInt32 {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return UInt32(info.st_mode) & 0o777
    }

    @Test("The account's folders are 0700 and its database files 0600, whatever the umask")
    func createdPrivate() async throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        try await withDataDirectory { data in
            let account = try await AccountDatabase.open(
                userID: Self.alice, dataDirectory: data, migrations: AccountMigrations())
            try await account.database.execute("CREATE TABLE probe(x)")
            let file = account.directory + "/" + AccountDatabase.fileName
            #expect(mode(account.directory) == 0o700)
            #expect(mode(data + "/accounts") == 0o700)
            #expect(mode(file) == 0o600)
            #expect(mode(file + "-wal") == 0o600)
            #expect(mode(file + "-shm") == 0o600)
        }
    }

    @Test("A database file an older version left readable by others is tightened")
    func existingFileTightened() async throws {
        try await withDataDirectory { data in
            let directory = AccountDatabase.directory(for: Self.alice, in: data)
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            chmod(data + "/accounts", 0o700)
            let file = directory + "/" + AccountDatabase.fileName
            #expect(FileManager.default.createFile(atPath: file, contents: nil, attributes: [.posixPermissions: 0o644]))
            _ = try await AccountDatabase.open(userID: Self.alice, dataDirectory: data, migrations: AccountMigrations())
            #expect(mode(file) == 0o600)
        }
    }

    @Test("An account folder other users can read is refused, naming its mode")
    func readableFolderRefused() async throws {
        try await withDataDirectory { data in
            let directory = AccountDatabase.directory(for: Self.alice, in: data)
            _ = try await AccountDatabase.open(userID: Self.alice, dataDirectory: data, migrations: AccountMigrations())
            chmod(directory, 0o755)
            await #expect(throws: AccountStorageError.insecureFolder(mode: 0o755)) {
                try await AccountDatabase.open(userID: Self.alice, dataDirectory: data, migrations: AccountMigrations())
            }
            chmod(directory, 0o700)
            chmod(data + "/accounts", 0o711)
            await #expect(throws: AccountStorageError.insecureFolder(mode: 0o711)) {
                try await AccountDatabase.open(userID: Self.alice, dataDirectory: data, migrations: AccountMigrations())
            }
        }
    }
}
