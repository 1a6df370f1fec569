#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A wall-clock instant in milliseconds since 1970, the unit Matrix uses.
///
/// Machines never read a clock: interpreters stamp instants (token expiry) with the injected
/// ``WallClock`` when a response arrives, and a timer set for an instant
/// (``TimerDeadline/atWallTime(_:)``) is turned into a delay by the host.
public struct Timestamp: Sendable, Hashable, Comparable, Codable, LogSafe, CustomStringConvertible {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSince1970: Int64
    /// An instant.
    public init(millisecondsSince1970: Int64) { self.millisecondsSince1970 = millisecondsSince1970 }

    /// The instant `duration` later (earlier when negative), to the millisecond.
    public func advanced(by duration: Duration) -> Timestamp {
        Timestamp(millisecondsSince1970: millisecondsSince1970 + duration.wholeMilliseconds)
    }

    /// The time from `other` to `self`.
    public func duration(since other: Timestamp) -> Duration {
        .milliseconds(millisecondsSince1970 - other.millisecondsSince1970)
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSince1970 < rhs.millisecondsSince1970
    }

    public var description: String { "\(millisecondsSince1970)ms" }
    public var logDescription: String { description }
}

extension Duration {
    /// The duration in whole milliseconds, rounded towards zero.
    public var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// The wall clock: what time it is, in the milliseconds-since-1970 that Matrix uses.
///
/// It is injected everywhere the product needs the date (token expiry, `Retry-After` dates,
/// stored `created_at` stamps) and into hosts, which turn wall-clock timers into delays; tests
/// replace it to freeze or shift time without touching the ``RuntimeClock`` that timers sleep
/// on. Only ``SystemWallClock`` reads the system's time.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: Timestamp { get }
}

/// The system's real-time clock.
public struct SystemWallClock: WallClock {
    /// The system clock.
    public init() {}

    /// The current instant, to the millisecond (rounded down).
    public var now: Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(millisecondsSince1970: Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000)
    }
}
