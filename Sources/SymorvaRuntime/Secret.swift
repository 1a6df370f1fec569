/// A value that must never reach a log, a trace or a crash report: an access token, a
/// password, a PIN, a key.
///
/// Every textual form of a `Secret` (description, debug description, reflection, string
/// interpolation, log interpolation) is `<redacted>`. Code that genuinely needs the value —
/// the transport writing a header, the store encrypting it — reads ``exposedValue``, which is
/// easy to find in review.
public struct Secret<Value: Sendable>: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The secret itself. Read it only where it leaves the process protected (TLS, encryption).
    public let exposedValue: Value

    /// Wraps a value.
    public init(_ value: Value) { self.exposedValue = value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// Transforms the secret without exposing it to a log.
    public func map<T: Sendable>(_ transform: (Value) throws -> T) rethrows -> Secret<T> {
        Secret<T>(try transform(exposedValue))
    }
}

extension Secret: Equatable where Value: Equatable {}
extension Secret: Hashable where Value: Hashable {}
