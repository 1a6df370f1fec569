import SymorvaRuntime

/// A Matrix user ID, `@localpart:server.name`, checked against the spec's grammar.
///
/// Matrix IDs are not secrets: they appear in traces and logs (``/SymorvaRuntime/LogSafe``), which is what
/// makes a trace readable. The check accepts historical localparts (any printable ASCII but
/// `:`), because servers still host such accounts.
///
/// The one type of a Matrix user ID across the SDK: an account on this device, a member of a
/// room, the sender of an event, a wallet's sender or recipient.
public struct UserID: Sendable, Hashable, Comparable, Codable, LogSafe, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    /// The full ID, `@alice:example.org`.
    public let rawValue: String

    /// Validates `rawValue`; `nil` when it is not a Matrix user ID.
    public init?(_ rawValue: String) {
        guard rawValue.utf8.count <= 255, rawValue.hasPrefix("@"),
            let colon = rawValue.firstIndex(of: ":")
        else { return nil }
        let localpart = rawValue[rawValue.index(after: rawValue.startIndex)..<colon]
        let server = rawValue[rawValue.index(after: colon)...]
        guard !localpart.isEmpty, localpart.unicodeScalars.allSatisfy(Self.isLocalpartScalar),
            MatrixServerName.isValid(server)
        else { return nil }
        self.rawValue = rawValue
    }

    /// A user ID written as a literal (samples, tests). An invalid literal is a programming
    /// error and traps, naming it.
    public init(stringLiteral value: String) {
        guard let userID = UserID(value) else { preconditionFailure("'\(value)' is not a Matrix user ID") }
        self = userID
    }

    /// An ID the SDK stored itself after it arrived from the homeserver, read back without
    /// checking it again: a row of the chat store is the server's data as it was accepted.
    package init(stored rawValue: String) { self.rawValue = rawValue }

    /// Orders by the full ID, for stable lists.
    public static func < (lhs: UserID, rhs: UserID) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The part between `@` and the first `:`.
    public var localpart: String {
        String(rawValue.dropFirst().prefix { $0 != ":" })
    }

    /// The server name after the first `:`, including a port when there is one.
    public var serverName: String {
        String(rawValue.drop { $0 != ":" }.dropFirst())
    }

    public var description: String { rawValue }
    public var logDescription: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let value = UserID(raw) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a Matrix user ID"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    private static func isLocalpartScalar(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value >= 0x21 && scalar.value <= 0x7E && scalar != ":"
    }
}

/// The grammar of a Matrix server name: a DNS name, an IPv4 address or a bracketed IPv6
/// address, with an optional port (`example.org`, `localhost:8448`, `[::1]:8008`).
package enum MatrixServerName {
    /// Whether `name` is a valid server name.
    package static func isValid(_ name: String) -> Bool { isValid(name[...]) }

    /// Whether `name` is a valid server name.
    package static func isValid(_ name: Substring) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255 else { return false }
        var host = name
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let address = host[host.index(after: host.startIndex)..<close]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                return false
            }
            let rest = host[host.index(after: close)...]
            return rest.isEmpty || isPort(rest)
        }
        if let colon = host.lastIndex(of: ":") {
            guard isPort(host[colon...]) else { return false }
            host = host[..<colon]
        }
        return !host.isEmpty
            && host.unicodeScalars.allSatisfy { scalar in
                (scalar.value < 0x80 && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)))
                    || scalar == "-" || scalar == "."
            }
    }

    /// `:` followed by 1–5 digits.
    private static func isPort(_ text: Substring) -> Bool {
        let digits = text.dropFirst()
        return text.first == ":" && (1...5).contains(digits.count) && digits.allSatisfy { $0.isASCII && $0.isNumber }
    }
}

