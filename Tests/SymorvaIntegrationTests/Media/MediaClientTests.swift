import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport
import Testing

@Suite("Media client against Synapse", .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server"))
struct MediaClientTests {
    let transport = CurlTransport()

    /// A fresh account's media client.
    func makeClient() async throws -> (client: MediaClient, account: RegisteredAccount, base: HomeserverURL) {
        let environment = try #require(DevEnvironment.current)
        let account = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("media"), in: environment, transport: transport)
        let base = try #require(HomeserverURL(environment.homeserverURL.absoluteString))
        let requester = FixedTokenMatrixRequester(
            homeserverURL: base, userID: try #require(UserID(account.userID)), accessToken: account.accessToken,
            transport: transport)
        return (MediaClient(requester: requester), account, base)
    }

    static func temporaryFile(_ bytes: [UInt8], name: String = "file") throws -> String {
        let path = FileManager.default.temporaryDirectory.appending(path: "symorva-media-\(UUID().uuidString)-\(name)")
            .path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    func get(_ base: HomeserverURL, _ path: String, token: Secret<String>? = nil) async throws -> HTTPResponse {
        let url = try #require(URL(string: base.rawValue + path))
        return try await transport.send(HTTPRequest(url: url, bearerToken: token))
    }

    @Test(
        "A file encrypted while it uploads: the server holds ciphertext whose hash the EncryptedFile states, which decrypts to the file"
    )
    func encryptedWhileUploading() async throws {
        let (media, _, _) = try await makeClient()
        let bytes = (0..<(3 << 20) + 77).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 9) }
        let source = try Self.temporaryFile(bytes)
        defer { unlink(source) }
        let sent = Lock<Int64>(0)
        let file = try await media.uploadEncrypting(
            fileAt: source, progress: { progress in sent.withLock { $0 = max($0, progress.completedBytes) } })
        #expect(sent.withLock { $0 } == Int64(bytes.count))
        let uri = try #require(file.uri)
        let ciphertext = source + ".enc"
        let plaintext = source + ".plain"
        defer { for path in [ciphertext, plaintext] { unlink(path) } }
        #expect(try await media.download(uri, toFileAt: ciphertext) == Int64(bytes.count))
        let stored = try [UInt8](Data(contentsOf: URL(fileURLWithPath: ciphertext)))
        #expect(stored != bytes)
        #expect(try EncryptedAttachment.sha256(of: ciphertext) == file.sha256)
        #expect(try EncryptedAttachment.decrypt(ciphertext, to: plaintext, file: file) == Int64(bytes.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: plaintext))) == bytes)
        // A second upload of the same file has its own key.
        let again = try await media.uploadEncrypting(fileAt: source)
        #expect(again.key != file.key && again.sha256 != file.sha256 && again.uri != file.uri)
    }

    @Test("An uploaded file downloads with the token, and without it the server refuses on both paths")
    func uploadAndAuthenticatedDownload() async throws {
        let (media, account, base) = try await makeClient()
        let bytes = (0..<(1 << 20) + 333).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let source = try Self.temporaryFile(bytes)
        defer { unlink(source) }
        let sent = Lock<Int64>(0)
        let uri = try await media.upload(
            fileAt: source, contentType: "application/octet-stream", fileName: "notes.bin",
            progress: { progress in sent.withLock { $0 = max($0, progress.completedBytes) } })
        #expect(sent.withLock { $0 } == Int64(bytes.count))

        let destination = source + ".copy"
        defer { unlink(destination) }
        let size = try await media.download(uri, toFileAt: destination)
        #expect(size == Int64(bytes.count))
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: destination))) == bytes)
        #expect(try await media.data(for: uri) == bytes)

        let authenticatedPath = "/_matrix/client/v1/media/download/\(uri.serverName)/\(uri.mediaID)"
        let withToken = try await get(base, authenticatedPath, token: account.accessToken)
        #expect(withToken.status == 200)
        let anonymous = try await get(base, authenticatedPath)
        #expect(anonymous.status == 401)
        #expect(MatrixError.decode(from: anonymous)?.code == .missingToken)
        let legacy = try await get(base, "/_matrix/media/v3/download/\(uri.serverName)/\(uri.mediaID)")
        #expect(!legacy.isSuccess)
        #expect(legacy.body != bytes)
    }

    @Test("The server makes a thumbnail of an uploaded image at the size asked for")
    func thumbnailOfUploadedImage() async throws {
        let (media, _, _) = try await makeClient()
        let source = try Self.temporaryFile(TestImage.png(width: 640, height: 480), name: "photo.png")
        defer { unlink(source) }
        let uri = try await media.upload(fileAt: source, contentType: "image/png", fileName: "photo.png")
        let cropped = try await media.thumbnail(of: uri, width: 96, height: 96, cropped: true)
        #expect(cropped.contentType == "image/png")
        let croppedSize = try #require(TestImage.pngSize(cropped.bytes))
        #expect(croppedSize.width == 96 && croppedSize.height == 96)
        let scaled = try await media.thumbnail(of: uri, width: 320, height: 240)
        let scaledSize = try #require(TestImage.pngSize(scaled.bytes))
        #expect(scaledSize.width == 320 && scaledSize.height == 240)
        await #expect(throws: MediaError.invalidArgument(name: "width")) {
            try await media.thumbnail(of: uri, width: 0, height: 10)
        }
    }

    @Test("A reserved URI gets its bytes later, once; an unknown one is notFound")
    func reserveThenUpload() async throws {
        let (media, _, _) = try await makeClient()
        let reserved = try await media.reserveURI()
        #expect(reserved.unusedExpiresAt != nil)
        let source = try Self.temporaryFile(Array("bytes after the event".utf8))
        defer { unlink(source) }
        try await media.upload(fileAt: source, contentType: "text/plain", to: reserved.uri)
        #expect(try await media.data(for: reserved.uri) == Array("bytes after the event".utf8))
        await #expect(throws: MediaError.server(status: 409, errorCode: "M_CANNOT_OVERWRITE_MEDIA")) {
            try await media.upload(fileAt: source, contentType: "text/plain", to: reserved.uri)
        }
        let unknown = try #require(MediaURI(serverName: reserved.uri.serverName, mediaID: "NoSuchMediaHere"))
        await #expect(throws: MediaError.notFound) { try await media.data(for: unknown) }
    }

    /// The server's own refusal is not reached here: Synapse answers 413 from the declared
    /// length and closes the connection under the body, so a client (plain `curl` too) sees the
    /// connection reset; `MediaErrorTests` cover the mapping of `M_TOO_LARGE`.
    @Test("m.upload.size is checked before sending: nothing leaves for a file over the limit")
    func uploadLimit() async throws {
        let (media, _, _) = try await makeClient()
        let limit = try #require(try await media.configuration().maximumUploadBytes)
        #expect(limit > 0)
        // A sparse file: larger than the limit, no disk used.
        let path = try Self.temporaryFile([])
        defer { unlink(path) }
        #expect(truncate(path, off_t(limit + 1)) == 0)
        let before = transport.metrics.requestsStarted
        await #expect(throws: MediaError.tooLarge(bytes: limit + 1, limit: limit)) {
            try await media.upload(fileAt: path, contentType: "application/octet-stream")
        }
        #expect(transport.metrics.requestsStarted == before)
        await #expect(throws: MediaError.fileUnreadable) {
            try await media.upload(fileAt: path + ".missing", contentType: "text/plain")
        }
    }
}
