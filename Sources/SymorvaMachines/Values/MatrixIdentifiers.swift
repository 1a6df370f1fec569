import SymorvaRuntime

// The Matrix identifiers of rooms, events and their positions, shared by every feature (chat,
// crypto, meetings, the studio, the directory). Identifiers are opaque wrappers: the machines
// compare and store them, never parse them. The account's identifiers (`UserID`, `DeviceID`,
// `HomeserverURL`) are in `AccountIdentifiers.swift`.

/// A Matrix room ID (`!opaque:example.org`). Safe to log: Matrix IDs are not secrets.
public struct RoomID: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible, LogSafe {
    /// The ID as the server spells it.
    public let rawValue: String
    /// Wraps an ID received from the server or the store.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps an ID received from the server or the store.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }
    public static func < (lhs: RoomID, rhs: RoomID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A Matrix event ID (`$opaque`). Safe to log.
public struct EventID: RawRepresentable, Hashable, Sendable, CustomStringConvertible, LogSafe {
    /// The ID as the server spells it.
    public let rawValue: String
    /// Wraps an ID received from the server or the store.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps an ID received from the server or the store.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }
}

/// The client-chosen transaction ID of one outgoing event
/// (`PUT /rooms/{roomId}/send/{eventType}/{txnId}`).
///
/// Created once when a message is enqueued (by the caller: machines never invent IDs), stored
/// with the queued item and reused on every retry, so a retried PUT is idempotent on the server.
/// The server echoes it in the event's `unsigned.transaction_id`, which is how the local echo
/// is reconciled with the remote one. Safe to log.
public struct TransactionID: RawRepresentable, Hashable, Sendable, CustomStringConvertible, LogSafe {
    /// The ID as sent in the request path.
    public let rawValue: String
    /// Wraps a transaction ID.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a transaction ID.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }
}

/// A `/sync` position (`next_batch`, the next request's `since`).
///
/// Opaque to the client. Not a secret, but not an ID either: it is not `LogSafe`, and traces
/// show only case names.
public struct SyncToken: RawRepresentable, Hashable, Sendable {
    /// The token as the server spelled it.
    public let rawValue: String
    /// Wraps a token.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a token.
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A `/messages` pagination token (a limited sync's `prev_batch`, a page's `end`).
package struct PaginationToken: RawRepresentable, Hashable, Sendable {
    /// The token as the server spelled it.
    package let rawValue: String
    /// Wraps a token.
    package init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a token.
    package init(_ rawValue: String) { self.rawValue = rawValue }
}

/// The ID of a filter uploaded with `POST /user/{userId}/filter`.
public struct FilterID: RawRepresentable, Hashable, Sendable {
    /// The ID as the server returned it.
    public let rawValue: String
    /// Wraps a filter ID.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps a filter ID.
    public init(_ rawValue: String) { self.rawValue = rawValue }
}

/// A position in the store's timeline of one room (linked chunks): where a store read stopped.
///
/// Produced and interpreted by the store; the timeline machine only hands it back to ask for
/// the events before it.
package struct StoreCursor: Hashable, Sendable {
    /// The linked chunk the position is in.
    package let chunkID: Int64
    /// The index of the event inside its chunk.
    package let index: Int
    /// Creates a position.
    package init(chunkID: Int64, index: Int) {
        self.chunkID = chunkID
        self.index = index
    }
}

/// A point in time as milliseconds since the Unix epoch, the unit of Matrix's
/// `origin_server_ts`. Machines never read a clock: timestamps come in with events.
public struct MatrixTimestamp: RawRepresentable, Hashable, Comparable, Sendable, LogSafe {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let rawValue: Int64
    /// Wraps a millisecond timestamp.
    public init(rawValue: Int64) { self.rawValue = rawValue }
    /// Wraps a millisecond timestamp.
    public init(milliseconds: Int64) { self.rawValue = milliseconds }
    public var logDescription: String { String(rawValue) }
    public static func < (lhs: MatrixTimestamp, rhs: MatrixTimestamp) -> Bool { lhs.rawValue < rhs.rawValue }
}
