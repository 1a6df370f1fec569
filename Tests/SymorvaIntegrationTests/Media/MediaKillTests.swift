import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaTransport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A large attachment sent by the `symorva` program through the fault proxy: its connection cut
/// mid-upload, then the process killed (`SIGKILL`) mid-upload, then started again on the same
/// data folder.
@Suite(
    "A large attachment survives connection cuts and the client process being killed",
    .requires(DevEnvironment.isAvailable && DevEnvironment.current?.manifestPath != nil, "needs Scripts/dev-server"),
    .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
struct MediaKillTests {
    let transport = CurlTransport()

    /// 100 MB (the dev server's `max_upload_size` is 128M).
    static let fileBytes = 100_000_000

    /// A file of `count` bytes, every MiB different, and its SHA-256.
    static func largeFile(_ count: Int) throws -> (path: String, sha256: [UInt8]) {
        let path = FileManager.default.temporaryDirectory.appending(path: "symorva-large-\(UUID().uuidString).bin").path
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let output = FileHandle(forWritingAtPath: path)
        else { throw IntegrationFailure("cannot write \(path)") }
        defer { try? output.close() }
        var written = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var index = 0
        while written < count {
            for offset in stride(from: 0, to: chunk.count, by: 4096) {
                chunk[offset] = UInt8(truncatingIfNeeded: index)
            }
            chunk[7] = UInt8(truncatingIfNeeded: index >> 8)
            let size = min(chunk.count, count - written)
            output.write(Data(chunk[0..<size]))
            written += size
            index += 1
        }
        return (path, try EncryptedAttachment.sha256(of: path))
    }

    @Test(
        "A 100 MB file through the fault proxy: cut mid-upload, killed mid-upload, resumed: one event, one media object, the copy removed"
    )
    func killDuringLargeUpload() async throws {
        let environment = DevEnvironment.current!
        let proxy = try FaultProxy(inFrontOf: environment.homeserverURL)
        let creates = proxy.count(method: "POST", path: "/_matrix/media/v1/create")
        let uploads = proxy.count(method: "PUT", path: "/_matrix/media/v3/upload/")
        // The program's manifest names the proxy as the homeserver.
        var manifest = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: environment.manifestPath!)))
                as? [String: Any])
        var homeserver = try #require(manifest["homeserver"] as? [String: Any])
        homeserver["url"] = proxy.url
        manifest["homeserver"] = homeserver
        let data = TemporaryDataDirectory("media-kill")
        let manifestPath = data.path + "/proxied.config.json"
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: manifestPath))
        let processEnvironment = ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": manifestPath]

        let bob = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("bob"), in: environment, transport: transport)
        let bobRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(bob.userID)!,
            accessToken: bob.accessToken, transport: transport)
        let large = try Self.largeFile(Self.fileBytes)
        defer { unlink(large.path) }

        // Process 1: Alice registers, creates a room with Bob and attaches the file.
        let first = try REPLProcess(environment: processEnvironment)
        first.send("register \(DevEnvironment.uniqueUsername("alice")) --password-stdin")
        first.send(testPassword.exposedValue)
        let registered = try await first.waitForLine { $0.hasPrefix("registered and signed in as ") }
        let aliceID = String(registered.dropFirst("registered and signed in as ".count).prefix { $0 != " " })
        first.send("create Archive \(bob.userID)")
        let created = try await first.waitForLine { $0.hasPrefix("created !") }
        let roomID = RoomID(String(created.dropFirst("created ".count)))
        _ = try await bobRequester.send(ChatAPI.join(roomID.rawValue))
        first.send("open \(roomID)")
        first.send("attach \(large.path)")
        // A quarter is on its way: cut every connection, then let the client back in.
        try await first.waitForLine(timeout: .seconds(180)) { $0 == "upload 25%" }
        proxy.close()
        #expect(proxy.forwardedCount(uploads) == 0, "the cut came before the upload was whole")
        try proxy.open()
        // The queue uploads again from the start; past half of it, the process dies.
        try await first.waitForLine(timeout: .seconds(180)) { $0 == "upload 50%" }
        try await first.kill()
        #expect(proxy.forwardedCount(uploads) == 0, "the kill came before the upload was whole")
        #expect(!first.output.contains { $0.hasPrefix("sent $") })
        #expect(proxy.forwardedCount(creates) == 1)
        let accounts = data.path + "/accounts"
        let copies = { () -> [String] in
            (FileManager.default.enumerator(atPath: accounts)?.allObjects as? [String] ?? []).filter {
                $0.contains("attachments/")
            }
        }
        #expect(copies().count == 1, "the copy waits in the account folder")

        // Process 2 on the same data folder: the queue resumes with the stored URI.
        let second = try REPLProcess(environment: processEnvironment)
        second.send("whoami")
        try await second.waitForLine { $0.contains(" on http") }
        second.send("outbox \(roomID) --wait")
        let status = try await second.waitForLine { $0.hasSuffix(" unsent") || $0 == "outbox empty" }
        #expect(status.hasSuffix(" unsent"), "the kill left the attachment to send: \(status)")
        try await second.waitForLine(timeout: .seconds(300)) { $0 == "all sent" }
        // The outbox empties as the message completes (its remote echo may come first); the
        // effect that removes its copy runs right after.
        let copyRemoved = ContinuousClock.now + .seconds(30)
        while !copies().isEmpty && ContinuousClock.now < copyRemoved { try await Task.sleep(for: .milliseconds(50)) }
        second.send("quit")
        #expect(try await second.finish() == 0)

        // One reservation and one upload reached the server; the copy is gone.
        #expect(proxy.forwardedCount(creates) == 1)
        #expect(proxy.forwardedCount(uploads) == 1)
        #expect(copies().isEmpty)
        // Bob reads one file event naming one media object: the same bytes.
        let events = try await Self.fileEvents(in: roomID, from: aliceID, requester: bobRequester)
        #expect(events.count == 1)
        let url = try #require(events.first.flatMap { $0["url"] as? String }.flatMap(MediaURI.init))
        let saved = large.path + ".downloaded"
        defer { unlink(saved) }
        let media = MediaClient(requester: bobRequester)
        #expect(try await media.download(url, toFileAt: saved) == Int64(Self.fileBytes))
        #expect(try EncryptedAttachment.sha256(of: saved) == large.sha256)
        // The server holds exactly one media object of Alice's.
        let admin = try #require(DevEnvironment.admin)
        let adminLogin = try await bobRequester.send(
            AuthAPI.login(
                LoginRequest(
                    homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!,
                    credentials: .password(username: admin.user, password: Secret(admin.password)),
                    requestsRefreshToken: false)))
        let adminRequester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(environment.homeserverURL.absoluteString)!, userID: UserID(admin.user)!,
            accessToken: try AuthAPI.decode(LoginResponse.self, from: adminLogin.body).accessToken, transport: transport
        )
        let encoded = aliceID.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let listed = try await adminRequester.send(
            MatrixEndpoint(method: .get, path: "/_synapse/admin/v1/users/\(encoded)/media", requiresAuth: true))
        let list = try #require(try JSONSerialization.jsonObject(with: Data(listed.body)) as? [String: Any])
        #expect(list["total"] as? Int == 1)
        let first1 = (list["media"] as? [[String: Any]])?.first
        #expect(first1?["media_length"] as? Int == Self.fileBytes)
    }

    /// The contents of `sender`'s `m.file` events in the room, oldest first.
    static func fileEvents(
        in roomID: RoomID, from sender: String, requester: FixedTokenMatrixRequester
    ) async throws -> [[String: Any]] {
        let encoded = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let response = try await requester.send(
            MatrixEndpoint(
                method: .get, path: "/_matrix/client/v3/rooms/\(encoded)/messages",
                query: [.init(name: "dir", value: "b"), .init(name: "limit", value: "100")], requiresAuth: true))
        let page = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return (page["chunk"] as? [[String: Any]] ?? []).reversed().compactMap { event in
            guard event["type"] as? String == "m.room.message", event["sender"] as? String == sender,
                let content = event["content"] as? [String: Any], content["msgtype"] as? String == "m.file"
            else { return nil }
            return content
        }
    }
}
