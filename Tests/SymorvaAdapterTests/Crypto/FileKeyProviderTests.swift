import Foundation
import SymorvaCrypto
import Testing

@Suite("File key provider")
struct FileKeyProviderTests {
    @Test("The key file is created 0600 in a 0700 folder and read back")
    func createAndReread() throws {
        let folder = try TemporaryDirectory()
        let provider = FileKeyProvider(directory: folder.file("data/keys"))
        let key = try provider.key(for: "@alice:example.org")
        #expect(key.exposedValue.count == 32)
        let path = provider.keyPath(for: "@alice:example.org")
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(info.st_size == 32)
        #expect(stat(folder.file("data/keys"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        #expect(try provider.key(for: "@alice:example.org") == key)
        #expect(try FileKeyProvider(directory: folder.file("data/keys")).key(for: "@alice:example.org") == key)
        #expect(try provider.key(for: "@bob:example.org") != key)
        #expect(!path.contains("alice"))
    }

    @Test("A key file readable by others is refused")
    func widePermissions() throws {
        let folder = try TemporaryDirectory()
        let provider = FileKeyProvider(directory: folder.path)
        _ = try provider.key(for: "@alice:example.org")
        let path = provider.keyPath(for: "@alice:example.org")
        for mode: mode_t in [0o644, 0o640, 0o602] {
            chmod(path, mode)
            #expect(throws: SecretsError.keyFilePermissions(mode: UInt32(mode))) {
                try provider.key(for: "@alice:example.org")
            }
        }
    }

    @Test("A key file of the wrong size is refused, not replaced")
    func wrongSize() throws {
        let folder = try TemporaryDirectory()
        let provider = FileKeyProvider(directory: folder.path)
        let path = provider.keyPath(for: "@alice:example.org")
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        #expect(fd >= 0)
        _ = write(fd, [UInt8](repeating: 9, count: 31), 31)
        close(fd)
        #expect(throws: SecretsError.keyFileSize(bytes: 31)) { try provider.key(for: "@alice:example.org") }
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_size == 31)
    }

    @Test("A symbolic link in place of the key file is refused")
    func symlinkRefused() throws {
        let folder = try TemporaryDirectory()
        let provider = FileKeyProvider(directory: folder.path)
        symlink(folder.file("elsewhere"), provider.keyPath(for: "@alice:example.org"))
        #expect(throws: SecretsError.keyFileNotRegular) { try provider.key(for: "@alice:example.org") }
    }
}
