import SymorvaMachines
import Testing

@Suite("SAS short codes")
struct SASCodeTests {
    @Test("The emoji table is the spec's: 64 entries in order, with its names and characters")
    func table() {
        #expect(SASEmoji.table.count == 64)
        #expect(SASEmoji.table.enumerated().allSatisfy { $0.offset == $0.element.number })
        #expect(Set(SASEmoji.table.map(\.character)).count == 64)
        #expect(SASEmoji.table[0] == SASEmoji(number: 0, character: "🐶", description: "Dog"))
        #expect(SASEmoji.table[21] == SASEmoji(number: 21, character: "☁️", description: "Cloud"))
        #expect(SASEmoji.table[36] == SASEmoji(number: 36, character: "👍", description: "Thumbs Up"))
        #expect(SASEmoji.table[41] == SASEmoji(number: 41, character: "💡", description: "Light Bulb"))
        #expect(SASEmoji.table[63] == SASEmoji(number: 63, character: "📌", description: "Pin"))
    }

    @Test("Bytes to emoji (6 bits each, 42 bits) and decimals (13 bits each, plus 1000)")
    func derivation() throws {
        let code = try #require(SASCode(bytes: [1, 2, 3, 4, 5, 6]))
        #expect(code.emoji.map(\.number) == [0, 16, 8, 3, 1, 0, 20])
        #expect(code.decimals == [1032, 3060, 1514])
        let all = try #require(SASCode(bytes: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]))
        #expect(all.emoji.map(\.description) == Array(repeating: "Pin", count: 7))
        #expect(all.decimals == [9191, 9191, 9191])
        #expect(SASCode(bytes: [1, 2, 3, 4, 5]) == nil)
    }

    @Test("The HKDF info strings follow the spec for both key agreements and the MACs")
    func infoStrings() {
        let alice = VerificationParty(userID: "@alice:example.org", deviceID: DeviceID("A"))
        let bob = VerificationParty(userID: "@bob:example.org", deviceID: DeviceID("B"))
        #expect(
            SASInfo.shortCode(
                .curve25519HKDFSHA256, starter: alice, starterKey: "KA", accepter: bob, accepterKey: "KB",
                transactionID: "T")
                == "MATRIX_KEY_VERIFICATION_SAS|@alice:example.org|A|KA|@bob:example.org|B|KB|T")
        #expect(
            SASInfo.shortCode(
                .curve25519, starter: alice, starterKey: "KA", accepter: bob, accepterKey: "KB", transactionID: "T")
                == "MATRIX_KEY_VERIFICATION_SAS@alice:example.orgA@bob:example.orgBT")
        #expect(
            SASInfo.mac(sender: alice, receiver: bob, transactionID: "T", keyID: "ed25519:A")
                == "MATRIX_KEY_VERIFICATION_MAC@alice:example.orgA@bob:example.orgBTed25519:A")
        #expect(
            SASInfo.keyList(["ed25519:DEVICEID", "ed25519:Cross+Signing+Key"])
                == "ed25519:Cross+Signing+Key,ed25519:DEVICEID")
    }
}
