import SymorvaHTTP
import SymorvaRuntime

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A Matrix error response (`{"errcode": "M_…", "error": "…"}`) with what the client needs
/// to react to it: the code, soft logout, and when to retry.
///
/// ``message`` is server text and may quote user input: it is not safe to log. The code, the
/// status and the retry delay are.
public struct MatrixError: Error, Sendable, Hashable {
    /// A Matrix `errcode`.
    public enum Code: Sendable, Hashable, CustomStringConvertible, LogSafe {
        /// `M_FORBIDDEN`: not allowed (wrong password, no permission).
        case forbidden
        /// `M_UNKNOWN_TOKEN`: the access token is not (or no longer) valid.
        case unknownToken
        /// `M_MISSING_TOKEN`: no access token was sent.
        case missingToken
        /// `M_USER_LOCKED`: the account is locked by the server admin.
        case userLocked
        /// `M_USER_DEACTIVATED`: the account was deactivated.
        case userDeactivated
        /// `M_LIMIT_EXCEEDED`: rate limited; see ``MatrixError/retryAfter``.
        case limitExceeded
        /// `M_USER_IN_USE`: the user ID is taken.
        case userInUse
        /// `M_INVALID_USERNAME`: the user ID is not acceptable.
        case invalidUsername
        /// `M_EXCLUSIVE`: the user ID is reserved by an application service.
        case exclusive
        /// `M_NOT_FOUND`: no such resource.
        case notFound
        /// `M_BAD_JSON`: the request JSON was well-formed but wrong.
        case badJSON
        /// `M_NOT_JSON`: the request body was not JSON.
        case notJSON
        /// `M_MISSING_PARAM`: a required parameter was missing.
        case missingParameter
        /// `M_INVALID_PARAM`: a parameter had a wrong value.
        case invalidParameter
        /// `M_TOO_LARGE`: the request or an item in it is too large.
        case tooLarge
        /// `M_UNRECOGNIZED`: the server does not know the endpoint or method.
        case unrecognized
        /// `M_UNAUTHORIZED`: the request was not correctly authorised.
        case unauthorized
        /// `M_WEAK_PASSWORD`: the password was rejected as too weak.
        case weakPassword
        /// `M_ROOM_IN_USE`: the room alias is taken.
        case roomInUse
        /// `M_GUEST_ACCESS_FORBIDDEN`: guests may not access the room.
        case guestAccessForbidden
        /// `M_RESOURCE_LIMIT_EXCEEDED`: the server hit a resource limit (monthly users, …).
        case resourceLimitExceeded
        /// `M_UNKNOWN_POS`: the sliding sync position expired; restart the connection.
        case unknownPosition
        /// `M_UNKNOWN`: the server reported an error without a specific code.
        case unknown
        /// The body was not a Matrix error object (empty, HTML from a proxy, wrong types).
        case malformedBody
        /// A code this SDK does not know, verbatim.
        case other(String)

        private static let table: [(Code, String)] = [
            (.forbidden, "M_FORBIDDEN"), (.unknownToken, "M_UNKNOWN_TOKEN"), (.missingToken, "M_MISSING_TOKEN"),
            (.userLocked, "M_USER_LOCKED"), (.userDeactivated, "M_USER_DEACTIVATED"),
            (.limitExceeded, "M_LIMIT_EXCEEDED"), (.userInUse, "M_USER_IN_USE"),
            (.invalidUsername, "M_INVALID_USERNAME"), (.exclusive, "M_EXCLUSIVE"), (.notFound, "M_NOT_FOUND"),
            (.badJSON, "M_BAD_JSON"), (.notJSON, "M_NOT_JSON"), (.missingParameter, "M_MISSING_PARAM"),
            (.invalidParameter, "M_INVALID_PARAM"), (.tooLarge, "M_TOO_LARGE"), (.unrecognized, "M_UNRECOGNIZED"),
            (.unauthorized, "M_UNAUTHORIZED"), (.weakPassword, "M_WEAK_PASSWORD"), (.roomInUse, "M_ROOM_IN_USE"),
            (.guestAccessForbidden, "M_GUEST_ACCESS_FORBIDDEN"),
            (.resourceLimitExceeded, "M_RESOURCE_LIMIT_EXCEEDED"), (.unknownPosition, "M_UNKNOWN_POS"),
            (.unknown, "M_UNKNOWN"),
        ]

