import SymorvaMatrix
import SymorvaRuntime

/// Why a media operation failed. Every case is safe to log: none carries a path, a media ID,
/// bytes or server text.
public enum MediaError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// No usable answer from the homeserver (offline, refused, cut, timed out).
    case network
    /// The file is larger than the homeserver accepts: refused before sending when the server's
    /// `m.upload.size` says so (`limit` is that size), or by the server itself with `M_TOO_LARGE`
    /// or HTTP 413 (`limit` `nil`: the server did not say).
    case tooLarge(bytes: Int64, limit: Int64?)
    /// The homeserver has no such media (`M_NOT_FOUND`), or will not say that it has.
    case notFound
    /// The homeserver refused the request: HTTP status and Matrix `errcode`.
    case server(status: Int, errorCode: String)
    /// The homeserver rate-limited the request; try again after `retryAfter` when given.
    case rateLimited(retryAfter: Duration?)
    /// The access token was rejected even after the requester's refresh.
    case tokenRejected
    /// The account is not signed in.
    case notSignedIn
    /// The caller cancelled the transfer; nothing partial is left at the destination.
    case cancelled
    /// The file to send cannot be read (missing, not a regular file, no permission).
    case fileUnreadable
    /// The destination file cannot be written (no such folder, no permission, disk full).
    case fileNotWritable
    /// The answer is larger than the caller allows (`limit` bytes) and the download stopped.
    case responseTooLarge(limit: Int)
    /// An argument is not valid (a thumbnail size of zero); names the argument.
    case invalidArgument(name: String)
    /// The homeserver's answer could not be read.
    case unexpectedResponse
    /// The account's HTTP transport cannot stream files (only the SDK's libcurl transport
    /// does): the file is not loaded into memory instead.
    case streamingUnavailable
    /// An encrypted file's ciphertext does not have the SHA-256 its event states (altered, or
    /// not the file the event names): nothing was decrypted or written.
    case hashMismatch
    /// An encrypted file could not be decrypted, or a file encrypted for its upload (libcrypto
    /// failed); nothing was written or uploaded.
    case decryptionFailed

    /// The case and its codes.
    public var description: String {
        switch self {
        case .network: "network"
        case .tooLarge(let bytes, let limit): "tooLarge(bytes: \(bytes), limit: \(limit.map(String.init) ?? "nil"))"
        case .notFound: "notFound"
        case .server(let status, let errorCode): "server(\(status), \(errorCode))"
        case .rateLimited(let retryAfter): "rateLimited(\(retryAfter.map { "\($0)" } ?? "nil"))"
        case .tokenRejected: "tokenRejected"
        case .notSignedIn: "notSignedIn"
        case .cancelled: "cancelled"
        case .fileUnreadable: "fileUnreadable"
        case .fileNotWritable: "fileNotWritable"
        case .responseTooLarge(let limit): "responseTooLarge(limit: \(limit))"
        case .invalidArgument(let name): "invalidArgument(\(name))"
        case .unexpectedResponse: "unexpectedResponse"
        case .streamingUnavailable: "streamingUnavailable"
        case .hashMismatch: "hashMismatch"
        case .decryptionFailed: "decryptionFailed"
        }
    }

    /// Same as ``description``.
    public var logDescription: String { description }

    /// Maps a requester failure of a transfer of `bytes` bytes (0 when unknown); a `Retry-After`
    /// date is read against `now`. `reading` says whether a file was being read (an upload) or
    /// written (a download), for a transport's file failure.
    package init(_ error: MatrixRequestError, bytes: Int64, reading: Bool, now: Timestamp) {
        switch error {
        case .transport(.cancelled): self = .cancelled
        case .transport(.fileAccess): self = reading ? .fileUnreadable : .fileNotWritable
        case .transport(.tooLarge(let limit)): self = .responseTooLarge(limit: limit)
        case .transport: self = .network
        case .notSignedIn: self = .notSignedIn
        case .invalidRequest: self = .streamingUnavailable
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: self = .tokenRejected
            case .limitExceeded: self = .rateLimited(retryAfter: matrix.retryAfter?.wait(from: now))
            case .tooLarge: self = .tooLarge(bytes: bytes, limit: nil)
            case .notFound: self = .notFound
            default:
                if matrix.status == 413 {
                    self = .tooLarge(bytes: bytes, limit: nil)
                } else if matrix.status == 404 {
                    self = .notFound
                } else {
                    self = .server(status: matrix.status, errorCode: matrix.code.errcode)
                }
            }
        }
    }
}
