import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// The homeserver's media settings (`GET /_matrix/client/v1/media/config`).
public struct MediaConfiguration: Sendable, Hashable {
    /// The largest upload the server accepts, in bytes (`m.upload.size`); `nil` when it does
    /// not say.
    public var maximumUploadBytes: Int64?

    /// A configuration.
    public init(maximumUploadBytes: Int64?) { self.maximumUploadBytes = maximumUploadBytes }
}

/// How far an upload or a download has come.
public struct MediaTransferProgress: Sendable, Hashable {
    /// Bytes sent (an upload) or received (a download) so far.
    public var completedBytes: Int64
    /// All the bytes of the transfer, when known.
    public var totalBytes: Int64?

    /// A progress value.
    public init(completedBytes: Int64, totalBytes: Int64?) {
        self.completedBytes = completedBytes
        self.totalBytes = totalBytes
    }

    /// Completed over total, 0…1; `nil` while the total is unknown.
    public var fractionCompleted: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return min(1, Double(completedBytes) / Double(totalBytes))
    }
}

/// An `mxc://` URI reserved with `POST /_matrix/media/v1/create`, whose bytes are uploaded
/// later with ``MediaClient/upload(fileAt:contentType:fileName:to:progress:)``: an event can
/// name the media before it is up.
public struct ReservedMedia: Sendable, Hashable {
    /// The reserved URI.
    public var uri: MediaURI
    /// When the server forgets the reservation if nothing was uploaded (ms since the epoch).
    public var unusedExpiresAt: MatrixTimestamp?
}

/// A thumbnail the homeserver made.
public struct MediaThumbnail: Sendable, Hashable {
    /// Its `Content-Type` (`image/png`, `image/jpeg`).
    public var contentType: String
    /// The image's bytes.
    public var bytes: [UInt8]
}

/// One account's media: authenticated downloads and thumbnails, uploads streamed from files.
///
/// - Every download, thumbnail and configuration request carries the access token
///   (`/_matrix/client/v1/media/…`): homeservers that require authenticated media refuse the
///   old paths.
/// - Uploads are read from the file as the connection takes them (libcurl's read callback,
///   256 KiB at a time), never loaded into memory; the server's `m.upload.size` is checked
///   before the first byte leaves, and a server's `M_TOO_LARGE` is ``MediaError/tooLarge(bytes:limit:)``.
/// - Downloads to a file go to a temporary file next to it, moved into place only when
///   complete: a failed or cancelled download leaves nothing at the destination.
/// - Cancelling the calling task aborts the transfer (``MediaError/cancelled``).
///
/// ```swift
/// let uri = try await chat.media.upload(fileAt: "/tmp/photo.png", contentType: "image/png")
/// let bytes = try await chat.media.download(uri, toFileAt: "/tmp/copy.png")
/// ```
public final class MediaClient: Sendable {
    /// The largest thumbnail accepted, in bytes.
    static let maximumThumbnailBytes = 16 << 20

    private let requester: any MatrixRequester
    private let wallClock: any WallClock
    /// The account's media cache, when it has a folder for one.
    package let cache: MediaCache?
    private let configurationLoads = RequestCoalescer<Int, MediaConfiguration, MediaError>()
    private let knownConfiguration = Lock<MediaConfiguration?>(nil)
    private let logger = Logger(category: "media")

    /// A media client sending as `requester`'s account, keeping downloads in `cache` if given.
    package init(requester: any MatrixRequester, wallClock: any WallClock = SystemWallClock(), cache: MediaCache? = nil)
    {
        self.requester = requester
        self.wallClock = wallClock
        self.cache = cache
    }

    // MARK: Configuration

    /// The server's media settings, asked once and kept (concurrent first calls share one request).
    public func configuration() async throws(MediaError) -> MediaConfiguration {
        if let known = knownConfiguration.withLock({ $0 }) { return known }
        let configuration = try await configurationLoads.value(for: 0) { () async throws(MediaError) in
            let response = try await self.send(MediaAPI.configuration(), bytes: 0, reading: false)
            guard let body = WireJSON.decodeIfValid(ConfigurationBody.self, from: response.body) else {
                throw .unexpectedResponse
            }
            return MediaConfiguration(maximumUploadBytes: body.uploadSize)
        }
        knownConfiguration.withLock { $0 = configuration }
        return configuration
    }

    // MARK: Upload