        /// The code for an `errcode` string.
        public init(_ errcode: String) {
            self = Self.table.first { $0.1 == errcode }?.0 ?? .other(errcode)
        }

        /// The `errcode` string; `malformedBody` has none and prints as `<malformed body>`.
        public var errcode: String {
            switch self {
            case .other(let code): code
            case .malformedBody: "<malformed body>"
            default: Self.table.first { $0.0 == self }?.1 ?? "M_UNKNOWN"
            }
        }

        /// The `errcode` string.
        public var description: String { errcode }
        /// The `errcode` string: codes are protocol vocabulary, not user data.
        public var logDescription: String { errcode }
    }

    /// The HTTP status of the response.
    public var status: Int
    /// The `errcode`.
    public var code: Code
    /// The server's human-readable `error` text; may quote user input, never log it.
    public var message: String?
    /// `soft_logout`: with ``Code/unknownToken``, the session may be refreshed or re-authenticated
    /// without wiping local data.
    public var isSoftLogout: Bool
    /// How long to wait before retrying, from the `Retry-After` header or `retry_after_ms`.
    public var retryAfter: RetryAfter?

    /// Creates an error (tests and fakes).
    public init(
        status: Int, code: Code, message: String? = nil, isSoftLogout: Bool = false, retryAfter: RetryAfter? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.isSoftLogout = isSoftLogout
        self.retryAfter = retryAfter
    }

    /// The error a non-2xx response carries, or `nil` for a 2xx (or 1xx/3xx) response.
    ///
    /// Never fails: a body that is not a Matrix error object yields ``Code/malformedBody`` with
    /// the status (and the `Retry-After` header, if any) still filled in. The `Retry-After`
    /// header wins over the deprecated `retry_after_ms` body field.
    public static func decode(from response: HTTPResponse) -> MatrixError? {
        guard response.status >= 400 else { return nil }
        let header = response.headers["Retry-After"].flatMap(RetryAfter.init(headerValue:))
        guard let body = WireJSON.decodeIfValid(Body.self, from: response.body),
            let errcode = body.errcode
        else {
            return MatrixError(status: response.status, code: .malformedBody, retryAfter: header)
        }
        // A negative hint means nothing: it counts as none (``ServerWait``).
        let bodyDelay = ServerWait.clamp(milliseconds: body.retryAfterMilliseconds).map(RetryAfter.delay)
        return MatrixError(
            status: response.status, code: Code(errcode), message: body.error,
            isSoftLogout: body.softLogout ?? false, retryAfter: header ?? bodyDelay)
    }

    private struct Body: Decodable {
        var errcode: String?
        var error: String?
        var softLogout: Bool?
        var retryAfterMilliseconds: Double?

        enum CodingKeys: String, CodingKey {
            case errcode, error
            case softLogout = "soft_logout"
            case retryAfterMilliseconds = "retry_after_ms"
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            errcode = try container.decodeIfPresent(String.self, forKey: .errcode)
            error = try container.decodeIfPresent(String.self, forKey: .error)
            softLogout = try container.decodeIfPresent(Bool.self, forKey: .softLogout)
            // A garbage hint (a string, a huge number) counts as none; it never loses the errcode.
            retryAfterMilliseconds = try? container.decodeIfPresent(Double.self, forKey: .retryAfterMilliseconds)
        }
    }
}

extension MatrixError: CustomStringConvertible, LogSafe {
    /// `M_CODE (status)` plus soft logout and retry delay; never the server's message.
    public var description: String {
        var text = "\(code.errcode) (\(status))"
        if isSoftLogout { text += " soft_logout" }
        if let retryAfter { text += " retry_after=\(retryAfter)" }
        return text
    }

    /// Same as ``description``.
    public var logDescription: String { description }
}

