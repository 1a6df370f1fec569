import Foundation
import SymorvaChat
import SymorvaE2EE
import SymorvaHTTP
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import SymorvaTransport

#if os(Linux)
    import SymorvaMediaGStreamer
#endif

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `symorva-bench media-upload [--megabytes N] [--runs N] [--part all|pairs|image-send]`: uploads against the dev Synapse
/// (`Scripts/dev-server start --test`; its `max_upload_size` is 128M) on loopback, through the
/// code that ships, and prints:
/// - plain: `MediaClient.upload(fileAt:)` of an N MB file (libcurl, the body read from the file)
///   against the `curl` program posting the same file to the same endpoint with the same token,
///   MB/s each and the SDK's share of curl's throughput (best of the runs);
/// - encrypted: `MediaClient.uploadEncrypting(fileAt:)`, each chunk encrypted (AES-256-CTR) and
///   hashed as libcurl reads it, against the same curl figure; and, for comparison, the way that
///   writes the ciphertext first (`EncryptedAttachment.encrypt` into a file, then its upload:
///   what the send queue's copy step and upload do in an encrypted room);
/// - peak memory growth (`VmHWM` after, reset to `VmRSS` before) of each SDK upload;
/// - through the send queue (the shipped path: `Conversation.send(OutgoingAttachment)` of an
///   account with the crypto and chat modules), in a plain and in an encrypted room: `send()`
///   (the copy into the account's folder, encrypted in the encrypted room, synced), the queue's
///   upload step (from its start, seen on `Conversation.uploads`, to the upload stored: in the
///   encrypted room the copy is hashed as libcurl reads it) against the same curl figure, and
///   `send()` to the receipt's `sent`;
/// - a 12-megapixel PNG (4000 × 3000, made here without an image library): the upload, and the
///   time from the upload's answer (and from its start) to the first 320 × 240 thumbnail.
///
/// `--part pairs` measures only the encrypted room's queue against curl, in N interleaved pairs
/// (which goes first alternates), with the median and spread of each and the ratio per pair: on
/// a loaded machine one best-of figure says little. `--part image-send` times only
/// `Conversation.send()` of the 12 MP PNG through the queue (plain and encrypted room, the
/// standard modules' GStreamer thumbnailer set): the thumbnail is the queue's step, after
/// `send()` returned.
struct MediaUploadBenchmark: DevServerBenchmark {
    let name = "media-upload"
    let argumentsSynopsis = "[--megabytes N] [--runs N] [--part all|pairs|image-send]"
    let summary =
        "100 MB upload vs curl (plain, encrypted, through the send queue), peak RSS growth, 12 MP time to thumbnail (SYMORVA_* env)"

    struct Settings {
        var megabytes: Int
        var runs: Int
        var part: String
    }

    let optionNames: Set<String> = ["megabytes", "runs", "part"]

    func settings(from options: inout Options) -> Settings {
        Settings(
            megabytes: options.integer("megabytes", default: 100), runs: options.integer("runs", default: 3),
            part: options.string("part", default: "all"))
    }

    func measure(_ settings: Settings, homeserver: URL, services: URL) async throws {
        switch settings.part {
        case "all": try await measureAll(settings, homeserver: homeserver, services: services)
        case "pairs": try await measurePairs(settings, homeserver: homeserver, services: services)
        case "image-send": try await measureImageSend(settings, homeserver: homeserver, services: services)
        default: throw BenchFailure("--part is all, pairs or image-send, not '\(settings.part)'")
        }
    }

    /// The median of `values` (the mean of the middle two for an even count).
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// `median (min–max)` of `values` in seconds.
    static func spread(_ values: [Double]) -> String {
        "\(ChatBench.format(median(values), 3)) s (\(ChatBench.format(values.min()!, 3))–\(ChatBench.format(values.max()!, 3)))"
    }

