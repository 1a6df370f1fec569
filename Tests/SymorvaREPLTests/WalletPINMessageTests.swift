import SymorvaMachines
import Testing

@testable import SymorvaREPL

@Suite("wallet pin: the service's refusals as sentences")
struct WalletPINMessageTests {
    @Test("Each refusal of a PIN change says what to do, not the service's code")
    func sentences() {
        let cases: [(TransferError, String)] = [
            (.failure(.verification(.malformedPIN)), "a PIN is 4 to 12 digits; the PIN was not changed"),
            (.failure(.rejected(code: "SY_INVALID_PIN")), "a PIN is 4 to 12 digits; the PIN was not changed"),
            (
                .failure(.rejected(code: "SY_PIN_ALREADY_SET")),
                "the wallet already has a PIN; change it with 'wallet pin --change'"
            ),
            (.failure(.rejected(code: "SY_PIN_NOT_SET")), "the wallet has no PIN yet; set one with 'wallet pin'"),
            (.failure(.rejected(code: "SY_WRONG_PIN")), "wrong current PIN; the PIN was not changed"),
            (.failure(.lockedOut), "the wallet is locked after too many wrong PINs"),
            (.notSignedIn, "not signed in"),
        ]
        for (error, sentence) in cases {
            #expect(WalletCommands.pinMessage(for: error) == sentence)
        }
    }

    @Test("A send before any PIN says to set one")
    func sendWithoutPIN() {
        #expect(
            WalletCommands.message(for: .rejected(code: "SY_PIN_NOT_SET"))
                == "the wallet has no PIN yet; set one with 'wallet pin'")
    }
}