/// When the server asked the client to retry: after a delay, or at a wall-clock time.
///
/// `Retry-After` is either a number of seconds or an HTTP-date (RFC 9110 §10.2.3); Matrix's
/// older `retry_after_ms` is a delay in milliseconds.
public enum RetryAfter: Sendable, Hashable, CustomStringConvertible {
    /// Retry after this long.
    case delay(Duration)
    /// Retry at this time.
    case date(Date)

    /// Parses a `Retry-After` header value; `nil` when it is neither form.
    public init?(headerValue: String) {
        let value = headerValue.trimmingPrefix(while: { $0 == " " || $0 == "\t" })
        let trimmed = String(value.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
        if !trimmed.isEmpty, trimmed.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard let seconds = Int64(trimmed) else { return nil }  // Overflow: no useful delay.
            self = .delay(.seconds(seconds))
        } else if let date = HTTPDate.parse(trimmed) {
            self = .date(date)
        } else {
            return nil
        }
    }

    /// How long the SDK waits from `now` (an instant of the injected
    /// ``/SymorvaRuntime/WallClock``): `delay(from:)` clamped by
    /// ``/SymorvaRuntime/ServerWait`` (a date already past waits the floor, a far one the ceiling).
    public func wait(from now: Timestamp) -> Duration {
        ServerWait.clamp(delay(from: now)) ?? ServerWait.floor
    }

    /// The time to wait from `now`, an instant of the injected ``/SymorvaRuntime/WallClock``;
    /// never negative. As the server said, not clamped: wait ``wait(from:)`` instead.
    public func delay(from now: Timestamp) -> Duration {
        delay(from: Date(timeIntervalSince1970: Double(now.millisecondsSince1970) / 1_000))
    }

    /// The time to wait from `now`; never negative.
    public func delay(from now: Date) -> Duration {
        switch self {
        case .delay(let duration):
            return max(.zero, duration)
        case .date(let date):
            let seconds = date.timeIntervalSince(now)
            return seconds > 0 ? .milliseconds(Int64((seconds * 1000).rounded(.up))) : .zero
        }
    }

    /// `5s` or `@<unix seconds>`.
    public var description: String {
        switch self {
        case .delay(let duration): "\(duration)"
        case .date(let date): "@\(Int64(date.timeIntervalSince1970))"
        }
    }
}

/// Parses the three HTTP-date forms RFC 9110 requires recipients to accept.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` (IMF-fixdate), `Sunday, 06-Nov-94 08:49:37 GMT`
    /// (RFC 850) or `Sun Nov  6 08:49:37 1994` (asctime).
    static func parse(_ text: String) -> Date? {
        let words = text.split(whereSeparator: { $0 == " " }).map(String.init)
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT" {
            return make(day: words[1], month: words[2], year: words[3], time: words[4])
        }
        if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
            let parts = words[1].split(separator: "-").map(String.init)
            guard parts.count == 3, let shortYear = Int(parts[2]), parts[2].count == 2 else { return nil }
            // RFC 9110: a two-digit year more than 50 years in the future is in the past century.
            let year = shortYear < 70 ? 2000 + shortYear : 1900 + shortYear
            return make(day: parts[0], month: parts[1], year: String(year), time: words[2])
        }
        if words.count == 5, !words[0].hasSuffix(",") {
            return make(day: words[2], month: words[1], year: words[4], time: words[3])
        }
        return nil
    }

    private static func make(day: String, month: String, year: String, time: String) -> Date? {
        guard let day = Int(day), (1...31).contains(day),
            let monthIndex = months.firstIndex(of: month.lowercased()),
            let year = Int(year), year >= 1900, year < 10000
        else { return nil }
        let clock = time.split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (0..<24).contains(clock[0]), (0..<60).contains(clock[1]), (0...60).contains(clock[2])
        else { return nil }
        let days = daysFromCivil(year: year, month: monthIndex + 1, day: day)
        let seconds = Int64(days) * 86_400 + Int64(clock[0] * 3600 + clock[1] * 60 + clock[2])
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's algorithm).
    private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let shiftedYear = month <= 2 ? year - 1 : year
        let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
        let yearOfEra = shiftedYear - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