/// The ID of one device (one sign-in) of an account. Not a secret: devices are listed to
/// other members, and the ID is needed to read a trace.
public struct DeviceID: Sendable, Hashable, Codable, LogSafe, CustomStringConvertible {
    /// The ID as the server issued it.
    public let rawValue: String
    /// Wraps a device ID.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
    public var logDescription: String { rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// The base URL of a homeserver's client-server API: `https://matrix.example.org`, with no
/// trailing slash, so that paths can be appended as they are.
///
/// Checked without Foundation (machines stay Foundation-free): an `http` or `https` scheme,
/// a non-empty host, an optional port and path, no query or fragment. Plain `http` is accepted
/// only for a loopback host (`127.0.0.0/8`, `::1`, `localhost`): anywhere else passwords and
/// tokens would travel in clear, so ``validate(_:)`` answers ``Rejection/plainHTTP``.
public struct HomeserverURL: Sendable, Hashable, Codable, LogSafe, CustomStringConvertible {
    /// Why a text is not a homeserver URL.
    public enum Rejection: Error, Sendable, Hashable {
        /// Not an absolute `http(s)` URL with a valid host and no query or fragment.
        case notAbsoluteHTTPURL
        /// Plain `http` to a host that is not loopback: credentials would travel in clear.
        case plainHTTP
    }

    /// The URL text, without a trailing slash.
    public let rawValue: String

    /// Validates `text`; `nil` when it is not an absolute http(s) URL or uses plain `http` to a
    /// host that is not loopback (``validate(_:)`` says which).
    public init?(_ text: String) {
        guard case .success(let url) = Self.validate(text) else { return nil }
        self = url
    }

    private init(checked rawValue: String) { self.rawValue = rawValue }

    /// Validates `text` and says why it is refused.
    public static func validate(_ text: String) -> Result<HomeserverURL, Rejection> {
        let lowercased = text.lowercased()
        let schemeLength: Int
        let isPlain: Bool
        if lowercased.hasPrefix("https://") {
            (schemeLength, isPlain) = (8, false)
        } else if lowercased.hasPrefix("http://") {
            (schemeLength, isPlain) = (7, true)
        } else {
            return .failure(.notAbsoluteHTTPURL)
        }
        let rest = text.dropFirst(schemeLength)
        let authority = rest.prefix { $0 != "/" }
        guard !text.contains("?"), !text.contains("#"), !text.contains(" "), !authority.contains("@"),
            MatrixServerName.isValid(authority)
        else { return .failure(.notAbsoluteHTTPURL) }
        if isPlain && !isLoopback(authority: authority.lowercased()) { return .failure(.plainHTTP) }
        var trimmed = text
        while trimmed.hasSuffix("/") { trimmed.removeLast() }
        return .success(HomeserverURL(checked: trimmed))
    }

    /// Whether the host of `authority` (`host[:port]`, `[v6][:port]`, lower-cased) is loopback:
    /// `localhost`, `::1` or an IPv4 address in `127.0.0.0/8`.
    package static func isLoopback(authority: some StringProtocol) -> Bool {
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            host = Substring(authority[authority.index(after: authority.startIndex)..<close])
        } else {
            host = Substring(authority.prefix { $0 != ":" })
        }
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4,
            octets.allSatisfy({
                !$0.isEmpty && $0.count <= 3 && $0.allSatisfy({ $0.isASCII && $0.isNumber }) && UInt8($0) != nil
            })
        else { return false }
        return octets[0] == "127"
    }

    /// The conventional base URL of a server name: `https://<serverName>`.
    public init?(serverName: String) {
        self.init("https://" + serverName)
    }

    public var description: String { rawValue }
    public var logDescription: String { rawValue }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        guard let value = HomeserverURL(raw) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not an absolute http(s) URL"))
        }
        self = value
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// Where to start discovery: a server name (looked up through `.well-known`) or a known base
/// URL (checked with `/versions` only).
public enum ServerAddress: Sendable, Hashable, Codable {
    /// A server name such as `example.org`: discovery reads `https://example.org/.well-known/matrix/client`.
    case serverName(String)
    /// A base URL given by the manifest or the user; `serverName` is known when the manifest says so.
    case homeserverURL(HomeserverURL, serverName: String?)

    /// The server name, when it is known before signing in.
    public var serverName: String? {
        switch self {
        case .serverName(let name): name
        case .homeserverURL(_, let name): name
        }
    }
}
