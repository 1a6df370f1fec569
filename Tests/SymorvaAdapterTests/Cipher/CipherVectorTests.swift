import Testing

@testable import SymorvaCipher

/// The libcrypto adapter against published test vectors: RFC 4231 (HMAC-SHA-256), RFC 5869
/// (HKDF-SHA-256), NIST SP 800-38A F.5.5/F.5.6 (AES-256-CTR), FIPS 180-2 (SHA-256) and the
/// PBKDF2-HMAC-SHA512 vectors in the style of RFC 6070.
@Suite("libcrypto adapter (SymorvaCipher)")
struct CipherVectorTests {
    // MARK: HMAC-SHA-256, RFC 4231 section 4

    @Test(
        "HMAC-SHA-256 matches RFC 4231",
        arguments: [
            // Test case 1
            (
                hexBytes("0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"), Array("Hi There".utf8),
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
            ),
            // Test case 2
            (
                Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
            ),
            // Test case 3
            (
                [UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"
            ),
            // Test case 4
            (
                Array(1...25), [UInt8](repeating: 0xcd, count: 50),
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"
            ),
            // Test case 6
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
            ),
            // Test case 7
            (
                [UInt8](repeating: 0xaa, count: 131),
                Array(
                    ("This is a test using a larger than block-size key and a larger than block-size data. "
                        + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
                "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"
            ),
        ] as [([UInt8], [UInt8], String)])
    func hmacVectors(key: [UInt8], data: [UInt8], expected: String) throws {
        let mac = try HMACSHA256.authenticate(data, key: key)
        #expect(hexString(mac) == expected)
        #expect(try HMACSHA256.verify(mac, of: data, key: key))
    }

    @Test("HMAC-SHA-256 truncated to 128 bits matches RFC 4231 test case 5")
    func hmacTruncated() throws {
        let mac = try HMACSHA256.authenticate(
            Array("Test With Truncation".utf8), key: [UInt8](repeating: 0x0c, count: 20))
        #expect(hexString(Array(mac.prefix(16))) == "a3b6167473100ee06e0c796c2955552b")
    }

    @Test("HMAC verification rejects a changed MAC, a changed message and a short MAC")
    func hmacRejects() throws {
        let key = [UInt8](repeating: 7, count: 32)
        let data = Array("secret storage".utf8)
        var mac = try HMACSHA256.authenticate(data, key: key)
        #expect(try !HMACSHA256.verify(mac, of: data + [0], key: key))
        #expect(try !HMACSHA256.verify(Array(mac.prefix(31)), of: data, key: key))
        mac[31] ^= 1
        #expect(try !HMACSHA256.verify(mac, of: data, key: key))
    }

    @Test("HMAC with an empty key is the RFC 2104 MAC under a block of zeros")
    func hmacEmptyKey() throws {
        let data = Array("x".utf8)
        #expect(try HMACSHA256.authenticate(data, key: []) == HMACSHA256.authenticate(data, key: [0]))
    }

    // MARK: HKDF-SHA-256, RFC 5869 appendix A

    @Test("HKDF-SHA-256 matches RFC 5869 test case 1 (basic)")
    func hkdfCase1() throws {
        let okm = try HKDFSHA256.derive(
            inputKey: [UInt8](repeating: 0x0b, count: 22), salt: Array(0x00...0x0c), info: Array(0xf0...0xf9),
            length: 42)
        #expect(
            hexString(okm)
                == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test("HKDF-SHA-256 matches RFC 5869 test case 2 (longer inputs and outputs)")
    func hkdfCase2() throws {
        let okm = try HKDFSHA256.derive(
            inputKey: Array(0x00...0x4f), salt: Array(0x60...0xaf), info: Array(0xb0...0xff), length: 82)
        #expect(
            hexString(okm)
                == "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
                + "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
                + "cc30c58179ec3e87c14c01d5c1f3434f1d87")
    }

    @Test("HKDF-SHA-256 matches RFC 5869 test case 3 (empty salt and info)")
    func hkdfCase3() throws {
        let okm = try HKDFSHA256.derive(inputKey: [UInt8](repeating: 0x0b, count: 22), salt: [], info: [], length: 42)
        #expect(
            hexString(okm)
                == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
    }

    @Test("HKDF refuses an output length of 0 or over 255 blocks")
    func hkdfLengths() {
        #expect(throws: CipherError.invalidOutputLength(0)) {
            try HKDFSHA256.derive(inputKey: [1], salt: [], info: [], length: 0)
        }
        #expect(throws: CipherError.invalidOutputLength(255 * 32 + 1)) {
            try HKDFSHA256.derive(inputKey: [1], salt: [], info: [], length: 255 * 32 + 1)
        }
    }

