import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

// README.md's embedding example against the public API only (no `@testable`): the two halves
// below are the example's lines verbatim, split where the test swaps in its own environment.

/// The example's first lines: the community from the manifest, in the platform's data folder.
/// Compiled, not run (it would use this machine's data folder).
func readmeCommunity(manifest: URL) throws -> SymorvaCommunity {
    let community = SymorvaCommunity(configuration: try .load(from: manifest))
    return community
}

/// The rest of the example, run by the test.
func readmeExample(community: SymorvaCommunity, password: String, conversationID: RoomID) async throws {
    await community.launch()  // restores the last account, no network
    if community.session.state.value.account == nil {
        try await community.session.signIn(username: "alice", password: Secret(password))
    }

    // Foundation modules are non-optional and follow the active account.
    let chat: ChatClient = community.chat
    let stop = chat.conversations.subscribe { list in  // observe, never poll
        print(list.status, list.items.map(\.id))  // .signedOut while nobody is signed in
    }
    await chat.refresh()
    let conversation = try await chat.conversation(id: conversationID)  // throws .notSignedIn when signed out
    let receipt = try await conversation.send(.text("Governance call starts at 18:00."))
    print(receipt.state.value)  // .sending, .sent or .failed(reason)
    stop()

    // Optional modules are nil when the manifest disables them.
    if let wallet = community.wallet {
        print(try await wallet.refreshBalances())
    }
}

@Suite("The README's embedding example")
struct ReadmeExampleTests {
    static let manifest = """
        {
          "version": 1,
          "community": {"name": "Orbit"},
          "homeserver": {"url": "http://127.0.0.1:9", "serverName": "localhost"},
          "services": {"url": "http://127.0.0.1:9"},
          "modules": {
            "meetings": {"enabled": true},
            "aiStudio": {"enabled": false},
            "wallet": {"enabled": true, "assets": [{"code": "ORB", "precision": 2}]},
            "directory": {"enabled": false}
          },
          "encryption": {"defaultEnabled": false}
        }
        """

    @Test("Signed out, chat is there and says notSignedIn; the wallet is there because the manifest enables it")
    func signedOutShape() async throws {
        let folder = NSTemporaryDirectory() + "symorva-readme-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifest = URL(fileURLWithPath: folder + "/symorva.config.json")
        try Data(Self.manifest.utf8).write(to: manifest)

        let community = SymorvaCommunity(
            configuration: try .load(from: manifest),
            environment: SymorvaEnvironment(
                dataDirectory: folder + "/data", transport: RefusingTransport(), clock: ManualClock(), tracer: Tracer(),
                logCenter: LogCenter(threshold: .error)))
        let chat: ChatClient = community.chat
        #expect(chat.conversations.value.status == .signedOut)
        #expect(chat.conversations.value.items.isEmpty)
        #expect(community.chat.conversations.items.isEmpty)  // the contract's shape for views
        await #expect(throws: ChatError.notSignedIn) { try await chat.conversation(id: RoomID("!r:localhost")) }
        #expect(community.wallet != nil)

        // The example runs as far as the (unreachable) homeserver.
        await #expect(throws: SessionError.unreachable(.cannotConnect)) {
            try await readmeExample(community: community, password: "pw", conversationID: RoomID("!r:localhost"))
        }
        #expect(community.chat === chat)
        #expect(chat.conversations.value == .signedOut)
        await #expect(throws: TransferError.notSignedIn) { try await community.wallet?.refreshBalances() }
    }
}
