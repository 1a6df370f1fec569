import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

@Suite("Media client: requests, limits and errors")
struct MediaClientUnitTests {
    static let base = HomeserverURL("https://matrix.example.org")!

    static func client(_ transport: ScriptedHTTPTransport) -> MediaClient {
        MediaClient(
            requester: FixedTokenMatrixRequester(
                homeserverURL: base, userID: UserID("@ada:example.org"), accessToken: Secret("syt_media_token"),
                transport: transport))
    }

    static func temporaryFile(count: Int) throws -> String {
        let path = FileManager.default.temporaryDirectory.appending(path: "symorva-media-unit-\(UUID().uuidString)")
            .path
        try Data(repeating: 0x41, count: count).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("Downloads and thumbnails use the authenticated paths with the token")
    func authenticatedPaths() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", pathPrefix: "/_matrix/client/v1/media/download/") { _ in
            .success(HTTPResponse(status: 200, body: [1, 2, 3]))
        }
        transport.on("GET", pathPrefix: "/_matrix/client/v1/media/thumbnail/") { _ in
            .success(HTTPResponse(status: 200, headers: ["Content-Type": "image/png"], body: [9]))
        }
        let media = Self.client(transport)
        let uri = try #require(MediaURI("mxc://example.org/AbC_12-x"))
        #expect(try await media.data(for: uri) == [1, 2, 3])
        let thumbnail = try await media.thumbnail(of: uri, width: 64, height: 48, cropped: true)
        #expect(thumbnail.contentType == "image/png" && thumbnail.bytes == [9])
        let requests = transport.requests
        #expect(
            requests.map(\.url.path) == [
                "/_matrix/client/v1/media/download/example.org/AbC_12-x",
                "/_matrix/client/v1/media/thumbnail/example.org/AbC_12-x",
            ])
        #expect(requests[1].url.query == "width=64&height=48&method=crop")
        #expect(requests.allSatisfy { $0.bearerToken == Secret("syt_media_token") })
    }

    @Test("An upload over m.upload.size is refused before it is sent; the configuration is asked once")
    func limitCheckedFirst() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", "/_matrix/client/v1/media/config") { _ in .json(200, #"{"m.upload.size": 100}"#) }
        let media = Self.client(transport)
        let path = try Self.temporaryFile(count: 101)
        defer { unlink(path) }
        await #expect(throws: MediaError.tooLarge(bytes: 101, limit: 100)) {
            try await media.upload(fileAt: path, contentType: "text/plain")
        }
        #expect(try await media.configuration() == MediaConfiguration(maximumUploadBytes: 100))
        #expect(transport.requests.map(\.url.path) == ["/_matrix/client/v1/media/config"])
    }

    @Test("A transport that cannot stream files is refused: the file is never loaded into memory")
    func streamingRequired() async throws {
        let transport = ScriptedHTTPTransport()
        transport.on("GET", "/_matrix/client/v1/media/config") { _ in .json(200, "{}") }
        let media = Self.client(transport)
        let path = try Self.temporaryFile(count: 10)
        defer { unlink(path) }
        await #expect(throws: MediaError.streamingUnavailable) {
            try await media.upload(fileAt: path, contentType: "text/plain")
        }
        await #expect(throws: MediaError.fileUnreadable) {
            try await media.upload(fileAt: path + ".missing", contentType: "text/plain")
        }
        await #expect(throws: MediaError.streamingUnavailable) {
            try await media.download(MediaURI("mxc://example.org/abc")!, toFileAt: path + ".copy")
        }
        #expect(!FileManager.default.fileExists(atPath: path + ".copy"))
        #expect(transport.requests.map(\.url.path) == ["/_matrix/client/v1/media/config"])
    }

    @Test("M_TOO_LARGE and 413 are tooLarge; 404 notFound; the token and rate limits keep their meaning")
    func errorMapping() {
        let now = Timestamp(millisecondsSince1970: 0)
        func mapped(_ status: Int, _ body: String, reading: Bool = true) -> MediaError {
            let error = MatrixError.decode(from: HTTPResponse(status: status, body: Array(body.utf8)))!
            return MediaError(.matrix(error), bytes: 5, reading: reading, now: now)
        }
        #expect(mapped(413, #"{"errcode":"M_TOO_LARGE","error":"too big"}"#) == .tooLarge(bytes: 5, limit: nil))
        #expect(mapped(413, #"{"errcode":"M_UNKNOWN"}"#) == .tooLarge(bytes: 5, limit: nil))
        #expect(mapped(404, #"{"errcode":"M_NOT_FOUND"}"#) == .notFound)
        #expect(mapped(401, #"{"errcode":"M_UNKNOWN_TOKEN"}"#) == .tokenRejected)
        #expect(
            mapped(429, #"{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":1500}"#)
                == .rateLimited(retryAfter: .milliseconds(1500)))
        #expect(mapped(403, #"{"errcode":"M_FORBIDDEN"}"#) == .server(status: 403, errorCode: "M_FORBIDDEN"))
        #expect(MediaError(.transport(.fileAccess), bytes: 0, reading: true, now: now) == .fileUnreadable)
        #expect(MediaError(.transport(.fileAccess), bytes: 0, reading: false, now: now) == .fileNotWritable)
        #expect(MediaError(.transport(.cancelled), bytes: 0, reading: false, now: now) == .cancelled)
        #expect(MediaError(.transport(.connectionLost), bytes: 0, reading: false, now: now) == .network)
    }

    @Test("mxc URIs: parts checked, media ID left out of descriptions")
    func mediaURIs() {
        let uri = MediaURI("mxc://localhost:8448/Abc_-9")
        #expect(uri?.serverName == "localhost:8448")
        #expect(uri?.mediaID == "Abc_-9")
        #expect(uri?.uriString == "mxc://localhost:8448/Abc_-9")
        #expect(uri?.description == "mxc://localhost:8448/…")
        #expect(MediaURI("https://example.org/abc") == nil)
        #expect(MediaURI("mxc://example.org/") == nil)
        #expect(MediaURI("mxc://example.org/a/b") == nil)
        #expect(MediaURI("mxc://example.org/a%2F..") == nil)
    }
}
