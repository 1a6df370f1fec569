#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

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