    // MARK: AES-256-CTR, NIST SP 800-38A F.5.5 and F.5.6

    static let ctrKey = hexBytes("603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4")
    static let ctrCounter = hexBytes("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    static let ctrPlaintext = hexBytes(
        "6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"
            + "30c81c46a35ce411e5fbc1191a0a52eff69f2445df4f9b17ad2b417be66c3710")
    static let ctrCiphertext = hexBytes(
        "601ec313775789a5b7a7f504bbf3d228f443e3ca4d62b59aca84e990cacaf5c5"
            + "2b0930daa23de94ce87017ba2d84988ddfc9c58db67aada613c2dd08457941a6")

    @Test("AES-256-CTR encrypts SP 800-38A F.5.5 and decrypts F.5.6")
    func ctrVectors() throws {
        #expect(try AES256CTR.apply(key: Self.ctrKey, iv: Self.ctrCounter, to: Self.ctrPlaintext) == Self.ctrCiphertext)
        #expect(try AES256CTR.apply(key: Self.ctrKey, iv: Self.ctrCounter, to: Self.ctrCiphertext) == Self.ctrPlaintext)
    }

    @Test("AES-256-CTR streamed in uneven pieces gives the one-shot result")
    func ctrStream() throws {
        let stream = try AES256CTRStream(key: Self.ctrKey, iv: Self.ctrCounter)
        var output: [UInt8] = []
        var offset = 0
        for size in [1, 15, 17, 0, 31] {
            output += try stream.update(Array(Self.ctrPlaintext[offset..<offset + size]))
            offset += size
        }
        #expect(offset == Self.ctrPlaintext.count)
        #expect(output == Self.ctrCiphertext)
    }

    @Test("AES-256-CTR and SHA-256 in place over a buffer, in uneven pieces, give the one-shot results")
    func inPlaceStream() throws {
        let stream = try AES256CTRStream(key: Self.ctrKey, iv: Self.ctrCounter)
        let digest = try SHA256Stream()
        var buffer = Self.ctrPlaintext
        var offset = 0
        for size in [1, 15, 17, 0, 31] {
            try buffer.withUnsafeMutableBytes { bytes in
                let piece = UnsafeMutableRawBufferPointer(rebasing: bytes[offset..<offset + size])
                try stream.updateInPlace(piece)
                try digest.update(UnsafeRawBufferPointer(piece))
            }
            offset += size
        }
        #expect(offset == Self.ctrPlaintext.count)
        #expect(buffer == Self.ctrCiphertext)
        #expect(try digest.finish() == SHA256Digest.hash(Self.ctrCiphertext))
    }

    @Test("AES-256-CTR carries the counter across all 128 bits (the spec's attachment IVs)")
    func ctrCounterWrap() throws {
        // The counter block ff…ff is followed by 00…00: the second block's key stream is the
        // first block's of a stream that starts at zero.
        let key = Self.ctrKey
        let zeros = [UInt8](repeating: 0, count: 16)
        let wrapped = try AES256CTR.apply(key: key, iv: [UInt8](repeating: 0xff, count: 16), to: zeros + zeros)
        let fromZero = try AES256CTR.apply(key: key, iv: zeros, to: zeros)
        #expect(Array(wrapped[16...]) == fromZero)
    }

