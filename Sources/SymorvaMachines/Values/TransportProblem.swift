/// How a request to a community service (wallet, meetings, AI studio) failed below the HTTP
/// answer, or with a 5xx.
///
/// For a wallet confirmation every one of these is ambiguous: the service may have executed the
/// command before the failure reached us. The transfer machine treats them all alike: the
/// outcome is unknown and is found out by query.
public enum TransportProblem: Sendable, Hashable {
    /// No answer within the request's deadline.
    case timeout
    /// The connection broke while the request or the answer was in transit.
    case connectionReset
    /// The service answered 5xx: it may have committed before failing.
    case serverError(status: Int)
    /// An answer arrived but was truncated or unreadable.
    case responseDropped
    /// No connection could be made. A confirm may still have reached a proxy, so it is queried too.
    case unreachable
}
