import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaRuntime
import Testing

/// libolm's `sas.h` behind the driver: the SAS key agreement of interactive verification. The
/// values themselves are checked against vodozemac in `SASVodozemacTests` (interop tier).
@Suite("The libolm driver's SAS")
struct OlmSASTests {
    let driver = OlmCryptoDriver()

    @Test("Two sides with each other's key derive the same bytes and the same MACs, per info")
    func bothSidesAgree() throws {
        let alice = try driver.newSAS()
        let bob = try driver.newSAS()
        #expect(!alice.hasTheirKey)
        try alice.setTheirKey(bob.publicKey)
        try bob.setTheirKey(alice.publicKey)
        #expect(alice.hasTheirKey && bob.hasTheirKey)
        let bytes = try alice.generateBytes(info: "info-1", count: 6)
        #expect(bytes.count == 6)
        #expect(try bob.generateBytes(info: "info-1", count: 6) == bytes)
        #expect(try bob.generateBytes(info: "info-2", count: 6) != bytes)
        for encoding in [SASMACEncoding.fixedBase64, .legacyBase64] {
            let mac = try alice.mac("ed25519:KEY", info: "mac-info", encoding: encoding)
            #expect(try bob.mac("ed25519:KEY", info: "mac-info", encoding: encoding) == mac)
            #expect(try bob.mac("ed25519:KEY", info: "other-info", encoding: encoding) != mac)
        }
        // v2 is unpadded base64 of the 32-byte HMAC.
        #expect(try alice.mac("x", info: "y", encoding: .fixedBase64).utf8.count == 43)
        let third = try driver.newSAS()
        try third.setTheirKey(bob.publicKey)
        #expect(try third.generateBytes(info: "info-1", count: 6) != bytes)
    }

    @Test("A malformed key is refused; bytes and MACs need the peer's key")
    func malformed() throws {
        let sas = try driver.newSAS()
        #expect(throws: CryptoDriverError.malformedKey) { try sas.setTheirKey("not a key") }
        #expect(throws: CryptoDriverError.malformedKey) { try sas.setTheirKey(String(sas.publicKey.dropLast())) }
        #expect(throws: CryptoDriverError.malformedKey) { try sas.generateBytes(info: "i", count: 6) }
        #expect(throws: CryptoDriverError.malformedKey) { try sas.mac("x", info: "y", encoding: .fixedBase64) }
    }
}
