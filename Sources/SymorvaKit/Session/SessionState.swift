import SymorvaMachines
import SymorvaRuntime

/// A signed-in account on this device, as the product shows it.
public struct Account: Sendable, Hashable, Identifiable, CustomStringConvertible, LogSafe {
    /// The Matrix user ID (`@alice:example.org`).
    public var userID: UserID
    /// This installation's device of the account.
    public var deviceID: DeviceID
    /// The homeserver the account lives on.
    public var homeserverURL: HomeserverURL

    /// An account.
    public init(userID: UserID, deviceID: DeviceID, homeserverURL: HomeserverURL) {
        self.userID = userID
        self.deviceID = deviceID
        self.homeserverURL = homeserverURL
    }

    init(_ stored: StoredAccount) {
        self.init(userID: stored.userID, deviceID: stored.deviceID, homeserverURL: stored.homeserverURL)
    }

    init(_ session: Session) {
        self.init(userID: session.userID, deviceID: session.deviceID, homeserverURL: session.homeserver.baseURL)
    }

    /// The local account ID (the app flow's and the store's key).
    public var id: AccountID { AccountID(userID) }

    /// `@alice:example.org (device ABCDEF)`: IDs only, safe to log.
    public var description: String { "\(userID) (device \(deviceID))" }
    public var logDescription: String { description }
}

/// Where the member's session is, as views show it.
///
/// A product-level summary of the app flow (which account is active) and of the active
/// account's session machine (signed in, refreshing, soft logged out, …); refreshing tokens is
/// invisible here — the account simply stays ``signedIn(_:)``.
public enum SessionState: Sendable, Equatable, CustomStringConvertible {
    /// ``SymorvaCommunity/launch()`` has not finished reading the stored accounts yet.
    case launching
    /// No account is active.
    case signedOut
    /// A sign-in, registration or re-authentication is under way.
    case signingIn
    /// An account's stored session is being loaded (after launch, sign-in or a switch); no
    /// network is needed for this.
    case restoring(AccountID)
    /// The account is signed in and active.
    case signedIn(Account)
    /// The server ended the account's tokens but kept its device: local data is kept, and
    /// ``SessionClient/reauthenticate(password:)`` resumes on the same device.
    case softLoggedOut(Account)
    /// The active account is changing to this one.
    case switching(to: AccountID)
    /// The account is being signed out and its local data wiped.
    case signingOut(AccountID)
    /// The account is active but its stored session cannot be used (for instance a tampered
    /// or undecryptable token): sign in again or remove the account.
    case unavailable(AccountID, SessionError)

    /// The active account when one is signed in (or soft logged out).
    public var account: Account? {
        switch self {
        case .signedIn(let account), .softLoggedOut(let account): account
        default: nil
        }
    }

    /// The case and its IDs; never a token.
    public var description: String {
        switch self {
        case .launching: "launching"
        case .signedOut: "signedOut"
        case .signingIn: "signingIn"
        case .restoring(let account): "restoring(\(account))"
        case .signedIn(let account): "signedIn(\(account))"
        case .softLoggedOut(let account): "softLoggedOut(\(account))"
        case .switching(let account): "switching(to: \(account))"
        case .signingOut(let account): "signingOut(\(account))"
        case .unavailable(let account, let error): "unavailable(\(account), \(error))"
        }
    }

    /// The product state for the app flow's `flow` and the active session.
    static func combining(
        flow: AppFlowMachine.State, active: ActiveSession, session: SessionMachine.State?
    ) -> SessionState {
        switch flow {
        case .launching, .restoring: return .launching
        case .signedOut: return .signedOut
        case .signingIn: return .signingIn
        case .switching(_, let target): return .switching(to: target)
        case .signingOut(let account): return .signingOut(account)
        case .signedIn(let account):
            switch active {
            case .running(let context) where context.accountID == account:
                guard let session else { return .restoring(account) }
                return session.productState(for: account)
            case .unavailable(let failed, let error) where failed == account:
                return .unavailable(account, error)
            default:
                return .restoring(account)
            }
        }
    }
}

extension SessionMachine.State {
    /// What the member sees of this session state when `account` is the active account.
    func productState(for account: AccountID) -> SessionState {
        switch self {
        case .restoring: .restoring(account)
        case .signedIn(let session), .refreshing(let session, _, _), .persisting(let session, _, _):
            .signedIn(Account(session))
        case .softLoggedOut(let session, _): .softLoggedOut(Account(session))
        case .signingOut, .wipingLocalData: .signingOut(account)
        case .signedOut: .signedOut
        case .failed(_, let error, _): .unavailable(account, error)
        case .discovering, .awaitingCredentials, .authenticating, .registering: .signingIn
        }
    }
}
