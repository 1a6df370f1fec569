import SymorvaHTTP
import SymorvaRuntime

/// A real transport (libcurl, or any other) that counts what passes through it: the requests
/// per `METHOD path` and the bytes of every response body. What a test or a benchmark uses to
/// tell how often the product asked the server something, and how much it received.
public final class RequestCountingTransport: HTTPTransport {
    private struct Counts {
        var requests: [String: Int] = [:]
        var bytes: [String: Int] = [:]
    }

    private let inner: any HTTPTransport
    private let counts = Lock(Counts())

    /// Counts what `inner` sends and receives.
    public init(_ inner: any HTTPTransport) { self.inner = inner }

    /// How many requests went to `METHOD path` (the URL's path, percent-decoded), answered or not.
    public func count(_ method: String, _ path: String) -> Int {
        counts.withLock { $0.requests["\(method) \(path)", default: 0] }
    }

    /// The bytes of every response body received so far.
    public var receivedBytes: Int { counts.withLock { $0.bytes.values.reduce(0, +) } }

    /// The bytes of the response bodies of requests whose path satisfies `path`.
    public func receivedBytes(path matches: (String) -> Bool) -> Int {
        counts.withLock { counts in
            counts.bytes.reduce(0) { total, entry in
                matches(String(entry.key.drop { $0 != " " }.dropFirst())) ? total + entry.value : total
            }
        }
    }

    /// Sends `request` through the wrapped transport, counting it and its answer.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let key = "\(request.method.rawValue) \(request.url.path)"
        counts.withLock { $0.requests[key, default: 0] += 1 }
        let response = try await inner.send(request)
        counts.withLock { $0.bytes[key, default: 0] += response.body.count }
        return response
    }
}
