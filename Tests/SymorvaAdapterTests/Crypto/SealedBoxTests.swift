import CSodium
import SymorvaCrypto
import Testing

@Suite("Sealed box")
struct SealedBoxTests {
    private func keyPair() -> (public: [UInt8], secret: [UInt8]) {
        var publicKey = [UInt8](repeating: 0, count: Int(crypto_box_publickeybytes()))
        var secretKey = [UInt8](repeating: 0, count: Int(crypto_box_secretkeybytes()))
        #expect(sodium_init() >= 0)
        crypto_box_keypair(&publicKey, &secretKey)
        return (publicKey, secretKey)
    }

    private func open(_ sealed: [UInt8], _ keys: (public: [UInt8], secret: [UInt8])) -> [UInt8]? {
        var plaintext = [UInt8](repeating: 0, count: max(0, sealed.count - SealedBox.overhead))
        let code = crypto_box_seal_open(&plaintext, sealed, UInt64(sealed.count), keys.public, keys.secret)
        return code == 0 ? plaintext : nil
    }

    @Test("Only the recipient's secret key opens a sealed PIN")
    func roundTrip() throws {
        let recipient = keyPair()
        let pin = Array("4921".utf8)
        let sealed = try SealedBox.seal(pin, recipientPublicKey: recipient.public)
        #expect(sealed.count == pin.count + SealedBox.overhead)
        #expect(open(sealed, recipient) == pin)
        #expect(open(sealed, keyPair()) == nil)
    }

    @Test("Two seals of the same PIN differ")
    func ephemeral() throws {
        let recipient = keyPair()
        let first = try SealedBox.seal([1, 2, 3, 4], recipientPublicKey: recipient.public)
        let second = try SealedBox.seal([1, 2, 3, 4], recipientPublicKey: recipient.public)
        #expect(first != second)
    }

    @Test("A tampered seal does not open")
    func tamper() throws {
        let recipient = keyPair()
        var sealed = try SealedBox.seal([1, 2, 3, 4], recipientPublicKey: recipient.public)
        sealed[sealed.count - 1] ^= 1
        #expect(open(sealed, recipient) == nil)
    }

    @Test("A public key of the wrong length is refused")
    func badKey() {
        #expect(throws: SealedBoxError.invalidPublicKey(length: 31)) {
            try SealedBox.seal([1], recipientPublicKey: [UInt8](repeating: 0, count: 31))
        }
    }
}
