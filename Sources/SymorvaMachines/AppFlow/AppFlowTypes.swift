import SymorvaRuntime

/// A signed-in account on this device, identified by its Matrix user ID (`@alice:example.org`).
///
/// Matrix IDs may be logged, so the type is ``LogSafe``; display names and tokens never live
/// here.
public struct AccountID: Hashable, Sendable, Comparable, CustomStringConvertible, LogSafe,
    ExpressibleByStringLiteral
{
    /// The Matrix user ID.
    public let userID: String

    /// Wraps a Matrix user ID.
    public init(_ userID: String) { self.userID = userID }

    /// Wraps a Matrix user ID written as a literal (tests, samples).
    public init(stringLiteral value: String) { self.userID = value }

    /// Orders accounts by user ID, for stable lists.
    public static func < (lhs: AccountID, rhs: AccountID) -> Bool { lhs.userID < rhs.userID }

    /// The Matrix user ID.
    public var description: String { userID }

    /// The Matrix user ID (safe to log).
    public var logDescription: String { userID }
}

/// One run of the sign-in flow, and where to go back to if it does not end with an account.
public struct SignInAttempt: Hashable, Sendable {
    /// The account that was active when sign-in started (adding a second account), or `nil`
    /// when nobody was signed in. Cancelling or failing returns to it.
    public var returnTo: AccountID?

    /// Creates an attempt.
    public init(returnTo: AccountID? = nil) { self.returnTo = returnTo }
}

/// Why the app flow could not reach a signed-in account.
public enum AppFlowError: Error, Hashable, Sendable {
    /// The stored accounts could not be read (store missing, corrupt or locked).
    case storeUnavailable
    /// The homeserver rejected the credentials.
    case credentialsRejected
    /// The homeserver could not be reached or answered with an unusable response.
    case serverUnreachable
    /// The session feature failed for a reason it reports itself.
    case sessionFailed
}

/// What restoring found on the device.
public struct RestoredAccounts: Hashable, Sendable {
    /// Every account with stored credentials, in the order the member added them.
    public var accounts: [AccountID]
    /// The account that was active when the app last ran, if any.
    public var active: AccountID?

    /// Creates a restore result.
    public init(accounts: [AccountID], active: AccountID?) {
        self.accounts = accounts
        self.active = active
    }

    /// The account to activate: the last active one if it still has credentials, else the
    /// first stored one, else none.
    public var accountToActivate: AccountID? {
        if let active, accounts.contains(active) { return active }
        return accounts.first
    }
}
