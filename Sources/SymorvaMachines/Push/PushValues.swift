import SymorvaRuntime

/// The payload format a push gateway gets (`data.format`).
public enum PushFormat: String, Sendable, Hashable {
    /// Only the event ID, room ID, counts and device: the app fetches the event to show it
    /// (the notification-service way; nothing of the message crosses the gateway).
    case eventIDOnly = "event_id_only"
    /// The homeserver's full notification, content included.
    case full
}

/// An HTTP pusher as the SDK sets it on the homeserver (`POST /pushers/set`).
///
/// `appID` is reverse DNS and says which build it is, as the Matrix iOS SDK advises:
/// `org.example.app.ios.dev` for development builds, `….prod` for the App Store build: the
/// gateway needs a different APNs environment for each. `profileTag` is the installation's
/// (`PushClient.profileTag()` in `SymorvaPush`), set by the SDK.
public struct Pusher: Sendable, Hashable, CustomStringConvertible {
    /// The device token the gateway delivers to (APNs/FCM token; opaque).
    public var pushkey: String
    /// Reverse-DNS application ID with the build kind: `org.symorva.ios.dev`, `org.symorva.ios.prod`.
    public var appID: String
    /// The application's name, for the member's list of devices that get pushes.
    public var appDisplayName: String
    /// The device's name, for the same list.
    public var deviceDisplayName: String
    /// The installation's profile tag: 16 alphanumerics generated once and kept.
    public var profileTag: String
    /// The language notifications are prepared in (`en`, `de-CH`).
    public var language: String
    /// The gateway's notify endpoint (`https://push.example.org/_matrix/push/v1/notify`).
    public var gatewayURL: String
    /// What the gateway gets.
    public var format: PushFormat

    /// A pusher.
    public init(
        pushkey: String, appID: String, appDisplayName: String, deviceDisplayName: String, profileTag: String,
        language: String = "en", gatewayURL: String, format: PushFormat = .eventIDOnly
    ) {
        self.pushkey = pushkey
        self.appID = appID
        self.appDisplayName = appDisplayName
        self.deviceDisplayName = deviceDisplayName
        self.profileTag = profileTag
        self.language = language
        self.gatewayURL = gatewayURL
        self.format = format
    }

    /// The app ID only: a pushkey is a device token, names are member-chosen.
    public var description: String { "Pusher(\(appID), pushkey: <private>)" }
}

/// Why a push operation failed.
public enum PushError: Error, Sendable, Hashable, CustomStringConvertible, LogSafe {
    /// Nobody is signed in.
    case notSignedIn
    /// The account the operation was for was switched away from or signed out.
    case accountEnded
    /// The input is not what the operation takes; says which.
    case invalidInput(String)
    /// The server knows no such thing (a rule, an event, a pushkey).
    case notFound
    /// The server refused: the account may not do this.
    case forbidden
    /// The server asked to wait.
    case rateLimited(retryAfter: Duration?)
    /// The server answered with an error code and status.
    case server(code: String, status: Int)
    /// No usable answer: the exchange never completed (no connection, timeout, cancelled) or
    /// the server failed (5xx), as the SDK classifies it everywhere.
    case transport(TransportProblem)
    /// The answer was not the documented JSON.
    case malformedResponse
    /// The installation's profile tag could not be read or kept (its file).
    case storage(String)

    public var description: String {
        switch self {
        case .notSignedIn: "notSignedIn"
        case .accountEnded: "accountEnded"
        case .invalidInput(let what): "invalidInput(\(what))"
        case .notFound: "notFound"
        case .forbidden: "forbidden"
        case .rateLimited(let wait): "rateLimited(retryAfter: \(wait.map { "\($0)" } ?? "nil"))"
        case .server(let code, let status): "server(\(code), status: \(status))"
        case .transport(let problem): "transport(\(problem))"
        case .malformedResponse: "malformedResponse"
        case .storage(let problem): "storage(\(problem))"
        }
    }

    public var logDescription: String { description }
}
