import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

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
                dataDirectory: folder + "/data", transport: ScriptedHTTPTransport.unreachable(), clock: ManualClock(),
                tracer: Tracer(),
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
