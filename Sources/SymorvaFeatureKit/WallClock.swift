import Foundation
import SymorvaMachines

/// The wall clock: what time it is, in the milliseconds-since-1970 that Matrix uses.
///
/// The session machine reads no clock; its interpreter stamps token expiry with this clock when
/// a response arrives and turns "refresh at this instant" into a delay. Tests replace it to
/// freeze or shift time without touching the runtime clock that timers sleep on.
public protocol WallClock: Sendable {
    /// The current instant.
    var now: Timestamp { get }
}

/// The system's real-time clock.
public struct SystemWallClock: WallClock {
    /// The system clock.
    public init() {}

    /// The current instant, to the millisecond.
    public var now: Timestamp {
        Timestamp(millisecondsSince1970: Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)))
    }
}