    @Test("AES-256-CTR refuses a wrong key or IV length")
    func ctrLengths() {
        #expect(throws: CipherError.invalidKeyLength(expected: 32, actual: 16)) {
            try AES256CTR.apply(key: [UInt8](repeating: 0, count: 16), iv: Self.ctrCounter, to: [1])
        }
        #expect(throws: CipherError.invalidIVLength(expected: 16, actual: 12)) {
            try AES256CTR.apply(key: Self.ctrKey, iv: [UInt8](repeating: 0, count: 12), to: [1])
        }
    }

    // MARK: SHA-256, FIPS 180-2 appendix B

    @Test("SHA-256 matches FIPS 180-2 (\"abc\", the two-block message, the empty string)")
    func sha256Vectors() throws {
        #expect(
            hexString(try SHA256Digest.hash(Array("abc".utf8)))
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            hexString(try SHA256Digest.hash(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            hexString(try SHA256Digest.hash([]))
                == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test("SHA-256 streamed gives the one-shot digest, and finishes once")
    func sha256Stream() throws {
        let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        let stream = try SHA256Stream()
        try stream.update(Array(message[..<5]))
        try stream.update([])
        try stream.update(Array(message[5...]))
        #expect(try stream.finish() == SHA256Digest.hash(message))
        #expect(throws: CipherError.self) { try stream.finish() }
    }

    // MARK: PBKDF2-HMAC-SHA512

    @Test(
        "PBKDF2-HMAC-SHA512 matches the published vectors",
        arguments: [
            (
                "password", "salt", 1,
                "867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5d513554e1c8cf252"
                    + "c02d470a285a0501bad999bfe943c08f050235d7d68b1da55e63f73b60a57fce"
            ),
            (
                "password", "salt", 2,
                "e1d9c16aa681708a45f5c7c4e215ceb66e011a2e9f0040713f18aefdb866d53c"
                    + "f76cab2868a39b9f7840edce4fef5a82be67335c77a6068e04112754f27ccf4e"
            ),
            (
                "password", "salt", 4096,
                "d197b1b33db0143e018b12f3d1d1479e6cdebdcc97c5c0f87f6902e072f457b5"
                    + "143f30602641b3d55cd335988cb36b84376060ecd532e039b742a239434af2d5"
            ),
            (
                "passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096,
                "8c0511f4c6e597c6ac6315d8f0362e225f3c501495ba23b868c005174dc4ee71"
                    + "115b59f9e60cd9532fa33e0f75aefe30225c583a186cd82bd4daea9724a3d3b8"
            ),
        ] as [(String, String, Int, String)])
    func pbkdf2Vectors(password: String, salt: String, iterations: Int, expected: String) throws {
        let key = try PBKDF2SHA512.derive(
            password: Array(password.utf8), salt: Array(salt.utf8), iterations: iterations, length: 64)
        #expect(hexString(key) == expected)
    }

    @Test("PBKDF2 refuses zero iterations and an empty output")
    func pbkdf2Refuses() {
        #expect(throws: CipherError.invalidIterationCount(0)) {
            try PBKDF2SHA512.derive(password: [1], salt: [2], iterations: 0, length: 32)
        }
        #expect(throws: CipherError.invalidOutputLength(0)) {
            try PBKDF2SHA512.derive(password: [1], salt: [2], iterations: 1, length: 0)
        }
    }

    // MARK: Random bytes and errors

    @Test("Random bytes have the asked length and two draws differ")
    func random() throws {
        let first = try SecureRandom.bytes(32)
        let second = try SecureRandom.bytes(32)
        #expect(first.count == 32)
        #expect(first != second)
        #expect(try SecureRandom.bytes(0).isEmpty)
    }

    @Test("Constant-time comparison: equal, different, different lengths")
    func constantTime() {
        #expect(ConstantTime.equal([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equal([1, 2, 3], [1, 2]))
        #expect(ConstantTime.equal([], []))
    }
}

private func hexBytes(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

private func hexString(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = String(byte, radix: 16)
        return digits.count == 1 ? "0" + digits : digits
    }.joined()
}
