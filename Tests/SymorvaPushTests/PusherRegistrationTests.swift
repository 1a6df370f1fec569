import Foundation
import SymorvaChat
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaPush
import SymorvaRuntime
import SymorvaServices
import SymorvaTesting
import Testing

/// The installation's pusher as `community.push` registers, removes and adopts it, its
/// failures, and the fields refused before anything is sent.
@Suite("Pusher registration", .timeLimit(.minutes(1)))
struct PusherRegistrationTests {
    static let appID = "org.symorva.ios.dev"

    static func set(_ push: PushClient, pushkey: String = "key-1", appID: String = appID) async throws(PushError)
        -> Pusher
    {
        try await push.setPusher(
            pushkey: pushkey, appID: appID, appDisplayName: "Symorva", deviceDisplayName: "Phone",
            gatewayURL: PushFixtures.gateway)
    }

    @Test("A failed registration leaves the pusher failed with the typed reason; setting it again registers it")
    func failedThenRegistered() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on(
            "POST", PushFixtures.pushersSet,
            ScriptedHTTPTransport.sequence([.json(502, #"{"errcode": "M_UNKNOWN"}"#), .json(200, "{}")]))
        let push = PushFixtures.client(transport)
        await #expect(throws: PushError.transport(.serverError(status: 502))) { try await Self.set(push) }
        guard case .failed(let pusher, .transport(.serverError(status: 502))) = push.pusherState else {
            Issue.record("expected failed, got \(push.pusherState)")
            return
        }
        #expect(pusher.pushkey == "key-1")
        let registered = try await Self.set(push)
        #expect(push.pusherState == .registered(registered))
        #expect(transport.count("POST", PushFixtures.pushersSet) == 2)
    }

    @Test("Setting the same pusher again sends nothing; another pushkey replaces it")
    func idempotentSet() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", PushFixtures.pushersSet) { _ in .json(200, "{}") }
        let push = PushFixtures.client(transport)
        let first = try await Self.set(push)
        #expect(try await Self.set(push) == first)
        #expect(transport.count("POST", PushFixtures.pushersSet) == 1)
        let second = try await Self.set(push, pushkey: "key-2")
        #expect(push.pusherState == .registered(second))
        #expect(transport.count("POST", PushFixtures.pushersSet) == 2)
    }

    @Test("Removing without a pusher returns at once; a pusher the server no longer has counts as removed")
    func removal() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on(
            "POST", PushFixtures.pushersSet,
            ScriptedHTTPTransport.sequence([.json(200, "{}"), .json(404, #"{"errcode": "M_NOT_FOUND"}"#)]))
        let push = PushFixtures.client(transport)
        try await push.removePusher()
        #expect(transport.requests.isEmpty)
        _ = try await Self.set(push)
        try await push.removePusher()
        #expect(push.pusherState == .unregistered)
    }

    @Test("A refused removal leaves the pusher failed with the reason, and it can be removed again")
    func refusedRemoval() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on(
            "POST", PushFixtures.pushersSet,
            ScriptedHTTPTransport.sequence([
                .json(200, "{}"), .json(429, #"{"errcode": "M_LIMIT_EXCEEDED"}"#), .json(200, "{}"),
            ]))
        let push = PushFixtures.client(transport)
        let pusher = try await Self.set(push)
        await #expect(throws: PushError.rateLimited(retryAfter: nil)) { try await push.removePusher() }
        #expect(push.pusherState == .failed(pusher, .rateLimited(retryAfter: nil)))
        try await push.removePusher()
        #expect(push.pusherState == .unregistered)
    }

    @Test("Following an account adopts the pusher the homeserver has for this installation's profile tag")
    func adoption() async throws {
        let folder = PushFixtures.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tag = try PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: "http://127.0.0.1:9")
            .profileTag()
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("GET", "/_matrix/client/v3/pushers") { _ in
            .json(
                200,
                #"{"pushers": [{"pushkey": "other", "kind": "http", "app_id": "org.other.app", "profile_tag": "someoneelse", "data": {"url": "https://x/_matrix/push/v1/notify"}}, {"pushkey": "mine", "kind": "http", "app_id": "org.symorva.ios.dev", "app_display_name": "Symorva", "device_display_name": "Phone", "profile_tag": "\#(tag)", "lang": "en", "data": {"url": "https://push.example.org/_matrix/push/v1/notify", "format": "event_id_only"}}]}"#
            )
        }
        let push = PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: "http://127.0.0.1:9/")
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport, tokenSource: FixedOpenIDSource())
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("http://127.0.0.1:9")!, userID: PushFixtures.alice,
            accessToken: Secret("matrix-token"), transport: transport)
        let scope = AccountScope(label: "alice")
        let account = AccountPush(userID: PushFixtures.alice, requester: requester, services: services, scope: scope)
        push.follow(account)
        // `follow` adopts in the background: wait for the state the pusher settles on.
        let adopted = await account.pusher.first { state -> Pusher? in
            if case .registered(let pusher) = state { return pusher }
            return nil
        }
        #expect(adopted?.pushkey == "mine" && adopted?.format == .eventIDOnly && adopted?.profileTag == tag)
        #expect(push.pusherState == adopted.map { .registered($0) })
        scope.end(reason: .signedOut)
    }

    @Test(
        "Pushkeys and app IDs the homeserver would refuse are refused here, before anything is sent",
        arguments: [
            (String(repeating: "k", count: 513), appID, "pushkey"), ("", appID, "pushkey"), ("a/b", appID, "pushkey"),
            ("key", "", "appID"), ("key", "nodots", "appID"), ("key", "org/symorva.app", "appID"),
            ("key", "org." + String(repeating: "a", count: 61), "appID"),
        ])
    func refusedFields(pushkey: String, appID: String, field: String) async {
        let transport = ScriptedHTTPTransport.communityServices()
        let push = PushFixtures.client(transport)
        await #expect(throws: PushError.invalidInput(field)) {
            try await Self.set(push, pushkey: pushkey, appID: appID)
        }
        await #expect(throws: PushError.invalidInput(field)) {
            try await push.registerWithCommunityGateway(pushkey: pushkey, appID: appID)
        }
        #expect(transport.requests.isEmpty)
    }

    @Test("The longest pushkey and app ID the homeserver takes are accepted")
    func longestFields() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", PushFixtures.pushersSet) { _ in .json(200, "{}") }
        let push = PushFixtures.client(transport)
        let appID = "org." + String(repeating: "a", count: 60)
        let pusher = try await Self.set(push, pushkey: String(repeating: "k", count: 512), appID: appID)
        #expect(pusher.appID.utf8.count == 64 && pusher.pushkey.utf8.count == 512)
    }

    @Test("The reference gateway gets the pushkey in the body, never the path; its notifications decode")
    func referenceGateway() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", "/_symorva/v1/push/pushkeys") { _ in .json(200, "{}") }
        transport.on("POST", "/_symorva/v1/push/pushkeys/remove") { _ in
            .json(404, #"{"errcode": "SY_NOT_FOUND", "error": "unknown pushkey"}"#)
        }
        transport.on("POST", "/_symorva/v1/push/pushkeys/notifications") { _ in
            .json(
                200,
                #"{"notifications": [{"seq": 4, "event_id": "$e", "room_id": "!r:localhost", "sender": "@bob:localhost", "unread": 2, "prio": "high"}]}"#
            )
        }
        let push = PushFixtures.client(transport)
        try await push.registerWithCommunityGateway(pushkey: "device-token", appID: Self.appID)
        await #expect(throws: PushError.notFound) {
            try await push.unregisterFromCommunityGateway(pushkey: "device-token", appID: Self.appID)
        }
        let notifications = try await push.communityGatewayNotifications(
            pushkey: "device-token", appID: Self.appID, after: 3)
        #expect(
            notifications == [
                GatewayNotification(
                    sequence: 4, eventID: "$e", roomID: "!r:localhost", sender: "@bob:localhost", unread: 2,
                    priority: "high")
            ])
        let gatewayRequests = transport.requests.filter { $0.url.path.hasPrefix("/_symorva/v1/push") }
        #expect(gatewayRequests.count == 3)
        #expect(gatewayRequests.allSatisfy { !$0.url.absoluteString.contains("device-token") })
        let last = try #require(gatewayRequests.last)
        #expect(String(decoding: last.body, as: UTF8.self).contains(#""after":3"#))
    }
}
