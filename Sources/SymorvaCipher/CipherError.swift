/// Why a symmetric primitive refused its input or failed in libcrypto.
///
/// Descriptions carry lengths and operation names only, never key, IV or data bytes.
package enum CipherError: Error, Sendable, Hashable, CustomStringConvertible {
    /// A key has the wrong length for the primitive (`expected` and `actual` in bytes).
    case invalidKeyLength(expected: Int, actual: Int)
    /// An initialisation vector (AES-CTR's initial counter block) has the wrong length.
    case invalidIVLength(expected: Int, actual: Int)
    /// A requested output length is outside what the primitive can produce (HKDF: 1 to 255 ×
    /// 32 bytes; PBKDF2: at least 1 byte).
    case invalidOutputLength(Int)
    /// PBKDF2 was asked for fewer than one iteration, or more than libcrypto accepts.
    case invalidIterationCount(Int)
    /// An input is longer than libcrypto's `int` length parameters accept (bytes given).
    case inputTooLong(Int)
    /// The libcrypto call named here failed (no input reaches the description).
    case library(operation: String)

    /// The case name with lengths; no key material.
    package var description: String {
        switch self {
        case .invalidKeyLength(let expected, let actual): "invalidKeyLength(expected: \(expected), actual: \(actual))"
        case .invalidIVLength(let expected, let actual): "invalidIVLength(expected: \(expected), actual: \(actual))"
        case .invalidOutputLength(let length): "invalidOutputLength(\(length))"
        case .invalidIterationCount(let count): "invalidIterationCount(\(count))"
        case .inputTooLong(let length): "inputTooLong(\(length))"
        case .library(let operation): "library(\(operation))"
        }
    }
}
