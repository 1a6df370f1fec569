import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// How long the client waits for a sync response: a live request a margin over the server's
/// hold time, a computed one (the initial sync) long enough for a large account.
@Suite("Sync request deadlines")
struct SyncRequestDeadlineTests {
    typealias Room = ConversationReactionTests

    @Test("The initial sync waits for a computed response; the live request waits its hold time plus the margin")
    func initialSyncWaitsLonger() async throws {
        let store = try await ChatStore.open(path: ":memory:")
        let transport = ScriptedHTTPTransport()
        let longPoll = TestGate()
        let liveRequestSent = TestGate()
        transport.on("POST", pathPrefix: "/_matrix/client/v3/user/") { _ in .json(200, #"{"filter_id": "f1"}"#) }
        transport.on("GET", "/_matrix/client/v3/sync") { request in
            if request.url.query?.contains("since=") != true {
                return .success(
                    HTTPResponse(status: 200, body: Room.sync("b1", [Room.member("@me:example.org", id: "$j")])))
            }
            liveRequestSent.open()
            await longPoll.wait()
            return .json(200, #"{"next_batch": "b2"}"#)
        }
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Room.me, accessToken: Secret("token"),
            transport: transport)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Room.me.rawValue),
            clock: ManualClock(), tracer: Tracer(), options: ChatOptions(longPollTimeout: .seconds(30)))

        try await chat.start()
        await liveRequestSent.wait()
        let syncs = transport.requests("GET", "/_matrix/client/v3/sync")
        #expect(syncs[0].url.query?.contains("timeout=0") == true)
        #expect(syncs[0].timeout == SyncRequestDeadline.computedResponse)
        #expect(SyncRequestDeadline.computedResponse >= .seconds(300))
        #expect(syncs[1].url.query?.contains("since=b1") == true)
        #expect(syncs[1].timeout == .seconds(30) + SyncRequestDeadline.liveMargin)
        await chat.stop()
        longPoll.open()
    }
}
