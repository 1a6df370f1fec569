import SymorvaRuntime

/// Why a community manifest (`symorva.config.json`) could not be used.
///
/// Every case names where the problem is (a field path such as `homeserver.url` or
/// `modules.wallet.assets[0].code`, or a line and column), so that an operator can fix the
/// file without reading SDK code.
public enum ConfigurationError: Error, Sendable, Hashable, LogSafe, CustomStringConvertible {
    /// The file could not be read at all.
    case unreadable(path: String, reason: String)
    /// The text is not JSON; `line` and `column` (1-based) point at the first bad character.
    case malformedJSON(line: Int, column: Int, reason: String)
    /// The manifest's `version` is one this SDK does not understand.
    case unsupportedVersion(Int)
    /// A required field is absent.
    case missingField(String)
    /// A field is present but its value is unusable.
    case invalidField(String, reason: String)
    /// A URL field (`homeserver.url`, `services.url`) uses plain `http` to a host that is not
    /// loopback: passwords and tokens would travel in clear. Use `https`; `http` is accepted
    /// only for `127.0.0.0/8`, `::1` and `localhost`.
    case insecureURL(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        case .malformedJSON(let line, let column, let reason): "malformed JSON at \(line):\(column): \(reason)"
        case .unsupportedVersion(let version): "unsupported manifest version \(version) (this SDK reads version 1)"
        case .missingField(let path): "missing field \(path)"
        case .invalidField(let path, let reason): "invalid field \(path): \(reason)"
        case .insecureURL(let path):
            "invalid field \(path): plain http is only allowed for loopback hosts (127.0.0.0/8, ::1, localhost); use https"
        }
    }

    public var logDescription: String { description }
}