    /// Uploads the file at `path` (`POST /_matrix/media/v3/upload`) and returns its new URI.
    ///
    /// - Parameters:
    ///   - contentType: the file's MIME type (`image/png`), sent as `Content-Type`.
    ///   - fileName: the name the server keeps with the media (downloads offer it), if any.
    ///   - progress: called with the bytes sent so far, on the transport's thread: keep it quick.
    /// - Throws: ``MediaError/tooLarge(bytes:limit:)`` before sending when the file is larger
    ///   than the server's `m.upload.size`; ``MediaError/fileUnreadable`` for a file that
    ///   cannot be read.
    public func upload(
        fileAt path: String, contentType: String, fileName: String? = nil,
        progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> MediaURI {
        try await upload(
            fileAt: path, contentType: contentType, fileName: fileName, checkingLimit: true, progress: progress)
    }

    /// ``upload(fileAt:contentType:fileName:progress:)``, with the server's limit checked
    /// first or not (tests reach the server's own refusal this way).
    package func upload(
        fileAt path: String, contentType: String, fileName: String?, checkingLimit: Bool,
        progress: (@Sendable (MediaTransferProgress) -> Void)?
    ) async throws(MediaError) -> MediaURI {
        let file = try await checkedFile(path, checkingLimit: checkingLimit)
        var endpoint = MediaAPI.upload(fileName: fileName)
        endpoint.transfer = transfer(body: file, contentType: contentType, progress: progress)
        let response = try await send(endpoint, bytes: file.length, reading: true)
        guard let body = WireJSON.decodeIfValid(UploadBody.self, from: response.body),
            let uri = MediaURI(body.contentURI)
        else { throw .unexpectedResponse }
        logger.debug("uploaded bytes=\(file.length) server=\(uri.serverName)")
        return uri
    }

    /// Uploads the file at `path` encrypted for an encrypted room (the spec's `EncryptedFile` v2,
    /// a fresh AES-256-CTR key and IV), each chunk encrypted as libcurl reads it: no ciphertext is
    /// written to disk, and the upload runs at the plain upload's pace. Returns the
    /// `EncryptedFile` naming the new URI, with the hash of what the server received. Checks and
    /// errors as ``upload(fileAt:contentType:fileName:progress:)``.
    package func uploadEncrypting(
        fileAt path: String, progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> EncryptedFile {
        let checked = try await checkedFile(path, checkingLimit: true)
        let encrypting: EncryptingUpload
        do throws(EncryptedAttachmentError) {
            encrypting = try EncryptingUpload(length: checked.length)
        } catch {
            throw .decryptionFailed
        }
        let file = HTTPBodyFile(path: checked.path, length: checked.length, transform: encrypting)
        var endpoint = MediaAPI.upload(fileName: nil)
        endpoint.transfer = transfer(body: file, contentType: "application/octet-stream", progress: progress)
        let response = try await send(endpoint, bytes: file.length, reading: true)
        guard let body = WireJSON.decodeIfValid(UploadBody.self, from: response.body),
            let uri = MediaURI(body.contentURI)
        else { throw .unexpectedResponse }
        // The file changed size under the upload: what went up is not the file described.
        guard var encrypted = encrypting.finish() else { throw .fileUnreadable }
        encrypted.uri = uri
        return encrypted
    }

    /// Reserves an `mxc://` URI for media uploaded later (`POST /_matrix/media/v1/create`).
    public func reserveURI() async throws(MediaError) -> ReservedMedia {
        let response = try await send(MediaAPI.create(), bytes: 0, reading: false)
        guard let body = WireJSON.decodeIfValid(CreateBody.self, from: response.body),
            let uri = MediaURI(body.contentURI)
        else { throw .unexpectedResponse }
        return ReservedMedia(uri: uri, unusedExpiresAt: body.unusedExpiresAt.map(MatrixTimestamp.init(rawValue:)))
    }

    /// Uploads the file at `path` as the bytes of the reserved `uri`
    /// (`PUT /_matrix/media/v3/upload/{serverName}/{mediaId}`). Checks and errors as
    /// ``upload(fileAt:contentType:fileName:progress:)``; a URI that already has its bytes
    /// answers ``MediaError/server(status:errorCode:)`` with `M_CANNOT_OVERWRITE_MEDIA`.
    public func upload(
        fileAt path: String, contentType: String, fileName: String? = nil, to uri: MediaURI,
        progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) {
        let file = try await checkedFile(path, checkingLimit: true)
        var endpoint = MediaAPI.upload(to: uri, fileName: fileName)
        endpoint.transfer = transfer(body: file, contentType: contentType, progress: progress)
        _ = try await send(endpoint, bytes: file.length, reading: true)
    }

    /// ``upload(fileAt:contentType:fileName:to:progress:)`` of a file that is already
    /// ciphertext (the send queue's copy of an encrypted room's file), hashed as libcurl reads
    /// it (``HashingUpload``: SHA-256 in place in the read buffer, no second read of the file).
    /// Returns the SHA-256 of the bytes the server received.
    package func uploadHashing(
        fileAt path: String, contentType: String, to uri: MediaURI,
        progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> [UInt8] {
        let checked = try await checkedFile(path, checkingLimit: true)
        let hashing = HashingUpload(length: checked.length)
        let file = HTTPBodyFile(path: checked.path, length: checked.length, transform: hashing)
        var endpoint = MediaAPI.upload(to: uri, fileName: nil)
        endpoint.transfer = transfer(body: file, contentType: contentType, progress: progress)
        _ = try await send(endpoint, bytes: file.length, reading: true)
        // The file changed size under the upload: what went up is not the copy described.
        guard let hash = hashing.finish() else { throw .fileUnreadable }
        return hash
    }

    // MARK: Download

    /// Downloads `uri` into a file at `path` (replaced if it exists) and returns its size.
    ///
    /// The bytes go to a temporary file in the same folder, renamed to `path` once complete;
    /// on any failure the temporary file is removed and `path` is untouched.
    ///
    /// - Parameters:
    ///   - maximumBytes: the largest download accepted; a larger one stops with
    ///     ``MediaError/responseTooLarge(limit:)``.
    ///   - progress: called with the bytes received so far, on the transport's thread.
    @discardableResult
    public func download(
        _ uri: MediaURI, toFileAt path: String, maximumBytes: Int = 2 << 30,
        progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> Int64 {
        let partial = path + ".part-" + UUID().uuidString
        var endpoint = MediaAPI.download(uri)
        endpoint.transfer = MatrixFileTransfer(
            responseFile: partial, maximumResponseBytes: maximumBytes, progress: Self.receiving(progress))
        do throws(MediaError) {
            _ = try await send(endpoint, bytes: 0, reading: false)
            guard rename(partial, path) == 0 else { throw .fileNotWritable }
        } catch {
            unlink(partial)
            throw error
        }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.int64Value
        return size ?? 0
    }

    /// Downloads `uri` into memory (for small media: avatars, thumbnails of one's own).
    public func data(for uri: MediaURI, maximumBytes: Int = 32 << 20) async throws(MediaError) -> [UInt8] {
        var endpoint = MediaAPI.download(uri)
        endpoint.transfer = MatrixFileTransfer(maximumResponseBytes: maximumBytes)
        return try await send(endpoint, bytes: 0, reading: false).body
    }

    /// Downloads the file of a received message into a file at `path` (replaced if it exists)
    /// and returns its size. Plain media is downloaded as
    /// ``download(_:toFileAt:maximumBytes:progress:)`` does. Encrypted media
    /// (``MediaInfo/isEncrypted``): its ciphertext is downloaded into the account's media cache
    /// (only ciphertext is kept there; a later call finds it), its SHA-256 checked against the
    /// event's, and only then decrypted, into a temporary file next to `path` renamed into place.
    ///
    /// - Throws: ``MediaError/hashMismatch`` when the ciphertext is not the one the event names
    ///   (nothing is written), ``MediaError/notFound`` for a message without media, and the
    ///   download's errors.
    @discardableResult
    public func download(
        _ media: MediaInfo, toFileAt path: String, progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> Int64 {
        guard let file = media.encryptedFile else {
            guard let uri = media.source else { throw .notFound }
            return try await download(uri, toFileAt: path, progress: progress)
        }
        return try await download(encrypted: file, toFileAt: path, progress: progress)
    }

    /// Saves the thumbnail the sender attached to a message (``MediaInfo/hasThumbnail``) to
    /// `path`: `info.thumbnail_file` is downloaded, its hash checked and decrypted as
    /// ``download(_:toFileAt:progress:)`` does for the file; `info.thumbnail_url` is downloaded
    /// as it is. (``cachedThumbnail(of:width:height:cropped:)`` asks the server for one of a
    /// plain file instead; the server cannot make one of an encrypted file.)
    ///
    /// - Throws: ``MediaError/notFound`` when the message has no thumbnail, and the download's
    ///   errors (``MediaError/hashMismatch`` for an encrypted one that is not the one named).
    @discardableResult
    public func downloadThumbnail(_ media: MediaInfo, toFileAt path: String) async throws(MediaError) -> Int64 {
        if let file = media.thumbnailEncryptedFile {
            return try await download(encrypted: file, toFileAt: path, progress: nil)
        }
        guard let uri = media.thumbnailURL.flatMap(MediaURI.init) else { throw .notFound }
        return try await download(uri, toFileAt: path, maximumBytes: Self.maximumThumbnailBytes)
    }

    /// Downloads an encrypted file's ciphertext (into the cache when there is one), checks its
    /// hash, and decrypts it to `path`.
    private func download(
        encrypted file: EncryptedFile, toFileAt path: String, progress: (@Sendable (MediaTransferProgress) -> Void)?
    ) async throws(MediaError) -> Int64 {
        guard let uri = file.uri else { throw .notFound }
        let ciphertext: String
        var temporaryCiphertext: String?
        if cache != nil {
            ciphertext = try await cachedFile(for: uri, progress: progress)
        } else {
            ciphertext = path + ".ciphertext-" + UUID().uuidString
            temporaryCiphertext = ciphertext
            _ = try await download(uri, toFileAt: ciphertext, progress: progress)
        }
        defer { if let temporaryCiphertext { unlink(temporaryCiphertext) } }
        let partial = path + ".part-" + UUID().uuidString
        do throws(MediaError) {
            let size: Int64
            do throws(EncryptedAttachmentError) {
                size = try EncryptedAttachment.decrypt(ciphertext, to: partial, file: file)
            } catch .hashMismatch {
                // Not the file the event names: a later call downloads it again.
                if temporaryCiphertext == nil { unlink(ciphertext) }
                throw .hashMismatch
            } catch .unreadable {
                throw .notFound
            } catch .unwritable {
                throw .fileNotWritable
            } catch {
                throw .decryptionFailed
            }
            guard rename(partial, path) == 0 else { throw .fileNotWritable }
            logger.debug("decrypted media bytes=\(size)")
            return size
        } catch {
            unlink(partial)
            throw error
        }
    }

    // MARK: Cached

    /// The file of `uri` in the account's media cache, downloaded once (concurrent callers
    /// join one download; later calls find the file). The cache may evict it later: copy it
    /// out to keep it. Without a cache folder it is ``MediaError/fileNotWritable``.
    ///
    /// - Parameter progress: called with the bytes received while this call's download runs.
    public func cachedFile(
        for uri: MediaURI, progress: (@Sendable (MediaTransferProgress) -> Void)? = nil
    ) async throws(MediaError) -> String {
        guard let cache else { throw .fileNotWritable }
        return try await cache.file(for: MediaCache.key(for: uri)) { (path: String) async throws(MediaError) in
            _ = try await self.download(uri, toFileAt: path, progress: progress)
        }
    }

    /// The file of a thumbnail of `uri` at about `width` × `height` (scaled, or cropped to
    /// fill) in the account's media cache, made by the server once.
    public func cachedThumbnail(
        of uri: MediaURI, width: Int, height: Int, cropped: Bool = false
    ) async throws(MediaError) -> String {
        guard width > 0 else { throw .invalidArgument(name: "width") }
        guard height > 0 else { throw .invalidArgument(name: "height") }
        guard let cache else { throw .fileNotWritable }
        let key = MediaCache.thumbnailKey(for: uri, width: width, height: height, cropped: cropped)
        return try await cache.file(for: key) { (path: String) async throws(MediaError) in
            let partial = path + ".part-" + UUID().uuidString
            var endpoint = MediaAPI.thumbnail(uri, width: width, height: height, method: cropped ? .crop : .scale)
            endpoint.transfer = MatrixFileTransfer(
                responseFile: partial, maximumResponseBytes: Self.maximumThumbnailBytes)
            do throws(MediaError) {
                _ = try await self.send(endpoint, bytes: 0, reading: false)
                guard rename(partial, path) == 0 else { throw .fileNotWritable }
            } catch {
                unlink(partial)
                throw error
            }
        }
    }

    /// The file of a square thumbnail of an avatar (a room's ``ConversationListItem/avatar``, a
    /// sender's `SenderProfile.avatar`) at `size` × `size` pixels, cropped to fill, in the
    /// account's media cache: made by the server once, then found there.
    public func cachedAvatar(_ uri: MediaURI, size: Int = 96) async throws(MediaError) -> String {
        try await cachedThumbnail(of: uri, width: size, height: size, cropped: true)
    }

    /// A thumbnail of `uri` the server makes at about `width` × `height` pixels
    /// (`GET /_matrix/client/v1/media/thumbnail/…`): scaled to fit, or cropped to fill.
    public func thumbnail(
        of uri: MediaURI, width: Int, height: Int, cropped: Bool = false
    ) async throws(MediaError) -> MediaThumbnail {
        guard width > 0 else { throw .invalidArgument(name: "width") }
        guard height > 0 else { throw .invalidArgument(name: "height") }
        var endpoint = MediaAPI.thumbnail(uri, width: width, height: height, method: cropped ? .crop : .scale)
        endpoint.transfer = MatrixFileTransfer(maximumResponseBytes: Self.maximumThumbnailBytes)
        let response = try await send(endpoint, bytes: 0, reading: false)
        guard let contentType = response.headers["Content-Type"], !response.body.isEmpty else {
            throw .unexpectedResponse
        }
        return MediaThumbnail(contentType: contentType, bytes: response.body)
    }

    // MARK: Helpers

    private func send(
        _ endpoint: MatrixEndpoint, bytes: Int64, reading: Bool
    ) async throws(MediaError) -> HTTPResponse {
        // A transfer runs as long as it makes progress (the transport's low-speed limit).
        let timeout: Duration? = endpoint.transfer == nil ? nil : .seconds(24 * 3600)
        do {
            return try await requester.send(endpoint, timeout: timeout)
        } catch {
            let mapped = MediaError(error, bytes: bytes, reading: reading, now: wallClock.now)
            logger.debug("media request failed endpoint=\(endpoint.method.rawValue) error=\(mapped)")
            throw mapped
        }
    }

    /// The file at `path` as a body, its size checked against the server's limit.
    private func checkedFile(_ path: String, checkingLimit: Bool) async throws(MediaError) -> HTTPBodyFile {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = (attributes[.size] as? NSNumber)?.int64Value,
            FileManager.default.isReadableFile(atPath: path)
        else { throw .fileUnreadable }
        if checkingLimit, let limit = try await configuration().maximumUploadBytes, size > limit {
            throw .tooLarge(bytes: size, limit: limit)
        }
        return HTTPBodyFile(path: path, length: size)
    }

    private func transfer(
        body: HTTPBodyFile, contentType: String, progress: (@Sendable (MediaTransferProgress) -> Void)?
    ) -> MatrixFileTransfer {
        let sink = progress.map { handler in
            HTTPTransferProgress { counts in
                handler(MediaTransferProgress(completedBytes: counts.sent, totalBytes: body.length))
            }
        }
        return MatrixFileTransfer(
            bodyFile: body, contentType: contentType.isEmpty ? "application/octet-stream" : contentType,
            maximumResponseBytes: 64 << 10, progress: sink)
    }

    private static func receiving(_ progress: (@Sendable (MediaTransferProgress) -> Void)?) -> HTTPTransferProgress? {
        progress.map { handler in
            HTTPTransferProgress { counts in
                handler(MediaTransferProgress(completedBytes: counts.received, totalBytes: counts.receiveTotal))
            }
        }
    }

    private struct ConfigurationBody: Decodable {
        var uploadSize: Int64?
        enum CodingKeys: String, CodingKey { case uploadSize = "m.upload.size" }
    }

    private struct UploadBody: Decodable {
        var contentURI: String
        enum CodingKeys: String, CodingKey { case contentURI = "content_uri" }
    }

    private struct CreateBody: Decodable {
        var contentURI: String
        var unusedExpiresAt: Int64?
        enum CodingKeys: String, CodingKey {
            case contentURI = "content_uri"
            case unusedExpiresAt = "unused_expires_at"
        }
    }
}

extension SenderProfile {
    /// The member's avatar to show, when ``/SymorvaMachines/SenderProfile/avatarURL`` is a valid
    /// `mxc://` URI: a small square thumbnail of it comes from ``MediaClient/cachedAvatar(_:size:)``.
    public var avatar: MediaURI? { avatarURL.flatMap(MediaURI.init) }
}
