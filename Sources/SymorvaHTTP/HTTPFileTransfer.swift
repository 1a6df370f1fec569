import SymorvaRuntime

/// A request body read from a file while it is sent, never loaded into memory: media uploads.
///
/// The transport opens the file when the transfer starts and reads it in chunks as the
/// connection takes them; a transfer the transport has to send again rewinds it. The path is
/// not logged.
package struct HTTPBodyFile: Sendable, Hashable {
    /// The file's path.
    package var path: String
    /// How many bytes of it are sent (its size when the request was built).
    package var length: Int64
    /// Changes the bytes as they are read, before they are sent (an attachment encrypted while
    /// it uploads); `nil` sends the file as it is.
    package var transform: (any HTTPBodyTransform)?

    /// A body of `length` bytes from the start of the file at `path`, changed by `transform`
    /// as it is read when one is given.
    package init(path: String, length: Int64, transform: (any HTTPBodyTransform)? = nil) {
        self.path = path
        self.length = length
        self.transform = transform
    }

    package static func == (lhs: HTTPBodyFile, rhs: HTTPBodyFile) -> Bool {
        lhs.path == rhs.path && lhs.length == rhs.length
            && lhs.transform.map(ObjectIdentifier.init) == rhs.transform.map(ObjectIdentifier.init)
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(path)
        hasher.combine(length)
        hasher.combine(transform.map(ObjectIdentifier.init))
    }
}

/// Changes a body file's bytes in order, as the transport reads them and before it sends them:
/// an attachment is encrypted chunk by chunk while it uploads, so no encrypted copy has to be
/// written first.
///
/// The transport calls ``restart()`` before the first read and whenever it sends the body again
/// from its start (a rewind), then ``transform(_:)`` with each chunk, in order, on one thread at
/// a time. A transformed body can only be sent again from its start: a rewind to another offset
/// fails the transfer. The transform must keep the length (a stream cipher does).
package protocol HTTPBodyTransform: AnyObject, Sendable {
    /// The body is read from its start (again): forget the bytes seen. `false` fails the transfer.
    func restart() -> Bool
    /// Changes the next bytes of the body in place. `false` fails the transfer (`fileAccess`).
    func transform(_ bytes: UnsafeMutableRawBufferPointer) -> Bool
}

/// How far one transfer has come, in bytes. Totals are `nil` while unknown (no `Content-Length`).
package struct HTTPTransferCounts: Sendable, Hashable {
    /// Body bytes sent so far.
    package var sent: Int64
    /// Body bytes to send, when known.
    package var sendTotal: Int64?
    /// Body bytes received so far.
    package var received: Int64
    /// Body bytes to receive, when known.
    package var receiveTotal: Int64?

    /// Counts.
    package init(sent: Int64 = 0, sendTotal: Int64? = nil, received: Int64 = 0, receiveTotal: Int64? = nil) {
        self.sent = sent
        self.sendTotal = sendTotal
        self.received = received
        self.receiveTotal = receiveTotal
    }
}

/// Receives a transfer's progress while it runs.
///
/// The transport calls ``report(_:)`` on its own thread, often (libcurl calls its progress
/// function many times a second): the handler must be quick and must not block. Reports
/// equal to the previous one are not repeated. Compared and hashed by identity, so that a
/// request that carries one stays `Hashable`.
package final class HTTPTransferProgress: Sendable, Hashable {
    private let handler: @Sendable (HTTPTransferCounts) -> Void
    private let last = Lock<HTTPTransferCounts?>(nil)

    /// A progress sink calling `handler` with each new count.
    package init(_ handler: @escaping @Sendable (HTTPTransferCounts) -> Void) {
        self.handler = handler
    }

    /// The last counts reported, if any.
    package var latest: HTTPTransferCounts? { last.withLock { $0 } }

    /// Hands `counts` to the handler unless they equal the previous report.
    package func report(_ counts: HTTPTransferCounts) {
        let changed = last.withLock { last in
            guard last != counts else { return false }
            last = counts
            return true
        }
        if changed { handler(counts) }
    }

    package static func == (lhs: HTTPTransferProgress, rhs: HTTPTransferProgress) -> Bool { lhs === rhs }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// A transport that honours ``HTTPRequest/bodyFile``, ``HTTPRequest/responseFile`` and
/// ``HTTPRequest/progress`` (the SDK's libcurl transport). Media transfers refuse to run on a
/// transport that is not one, rather than send an empty body.
package protocol HTTPFileTransport: HTTPTransport {}
