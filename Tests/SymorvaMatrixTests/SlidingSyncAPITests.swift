import SymorvaMachines
import SymorvaMatrix
import Testing

@Suite("Sliding sync request")
struct SlidingSyncAPITests {
    @Test("A first request: no pos, the first window, every extension, the to-device since from the store")
    func firstWindow() throws {
        let request = SlidingSyncRequest(pos: nil, timeout: .zero, range: 0...19, subscriptions: [])
        let endpoint = try SlidingSyncAPI.sync(request, toDeviceSince: "td7")
        #expect(endpoint.method == .post)
        #expect(endpoint.path == "/_matrix/client/unstable/org.matrix.simplified_msc3575/sync")
        #expect(endpoint.query == [.init(name: "timeout", value: "0")])
        #expect(endpoint.requiresAuth)
        let body = String(decoding: try #require(endpoint.body), as: UTF8.self)
        #expect(
            body
                == #"{"extensions":{"account_data":{"enabled":true},"e2ee":{"enabled":true},"receipts":{"enabled":true},"to_device":{"enabled":true,"since":"td7"},"typing":{"enabled":true}},"lists":{"all":{"ranges":[[0,19]],"required_state":[["m.room.create",""],["m.room.name",""],["m.room.avatar",""],["m.room.canonical_alias",""],["m.room.topic",""],["m.room.encryption",""],["m.room.join_rules",""],["m.room.tombstone",""],["m.room.member","$ME"],["m.room.member","$LAZY"]],"timeline_limit":1}},"room_subscriptions":{}}"#
        )
    }

    @Test("A live request: pos and the long-poll timeout in the query, one subscription per open room")
    func liveWithSubscriptions() throws {
        let request = SlidingSyncRequest(
            pos: SlidingSyncPosition("p 1"), timeout: .seconds(30), range: 0...249, subscriptions: ["!a:x", "!b:x"])
        let endpoint = try SlidingSyncAPI.sync(
            request, toDeviceSince: nil, options: .init(listTimelineLimit: 1, subscriptionTimelineLimit: 30))
        #expect(endpoint.query == [.init(name: "pos", value: "p 1"), .init(name: "timeout", value: "30000")])
        let body = String(decoding: try #require(endpoint.body), as: UTF8.self)
        #expect(body.contains(#""ranges":[[0,249]]"#))
        #expect(
            body.contains(
                #""room_subscriptions":{"!a:x":{"required_state":[["*","*"]],"timeline_limit":30},"!b:x":{"required_state":[["*","*"]],"timeline_limit":30}}"#
            ))
        // No since yet: the extension starts from the beginning of the device's queue.
        #expect(body.contains(#""to_device":{"enabled":true}"#))
    }
}
