import CSodium

/// Why sealing for a recipient failed.
package enum SealedBoxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The recipient's public key does not have the X25519 length (bytes given).
    case invalidPublicKey(length: Int)
    /// libsodium could not be initialised or failed to encrypt.
    case cryptoUnavailable

    /// The case name and the key length; no key material.
    package var description: String {
        switch self {
        case .invalidPublicKey(let length): "invalidPublicKey(length: \(length))"
        case .cryptoUnavailable: "cryptoUnavailable"
        }
    }
}

/// Anonymous public-key encryption (libsodium `crypto_box_seal`): the wallet seals a PIN with
/// the server's X25519 public key so that only the server can read it.
///
/// Each call uses a fresh ephemeral key pair, so two seals of the same PIN differ and the
/// sender cannot be identified. The output is `crypto_box_SEALBYTES` (48) bytes longer than
/// the input.
package enum SealedBox {
    /// The length of a recipient public key.
    package static let publicKeyLength = crypto_box_publickeybytes()
    /// How many bytes sealing adds.
    package static let overhead = crypto_box_sealbytes()

    /// Encrypts `plaintext` for the holder of the secret key matching `recipientPublicKey`.
    package static func seal(_ plaintext: [UInt8], recipientPublicKey: [UInt8]) throws(SealedBoxError) -> [UInt8] {
        guard Sodium.isReady else { throw .cryptoUnavailable }
        guard recipientPublicKey.count == publicKeyLength else {
            throw .invalidPublicKey(length: recipientPublicKey.count)
        }
        var output = [UInt8](repeating: 0, count: plaintext.count + overhead)
        let code = crypto_box_seal(&output, plaintext, UInt64(plaintext.count), recipientPublicKey)
        guard code == 0 else { throw .cryptoUnavailable }
        return output
    }
}
