import Foundation
import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why a chat operation failed. Every case is safe to log: none carries a message body, a room
/// name or server text.
public enum ChatError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// No usable answer from the homeserver (offline, connection refused, timed out).
    case network
    /// The homeserver refused the request: HTTP status and Matrix `errcode` (`M_FORBIDDEN`,
    /// `M_NOT_FOUND`, …).
    case server(status: Int, errorCode: String)
    /// The homeserver rate-limited the request; try again after `retryAfter` when given.
    case rateLimited(retryAfter: Duration?)
    /// The access token was rejected (`M_UNKNOWN_TOKEN`) even after the requester's refresh:
    /// a session problem, reported to the session rather than handled by chat.
    case tokenRejected
    /// No account is signed in (``ChatClient`` has no account to act for), or the requester
    /// has no session.
    case notSignedIn
    /// The handle (a ``Conversation``, an ``AccountChat``) belongs to an account that was
    /// switched away from or signed out: it never acts for the account that is active now.
    case accountEnded
    /// The member's power level in the room is below what the action needs.
    case insufficientPowerLevel(required: Int, actual: Int)
    /// No such conversation in this account's store.
    case unknownConversation(RoomID)
    /// No such event in the conversation's stored timeline.
    case unknownEvent(EventID)
    /// An argument is not valid (an empty message, an ID of the wrong form); names the argument.
    case invalidArgument(name: String)
    /// The homeserver's answer could not be read.
    case unexpectedResponse
    /// The account's chat database failed.
    case store(ChatStoreError)
    /// The room is end-to-end encrypted and this account has no working encryption (its crypto
    /// module did not start): nothing is sent or stored in the clear.
    case encryptionUnavailable
    /// Attachments cannot be sent here: no folder for their copies (``ChatOptions/attachmentsDirectory``).
    case attachmentsUnavailable
    /// The file to send cannot be read (missing, not a regular file, no permission).
    case fileUnreadable
    /// An upload the action needed failed (an avatar).
    case media(MediaError)

    /// The case and its codes.
    public var description: String {
        switch self {
        case .network: "network"
        case .server(let status, let errorCode): "server(\(status), \(errorCode))"
        case .rateLimited(let retryAfter): "rateLimited(\(retryAfter.map { "\($0)" } ?? "nil"))"
        case .tokenRejected: "tokenRejected"
        case .notSignedIn: "notSignedIn"
        case .accountEnded: "accountEnded"
        case .insufficientPowerLevel(let required, let actual):
            "insufficientPowerLevel(required: \(required), actual: \(actual))"
        case .unknownConversation(let roomID): "unknownConversation(\(roomID))"
        case .unknownEvent(let eventID): "unknownEvent(\(eventID))"
        case .invalidArgument(let name): "invalidArgument(\(name))"
        case .unexpectedResponse: "unexpectedResponse"
        case .store(let error): "store(\(error))"
        case .encryptionUnavailable: "encryptionUnavailable"
        case .attachmentsUnavailable: "attachmentsUnavailable"
        case .fileUnreadable: "fileUnreadable"
        case .media(let error): "media(\(error))"
        }
    }

    /// Same as ``description``.
    public var logDescription: String { description }

    /// Maps a requester failure; a `Retry-After` date is read against `now`.
    init(_ error: MatrixRequestError, now: Timestamp) {
        switch error {
        case .transport: self = .network
        case .notSignedIn: self = .notSignedIn
        case .invalidRequest: self = .invalidArgument(name: "request")
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: self = .tokenRejected
            case .limitExceeded: self = .rateLimited(retryAfter: matrix.retryAfter?.wait(from: now))
            default: self = .server(status: matrix.status, errorCode: matrix.code.errcode)
            }
        }
    }
}

/// How the interpreters classify a failed request: the one place that decides what is
/// transient, what is the session's business and what is final.
enum RequestFailure {
    /// What a failed `/sync` means for the sync machine. `nil`: the token was rejected.
    static func syncError(_ error: MatrixRequestError, now: Timestamp) -> SyncError? {
        switch error {
        case .transport: return .network
        case .notSignedIn: return nil
        case .invalidRequest: return .rejected(status: 0, errorCode: "invalid_request")
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: return nil
            case .limitExceeded: return .rateLimited(retryAfter: matrix.retryAfter?.wait(from: now))
            default:
                if matrix.status >= 500 || matrix.status == 408 { return .server(status: matrix.status) }
                return .rejected(status: matrix.status, errorCode: matrix.code.errcode)
            }
        }
    }

    /// What a failed PUT means for the send queue.
    static func sendError(_ error: MatrixRequestError, now: Timestamp) -> SendError {
        switch error {
        case .transport: return .network
        case .notSignedIn: return .unknownToken
        case .invalidRequest: return .permanent(.rejected(status: 0, errorCode: "invalid_request"))
        case .matrix(let matrix):
            switch matrix.code {
            case .unknownToken, .missingToken: return .unknownToken
            case .limitExceeded: return .rateLimited(retryAfter: matrix.retryAfter?.wait(from: now))
            case .forbidden: return .permanent(.forbidden)
            case .tooLarge: return .permanent(.tooLarge)
            default:
                if matrix.status >= 500 || matrix.status == 408 { return .server(status: matrix.status) }
                if matrix.status == 413 { return .permanent(.tooLarge) }
                return .permanent(.rejected(status: matrix.status, errorCode: matrix.code.errcode))
            }
        }
    }

    /// What a failed `/messages` means for the timeline machine.
    static func timelineError(_ error: MatrixRequestError) -> TimelineError {
        switch error {
        case .transport: return .network
        case .notSignedIn: return .server(status: 401, errorCode: "M_UNKNOWN_TOKEN")
        case .invalidRequest: return .server(status: 0, errorCode: nil)
        case .matrix(let matrix): return .server(status: matrix.status, errorCode: matrix.code.errcode)
        }
    }

    /// Whether the error is the session's business (an access token the requester could not renew).
    static func isTokenProblem(_ error: MatrixRequestError) -> Bool {
        switch error {
        case .notSignedIn: return true
        case .matrix(let matrix): return matrix.code == .unknownToken || matrix.code == .missingToken
        case .transport, .invalidRequest: return false
        }
    }
}
