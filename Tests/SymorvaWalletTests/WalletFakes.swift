import Foundation
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices

/// Hands out a fixed OpenID token.
struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

/// Values shared by the wallet tests.
enum WalletFixtures {
    static let orb = Asset(code: "ORB", precision: 2)
    static let alice = UserID("@alice:localhost")
    static let bob = UserID("@bob:localhost")
    static let commandID = CommandID(uuidString: "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01")!
    static let draftID = DraftID("d_abc")
    static let serverKey = [UInt8](repeating: 7, count: 32)

    static func amount(_ text: String) -> Amount { try! Amount(text, precision: 2) }

    static var summary: TransferSummary {
        TransferSummary(
            draftID: draftID, recipient: bob, asset: orb, amount: amount("25.00"), fee: amount("0.50"),
            total: amount("25.50"))
    }

    static var pending: PendingCommand { PendingCommand(commandID: commandID, summary: summary) }

    static var sealed: SealedVerification {
        SealedVerification(method: .pin, sealedBytes: Secret([1, 2, 3]))
    }

    static let transferJSON = """
        {"transfer_id": "t_1", "kind": "transfer", "command_id": "8d0f1c52-2f7a-4c1e-9a43-5b6c7d8e9f01",
         "draft_id": "d_abc", "sender": "@alice:localhost", "recipient": "@bob:localhost", "asset": "ORB",
         "amount": "25.00", "fee": "0.50", "total": "25.50", "created_at_ms": 1700000000000}
        """

    static var transfer: Transfer { Transfer(id: TransferID("t_1"), commandID: commandID, summary: summary) }

    static func answer(_ status: String, extra: String = "") -> String {
        #"{"status": "\#(status)", "command_id": "\#(commandID.rawValue)"\#(extra)}"#
    }

    static func failure(_ code: String, attemptsLeft: Int? = nil) -> String {
        let attempts = attemptsLeft.map { #", "attempts_left": \#($0)"# } ?? ""
        return answer("failed", extra: #", "failure": {"code": "\#(code)", "message": "m"\#(attempts)}"#)
    }

    static let draftJSON = """
        {"draft_id": "d_abc", "recipient": "@bob:localhost", "asset": "ORB", "precision": 2, "amount": "25.00",
         "fee": "0.50", "total": "25.50", "created_at_ms": 1700000000000, "expires_at_ms": 1700000120000,
         "expires_in_ms": 120000, "verification_methods": ["pin"],
         "sealing_key": {"algorithm": "x25519-xsalsa20poly1305-sealedbox", "key_id": "k1",
                         "public_key": "\(Data(serverKey).base64EncodedString())"},
         "payload_version": "symorva-wallet-confirm/1"}
        """

    static func error(_ code: String) -> String { #"{"errcode": "\#(code)", "error": "refused"}"# }
}
