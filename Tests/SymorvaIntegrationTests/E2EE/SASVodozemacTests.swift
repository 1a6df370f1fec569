import Foundation
import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// The SAS of interactive verification (`m.sas.v1`) as libolm computes it, checked against
/// vodozemac (the interop environment's Python package, independent of libolm) with the same
/// fresh keys: the short code's emoji and decimals, and both MAC methods.
@Suite(
    "SAS checked against vodozemac",
    .requires(NioPeer.python != nil, "needs the interop Python environment (SYMORVA_INTEROP_PYTHON)"))
struct SASVodozemacTests {
    static let alice = VerificationParty(userID: "@alice:localhost", deviceID: DeviceID("ALICEDEV"))
    static let bob = VerificationParty(userID: "@bob:localhost", deviceID: DeviceID("BOBDEV"))

    @Test(
        "Same emoji, decimals and MACs (v2 and legacy) as vodozemac, for both key agreements",
        arguments: SASKeyAgreement.allCases)
    func sameAsVodozemac(_ keyAgreement: SASKeyAgreement) throws {
        let peer = try LinePeer(script: "Tests/InteropPeer/sas_vectors.py")
        defer { peer.stop() }
        let sas = try OlmCryptoDriver().newSAS()
        let theirKey = try peer.readLine()
        try sas.setTheirKey(theirKey)
        let info = SASInfo.shortCode(
            keyAgreement, starter: Self.alice, starterKey: sas.publicKey, accepter: Self.bob, accepterKey: theirKey,
            transactionID: "txn-\(UUID().uuidString)")
        try peer.write([sas.publicKey, info])
        let code = try #require(SASCode(bytes: try sas.generateBytes(info: info, count: 6)))
        #expect(try peer.readLine() == code.emoji.map { String($0.number) }.joined(separator: ","))
        #expect(try peer.readLine() == code.decimals.map(String.init).joined(separator: ","))

        let keyID = "ed25519:ALICEDEV"
        let items = [
            (
                "W2hvYXJzZSBkZXZpY2Uga2V5XQ",
                SASInfo.mac(sender: Self.alice, receiver: Self.bob, transactionID: "t", keyID: keyID)
            ),
            (
                SASInfo.keyList([keyID, "ed25519:Cross+Signing+Key"]),
                SASInfo.mac(sender: Self.alice, receiver: Self.bob, transactionID: "t", keyID: SASInfo.keyIDsItem)
            ),
        ]
        for (input, macInfo) in items {
            try peer.write([input, macInfo])
            let v2 = try peer.readLine()
            let legacy = try peer.readLine()
            #expect(try sas.mac(input, info: macInfo, encoding: .fixedBase64) == v2)
            #expect(try sas.mac(input, info: macInfo, encoding: .legacyBase64) == legacy)
            #expect(v2 != legacy)  // the two methods differ only in base64, and they do differ
        }
    }
}

/// A Python helper of `Tests/InteropPeer` driven line by line over its standard input and output.
final class LinePeer {
    let process = Process()
    let input = Pipe()
    let output = Pipe()
    private var buffer: [UInt8] = []

    init(script: String) throws {
        guard let python = NioPeer.python else { throw IntegrationFailure("SYMORVA_INTEROP_PYTHON is not set") }
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [try ChartLocator.packageRoot().appending(path: script).path]
        process.standardInput = input
        process.standardOutput = output
        try process.run()
    }

    /// The next line the script printed (without its newline).
    func readLine() throws -> String {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { throw IntegrationFailure("the script ended before printing a line") }
            buffer.append(contentsOf: data)
        }
    }

    /// Writes `lines`, each with a newline.
    func write(_ lines: [String]) throws {
        try input.fileHandleForWriting.write(contentsOf: Data(lines.map { $0 + "\n" }.joined().utf8))
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