    /// The encrypted room's queue against curl, in interleaved pairs.
    func measurePairs(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let transport = CurlTransport()
        let (user, token) = try await BenchMember.register(
            BenchMember.uniqueName("bench-pairs"), homeserver: homeserver, transport: transport)
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString), let userID = UserID(user) else {
            throw BenchFailure("bad homeserver URL or user ID")
        }
        // A bare client (no community, no sync) PUTting to a reserved URI as the queue does:
        // tells Synapse's PUT path from the account's process around the queue.
        let media = MediaClient(
            requester: FixedTokenMatrixRequester(
                homeserverURL: homeserverURL, userID: userID, accessToken: token, transport: transport))
        let bytes = settings.megabytes * 1_000_000
        let folder = try ChatBench.temporaryDirectory()
        let source = folder + "/source.bin"
        let headers = folder + "/headers"
        defer {
            for path in [source, headers] { unlink(path) }
            ChatBench.removeDirectory(folder)
        }
        try Self.writeFile(source, bytes: bytes)
        try Self.writeSecret("Authorization: Bearer \(token.exposedValue)\n", to: headers)
        let endpoint = homeserver.appending(path: "/_matrix/media/v3/upload").absoluteString
        let queue = try await QueueSender.start(homeserver: homeserver, services: services, folder: folder)
        print(
            "media-upload pairs: \(settings.megabytes) MB file, \(settings.runs) pairs of curl and the encrypted room's"
                + " queue, interleaved; load average \(MegolmBenchmark.loadAverage())")
        var curlTimes: [Double] = []
        var bareTimes: [Double] = []
        var runs: [QueueSender.Run] = []
        for pair in 0..<settings.runs {
            let reserved = try await media.reserveURI()
            let bareStart = ChatBench.now()
            try await media.upload(fileAt: source, contentType: "application/octet-stream", to: reserved.uri)
            bareTimes.append(ChatBench.now() - bareStart)
            // Which goes first alternates, so that a slow stretch of the machine hits both.
            if pair % 2 == 0 {
                curlTimes.append(try Self.curlUpload(source, endpoint: endpoint, headers: headers))
                runs.append(try await queue.send(source, encrypted: true))
            } else {
                runs.append(try await queue.send(source, encrypted: true))
                curlTimes.append(try Self.curlUpload(source, endpoint: endpoint, headers: headers))
            }
            let run = runs[pair]
            print(
                "  pair \(pair + 1): curl \(ChatBench.format(curlTimes[pair], 3)) s, bare client PUT to a reserved URI"
                    + " \(ChatBench.format(bareTimes[pair], 3)) s = \(ChatBench.format(100 * curlTimes[pair] / bareTimes[pair], 1)) %,"
                    + " queue upload request"
                    + " \(ChatBench.format(run.upload, 3)) s = \(ChatBench.format(100 * curlTimes[pair] / run.upload, 1)) %"
                    + " of curl; send() \(ChatBench.format(run.send, 3)) s, send() to sent \(ChatBench.format(run.total, 3)) s"
                    + " = \(ChatBench.format(100 * curlTimes[pair] / run.total, 1)) %")
        }
        await queue.shutdown()
        let ratios = zip(curlTimes, runs).map { 100 * $0 / $1.upload }
        let endToEnd = zip(curlTimes, runs).map { 100 * $0 / $1.total }
        print("  curl:                         \(Self.spread(curlTimes))")
        print("  bare client PUT:              \(Self.spread(bareTimes))")
        print("  queue upload request:         \(Self.spread(runs.map(\.upload)))")
        print("  queue send() to sent:         \(Self.spread(runs.map(\.total)))")
        print(
            "  upload request, % of curl per pair: median \(ChatBench.format(Self.median(ratios), 1)) %"
                + " (\(ChatBench.format(ratios.min()!, 1))–\(ChatBench.format(ratios.max()!, 1)));"
                + " pairs at or above 90 %: \(ratios.filter { $0 >= 90 }.count) of \(ratios.count)")
        print(
            "  send() to sent, % of curl per pair: median \(ChatBench.format(Self.median(endToEnd), 1)) %"
                + " (\(ChatBench.format(endToEnd.min()!, 1))–\(ChatBench.format(endToEnd.max()!, 1)))")
        print("  load average afterwards \(MegolmBenchmark.loadAverage())")
    }

    /// `Conversation.send()` of a 12 MP PNG through the queue, and the queue's steps after it.
    func measureImageSend(_ settings: Settings, homeserver: URL, services: URL) async throws {
        let folder = try ChatBench.temporaryDirectory()
        let image = folder + "/12mp.png"
        defer {
            unlink(image)
            ChatBench.removeDirectory(folder)
        }
        try Data(TestImage.png(width: 4000, height: 3000)).write(to: URL(fileURLWithPath: image))
        let size = (try? FileManager.default.attributesOfItem(atPath: image)[.size] as? NSNumber)?.intValue ?? 0
        let queue = try await QueueSender.start(homeserver: homeserver, services: services, folder: folder)
        #if os(Linux)
            guard let chat = queue.community.module(AccountChat.self) else { throw BenchFailure("no chat module") }
            chat.setThumbnailer(GStreamerImageThumbnailer())
        #endif
        print(
            "media-upload image-send: a 12 MP PNG (\(ChatBench.megabytes(size))), \(settings.runs) sends per room"
                + " through the queue; load average \(MegolmBenchmark.loadAverage())")
        for encrypted in [false, true] {
            var runs: [QueueSender.Run] = []
            for _ in 0..<settings.runs {
                runs.append(try await queue.send(image, encrypted: encrypted, contentType: "image/png"))
            }
            print(
                "  \(encrypted ? "encrypted room" : "plain room    "): send() \(Self.spread(runs.map(\.send)));"
                    + " send() returned to the reservation (the thumbnail step, stored) \(Self.spread(runs.compactMap(\.toReservation)));"
                    + " send() to sent \(Self.spread(runs.map(\.total)))")
        }
        await queue.shutdown()
        print("  load average afterwards \(MegolmBenchmark.loadAverage())")
    }

    func measureAll(_ settings: Settings, homeserver: URL, services: URL) async throws {
        guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else {
            throw BenchFailure("SYMORVA_HOMESERVER_URL is not a homeserver URL")
        }
        let transport = CurlTransport()
        let (user, token) = try await BenchMember.register(
            BenchMember.uniqueName("bench-media"), homeserver: homeserver, transport: transport)
        guard let userID = UserID(user) else { throw BenchFailure("registration gave '\(user)', not a user ID") }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: homeserverURL, userID: userID, accessToken: token, transport: transport)
        let media = MediaClient(requester: requester)
        let bytes = settings.megabytes * 1_000_000
        if let limit = try await media.configuration().maximumUploadBytes, Int64(bytes) > limit {
            throw BenchFailure("the server takes at most \(limit) bytes (restart Scripts/dev-server for 128M)")
        }

        let folder = try ChatBench.temporaryDirectory()
        let source = folder + "/source.bin"
        let ciphertext = folder + "/ciphertext.bin"
        let headers = folder + "/headers"
        defer {
            for path in [source, ciphertext, headers] { unlink(path) }
            ChatBench.removeDirectory(folder)
        }
        try Self.writeFile(source, bytes: bytes)
        // The token goes to curl in a 0600 file (`-H @file`), never on its command line.
        try Self.writeSecret("Authorization: Bearer \(token.exposedValue)\n", to: headers)
        let endpoint = homeserver.appending(path: "/_matrix/media/v3/upload").absoluteString
        print(
            "media-upload: \(settings.megabytes) MB file, \(settings.runs) runs each, best run reported;"
                + " load average \(MegolmBenchmark.loadAverage())")
        let queue = try await QueueSender.start(homeserver: homeserver, services: services, folder: folder)
        var queueRuns: [Bool: [QueueSender.Run]] = [false: [], true: []]

        var curlTimes: [Double] = []
        var plainTimes: [Double] = []
        var encryptTimes: [Double] = []
        var encryptedUploadTimes: [Double] = []
        var againTimes: [Double] = []
        var streamedTimes: [Double] = []
        var streamedGrowth = 0
        var plainGrowth = 0
        var encryptedGrowth = 0
        for _ in 0..<settings.runs {
            curlTimes.append(try Self.curlUpload(source, endpoint: endpoint, headers: headers))

            let (plainTime, plainPeak) = try await Self.measured {
                _ = try await media.upload(fileAt: source, contentType: "application/octet-stream")
            }
            plainTimes.append(plainTime)
            plainGrowth = max(plainGrowth, plainPeak)

            let (streamedTime, streamedPeak) = try await Self.measured {
                _ = try await media.uploadEncrypting(fileAt: source)
            }
            streamedTimes.append(streamedTime)
            streamedGrowth = max(streamedGrowth, streamedPeak)

            let (encryptTime, encryptPeak) = try await Self.measured {
                _ = try EncryptedAttachment.encrypt(source, to: ciphertext)
            }
            let (uploadTime, uploadPeak) = try await Self.measured {
                _ = try await media.upload(fileAt: ciphertext, contentType: "application/octet-stream")
            }
            // The same ciphertext once more, now an older file: tells the upload from the write.
            let (againTime, _) = try await Self.measured {
                _ = try await media.upload(fileAt: ciphertext, contentType: "application/octet-stream")
            }
            againTimes.append(againTime)
            unlink(ciphertext)
            for encrypted in [false, true] {
                queueRuns[encrypted, default: []].append(try await queue.send(source, encrypted: encrypted))
            }
            encryptTimes.append(encryptTime)
            encryptedUploadTimes.append(uploadTime)
            encryptedGrowth = max(encryptedGrowth, encryptPeak, uploadPeak)
        }
        let megabytes = Double(bytes) / 1e6
        let curl = curlTimes.min()!
        let plain = plainTimes.min()!
        let encrypted = zip(encryptTimes, encryptedUploadTimes).map { $0 + $1 }.min()!
        func rate(_ seconds: Double) -> String { ChatBench.format(megabytes / seconds, 0) + " MB/s" }
        func share(_ seconds: Double) -> String { ChatBench.format(100 * curl / seconds, 1) + " %" }
        print("  curl program:        \(ChatBench.format(curl, 3)) s  \(rate(curl))")
        print("  SDK plain:           \(ChatBench.format(plain, 3)) s  \(rate(plain))  = \(share(plain)) of curl")
        let streamed = streamedTimes.min()!
        print(
            "  SDK encrypted:       \(ChatBench.format(streamed, 3)) s  \(rate(streamed))  = \(share(streamed)) of curl"
                + " (encrypted and hashed while libcurl reads; peak RSS growth \(ChatBench.megabytes(streamedGrowth)))")
        print(
            "  encrypt, then upload: \(ChatBench.format(encrypted, 3)) s  \(rate(encrypted))  = \(share(encrypted)) of curl"
                + " (encrypt \(ChatBench.format(encryptTimes.min()!, 3)) s + upload "
                + "\(ChatBench.format(encryptedUploadTimes.min()!, 3)) s = \(share(encryptedUploadTimes.min()!)))")
        print(
            "  ciphertext again:    \(ChatBench.format(againTimes.min()!, 3)) s  \(rate(againTimes.min()!))"
                + "  = \(share(againTimes.min()!)) of curl (the same file uploaded a second time)")
        print(
            "  peak RSS growth:     plain \(ChatBench.megabytes(plainGrowth)), encrypted \(ChatBench.megabytes(encryptedGrowth))"
                + " (the file: \(ChatBench.megabytes(bytes)); chunks: 256 KiB upload, 1 MiB encryption)")

        for encrypted in [false, true] {
            let runs = queueRuns[encrypted] ?? []
            func best(_ figure: (QueueSender.Run) -> Double) -> Double { runs.map(figure).min()! }
            print(
                "  queue, \(encrypted ? "encrypted room" : "plain room"): upload request \(ChatBench.format(best(\.upload), 3)) s"
                    + "  \(rate(best(\.upload)))  = \(share(best(\.upload))) of curl"
                    + "\(encrypted ? " (the copy hashed as libcurl reads it)" : "")")
            print(
                "    send() \(ChatBench.format(best(\.send), 3)) s (the copy\(encrypted ? ", encrypted" : ""), synced);"
                    + " then \(ChatBench.format(best(\.beforeUpload), 3)) s to the upload (reservation stored);"
                    + " after its answer \(ChatBench.format(best(\.afterUpload), 3)) s to sent;"
                    + " send() to sent \(ChatBench.format(best(\.total), 3)) s = \(share(best(\.total))) of curl")
        }
        await queue.shutdown()
        print("  load average afterwards \(MegolmBenchmark.loadAverage())")

        // Time to the first server thumbnail of a 12-megapixel image.
        let image = folder + "/12mp.png"
        defer { unlink(image) }
        try Data(TestImage.png(width: 4000, height: 3000)).write(to: URL(fileURLWithPath: image))
        let started = ContinuousClock.now
        let uri = try await media.upload(fileAt: image, contentType: "image/png")
        let uploaded = ContinuousClock.now
        _ = try await media.thumbnail(of: uri, width: 320, height: 240)
        let thumbnailed = ContinuousClock.now
        func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: image)[.size] as? NSNumber)?.intValue ?? 0
        print(
            "  12 MP PNG (\(ChatBench.megabytes(size))): upload \(ChatBench.format(seconds(uploaded - started), 3)) s,"
                + " first 320x240 thumbnail \(ChatBench.format(seconds(thumbnailed - uploaded), 3)) s after the"
                + " upload's answer (\(ChatBench.format(seconds(thumbnailed - started), 3)) s from the start)")
        #if os(Linux)
            // The queue's thumbnail step for a 12 MP image (after `send()` returned): the thumbnail
            // the standard modules' GStreamer thumbnailer makes (decode, scale to fit 800 × 600, JPEG).
            var made: [Double] = []
            for _ in 0..<max(1, min(settings.runs, 3)) {
                let start = ChatBench.now()
                guard await GStreamerImageThumbnailer().thumbnail(ofImageAt: image, contentType: "image/png") != nil
                else {
                    throw BenchFailure("GStreamer made no thumbnail of the 12 MP PNG")
                }
                made.append(ChatBench.now() - start)
            }
            print(
                "  12 MP PNG: GStreamerImageThumbnailer (the queue's thumbnail step) best \(ChatBench.format(made.min()!, 3)) s,"
                    + " runs \(made.map { ChatBench.format($0, 3) }.joined(separator: ", ")) s")
        #endif
    }

    /// An account with the crypto and chat modules and a plain and an encrypted room of its own:
    /// each ``send(_:encrypted:)`` queues the file as an app does and times its steps from the
    /// requests the account's transport (libcurl, wrapped to note each request's start and end)
    /// sent.
    struct QueueSender {
        let community: SymorvaCommunity
        let transport: RequestTimes
        let plain: Conversation
        let encrypted: Conversation

        /// One send's figures, in seconds.
        struct Run {
            /// `send()`: the copy (encrypted in an encrypted room), synced, and the row.
            var send: Double
            /// `send()` returned → the upload's request started (the reservation, stored).
            var beforeUpload: Double
            /// The upload's request (`PUT /_matrix/media/v3/upload/…`), start to the server's answer.
            var upload: Double
            /// The upload answered → the receipt's `sent` (the upload stored with the hash, the
            /// event encrypted in an encrypted room, its `PUT /send`).
            var afterUpload: Double
            /// From `send()` to the receipt's `sent`.
            var total: Double
            /// `send()` returned → the reservation's request started (what the queue did before:
            /// the thumbnail step of an image, stored).
            var toReservation: Double?
        }

        static func start(homeserver: URL, services: URL, folder: String) async throws -> QueueSender {
            guard let homeserverURL = HomeserverURL(homeserver.absoluteString) else { throw BenchFailure("bad URL") }
            let serverName = ProcessInfo.processInfo.environment["SYMORVA_SERVER_NAME"] ?? "localhost"
            let configuration = SymorvaConfiguration(
                community: .init(name: "Benchmark"),
                homeserver: .init(url: homeserverURL, serverName: serverName),
                services: .init(url: services),
                modules: .init(
                    meetings: .init(isEnabled: false), aiStudio: .init(isEnabled: false),
                    wallet: .init(isEnabled: false, assets: []), directory: .init(isEnabled: false)))
            let transport = RequestTimes()
            let community = SymorvaCommunity(
                configuration: configuration,
                environment: SymorvaEnvironment(dataDirectory: folder + "/data", transport: transport),
                modules: [.crypto, .chat])
            _ = try await community.session.register(
                username: BenchMember.uniqueName("bench-queue"), password: Secret("correct horse battery staple"))
            guard let crypto = community.module(AccountCrypto.self) else { throw BenchFailure("no crypto module") }
            _ = try await crypto.state.wait(timeout: .seconds(60)) { state in
                if case .ready(let work) = state { return !work.isUploading }
                return false
            }
            let plainID = try await community.chat.createRoom(name: "Plain", invitees: [], isEncrypted: false)
            let encryptedID = try await community.chat.createRoom(name: "Sealed", invitees: [], isEncrypted: true)
            return QueueSender(
                community: community, transport: transport, plain: try await community.chat.conversation(id: plainID),
                encrypted: try await community.chat.conversation(id: encryptedID))
        }

        /// Sends `path` through the room's queue and waits until it is sent.
        func send(_ path: String, encrypted: Bool, contentType: String = "application/octet-stream") async throws -> Run
        {
            let conversation = encrypted ? self.encrypted : plain
            let start = ContinuousClock.now
            let receipt = try await conversation.send(OutgoingAttachment(path: path, contentType: contentType))
            let queued = ContinuousClock.now
            _ = try await receipt.state.wait(timeout: .seconds(600)) { state in
                if case .sent = state { return true }
                if case .failed = state { return true }
                return false
            }
            let end = ContinuousClock.now
            guard case .sent = receipt.state.value else { throw BenchFailure("send ended \(receipt.state.value)") }
            guard
                let upload = transport.records.last(where: {
                    $0.start >= start && $0.method == .put && $0.path.contains("/_matrix/media/v3/upload/")
                })
            else { throw BenchFailure("no upload request seen") }
            let reservation = transport.records.first {
                $0.start >= queued && $0.method == .post && $0.path.contains("/_matrix/media/v1/create")
            }
            return Run(
                send: (queued - start).seconds, beforeUpload: (upload.start - queued).seconds,
                upload: (upload.end - upload.start).seconds, afterUpload: (end - upload.end).seconds,
                total: (end - start).seconds, toReservation: reservation.map { ($0.start - queued).seconds })
        }

        func shutdown() async { await community.shutdown() }
    }

    /// The libcurl transport, noting each request's method, path, start and end (it streams
    /// files: a media transfer goes through as it does in an app).
    final class RequestTimes: HTTPFileTransport {
        struct Record: Sendable {
            var method: HTTPMethod
            var path: String
            var start: ContinuousClock.Instant
            var end: ContinuousClock.Instant
        }

        private let base = CurlTransport()
        private let noted = Lock<[Record]>([])

        /// Every request so far, in the order they ended.
        var records: [Record] { noted.withLock { $0 } }

        func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
            let start = ContinuousClock.now
            let response = try await base.send(request)
            let record = Record(method: request.method, path: request.url.path, start: start, end: ContinuousClock.now)
            noted.withLock { $0.append(record) }
            return response
        }
    }

    /// Wall time of `body` and the growth of the peak resident set over the resident set before.
    private static func measured(
        _ body: () async throws -> Void
    ) async throws -> (seconds: Double, peakGrowth: Int) {
        ChatBench.resetPeakMemory()
        let before = ChatBench.processStatus("VmRSS")
        let start = ChatBench.now()
        try await body()
        let elapsed = ChatBench.now() - start
        return (elapsed, max(0, ChatBench.processStatus("VmHWM") - before))
    }

    /// Posts `path` with the `curl` program (`--upload-file` with `-X POST`: streamed from the
    /// file, as the SDK does; `--data-binary @file` would read it all into memory first) and
    /// returns its wall time (the process's start to its exit).
    private static func curlUpload(_ path: String, endpoint: String, headers: String) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = [
            "--silent", "--show-error", "--fail", "--output", "/dev/null", "-X", "POST", "-H", "@" + headers, "-H",
            "Content-Type: application/octet-stream", "-H", "Expect:", "--upload-file", path, endpoint,
        ]
        let start = ChatBench.now()
        try process.run()
        process.waitUntilExit()
        let elapsed = ChatBench.now() - start
        guard process.terminationStatus == 0 else {
            throw BenchFailure("curl exited with \(process.terminationStatus)")
        }
        return elapsed
    }

    /// Writes `bytes` pseudo-random bytes (as incompressible as a photo or a ciphertext) to `path`.
    private static func writeFile(_ path: String, bytes: Int) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw BenchFailure("cannot write \(path)") }
        defer { try? handle.close() }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var block = [UInt8](repeating: 0, count: 1 << 20)
        var written = 0
        while written < bytes {
            block.withUnsafeMutableBytes { raw in
                let words = raw.bindMemory(to: UInt64.self)
                for index in words.indices {
                    // xorshift64*
                    state ^= state >> 12
                    state ^= state << 25
                    state ^= state >> 27
                    words[index] = state &* 0x2545_F491_4F6C_DD1D
                }
            }
            let count = min(block.count, bytes - written)
            handle.write(Data(block[0..<count]))
            written += count
        }
    }

    private static func writeSecret(_ text: String, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw BenchFailure("cannot write \(path)") }
        defer { close(descriptor) }
        let written = text.utf8CString.withUnsafeBufferPointer { write(descriptor, $0.baseAddress, $0.count - 1) }
        guard written == text.utf8.count else { throw BenchFailure("cannot write \(path)") }
    }
}
