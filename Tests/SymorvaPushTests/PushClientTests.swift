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

struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

enum PushFixtures {
    static let alice = UserID("@alice:localhost")
    static let pushersSet = "/_matrix/client/v3/pushers/set"
    static let gateway = "http://127.0.0.1:9/_matrix/push/v1/notify"

    static func folder() -> String {
        NSTemporaryDirectory() + "symorva-push-\(UUID().uuidString)"
    }

    static func client(_ transport: ScriptedHTTPTransport, folder: String = folder(), scope: AccountScope? = nil)
        -> PushClient
    {
        let client = PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: "http://127.0.0.1:9/")
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport, tokenSource: FixedOpenIDSource())
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("http://127.0.0.1:9")!, userID: alice, accessToken: Secret("matrix-token"),
            transport: transport)
        client.follow(
            AccountPush(
                userID: alice, requester: requester, services: services, scope: scope ?? AccountScope(label: "alice")))
        return client
    }
}

@Suite("Push client")
struct PushClientTests {
    @Test("The profile tag is 16 alphanumerics, kept across clients of one installation, new for another")
    func profileTag() throws {
        let folder = PushFixtures.folder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let first = try PushFixtures.client(.communityServices(), folder: folder).profileTag()
        #expect(first.count == 16 && first.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
        #expect(try PushFixtures.client(.communityServices(), folder: folder).profileTag() == first)
        let other = PushFixtures.folder()
        defer { try? FileManager.default.removeItem(atPath: other) }
        #expect(try PushFixtures.client(.communityServices(), folder: other).profileTag() != first)
        let mode = try FileManager.default.attributesOfItem(atPath: folder + "/push-profile-tag")[.posixPermissions]
        #expect((mode as? Int).map { $0 & 0o077 } == 0)
    }

    @Test("Setting a pusher posts an HTTP pusher with the profile tag and event_id_only; removing posts kind null")
    func setAndRemove() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", PushFixtures.pushersSet) { _ in .json(200, "{}") }
        transport.on("GET", "/_matrix/client/v3/pushers") { _ in .json(200, #"{"pushers": []}"#) }
        let push = PushFixtures.client(transport)
        let pusher = try await push.setPusher(
            pushkey: "key-1", appID: "org.symorva.ios.dev", appDisplayName: "Symorva", deviceDisplayName: "Phone",
            language: "de", gatewayURL: PushFixtures.gateway)
        #expect(push.pusherState == .registered(pusher))
        let sent = try #require(transport.requests("POST", PushFixtures.pushersSet).first)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(sent.body)) as? [String: Any])
        #expect(body["kind"] as? String == "http" && body["pushkey"] as? String == "key-1")
        #expect(body["app_id"] as? String == "org.symorva.ios.dev" && body["lang"] as? String == "de")
        #expect(body["profile_tag"] as? String == (try push.profileTag()))
        #expect(body["append"] as? Bool == false)
        let data = try #require(body["data"] as? [String: Any])
        #expect(data["url"] as? String == PushFixtures.gateway && data["format"] as? String == "event_id_only")

        try await push.removePusher()
        #expect(push.pusherState == .unregistered)
        let removal = try #require(transport.requests("POST", PushFixtures.pushersSet).last)
        #expect(
            String(decoding: removal.body, as: UTF8.self)
                == #"{"pushkey":"key-1","app_id":"org.symorva.ios.dev","kind":null}"#)
    }

    @Test("A refused pusher is a typed error; malformed fields are refused before anything is sent")
    func failures() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("POST", PushFixtures.pushersSet) { _ in
            .json(400, #"{"errcode": "M_INVALID_PARAM", "error": "bad url"}"#)
        }
        let push = PushFixtures.client(transport)
        await #expect(throws: PushError.invalidInput("M_INVALID_PARAM")) {
            try await push.setPusher(
                pushkey: "k", appID: "org.symorva.ios.dev", appDisplayName: "A", deviceDisplayName: "D",
                gatewayURL: PushFixtures.gateway)
        }
        let before = transport.requests.count
        await #expect(throws: PushError.invalidInput("appID")) {
            try await push.setPusher(
                pushkey: "k", appID: "noreversedns", appDisplayName: "A", deviceDisplayName: "D",
                gatewayURL: PushFixtures.gateway)
        }
        await #expect(throws: PushError.invalidInput("gatewayURL")) {
            try await push.setPusher(
                pushkey: "k", appID: "org.symorva.ios.dev", appDisplayName: "A", deviceDisplayName: "D",
                gatewayURL: "http://127.0.0.1:9/notify")
        }
        // Plain http to a host that is not loopback would carry notifications in clear.
        await #expect(throws: PushError.invalidInput("gatewayURL")) {
            try await push.setPusher(
                pushkey: "k", appID: "org.symorva.ios.dev", appDisplayName: "A", deviceDisplayName: "D",
                gatewayURL: "http://push.example.org/_matrix/push/v1/notify")
        }
        await #expect(throws: PushError.invalidInput("pushkey")) {
            try await push.setPusher(
                pushkey: "a/b", appID: "org.symorva.ios.dev", appDisplayName: "A", deviceDisplayName: "D",
                gatewayURL: PushFixtures.gateway)
        }
        await #expect(throws: PushError.invalidInput("keyword")) { try await push.addKeyword(" ") }
        #expect(transport.requests.count == before)
    }

    @Test("Rules are read in evaluation order; keywords and enabling go to their rule paths")
    func rules() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("GET", pathPrefix: "/_matrix/client/v3/pushrules") { _ in
            .json(
                200,
                #"{"global": {"override": [{"rule_id": ".m.rule.master", "default": true, "enabled": false, "actions": []}], "content": [{"rule_id": "governance", "default": false, "enabled": true, "pattern": "governance", "actions": ["notify", {"set_tweak": "highlight"}]}], "room": [], "sender": [], "underride": [{"rule_id": ".m.rule.message", "default": true, "enabled": true, "actions": ["notify"]}]}}"#
            )
        }
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/pushrules/global/") { _ in .json(200, "{}") }
        let push = PushFixtures.client(transport)
        let rules = try await push.rules()
        #expect(rules.map(\.ruleID) == [".m.rule.master", "governance", ".m.rule.message"])
        #expect(
            rules[1]
                == PushRule(
                    kind: .content, ruleID: "governance", isEnabled: true, isDefault: false, pattern: "governance",
                    notifies: true))
        try await push.addKeyword("budget")
        try await push.setRuleEnabled(false, kind: .underride, ruleID: ".m.rule.message")
        let paths = transport.requests.map(\.url.path)
        #expect(paths.contains("/_matrix/client/v3/pushrules/global/content/budget"))
        #expect(paths.contains("/_matrix/client/v3/pushrules/global/underride/.m.rule.message/enabled"))
    }

    @Test("A pushed event is fetched for display; an encrypted one says so and has no body")
    func pushedEvent() async throws {
        let transport = ScriptedHTTPTransport.communityServices()
        transport.on("GET", pathPrefix: "/_matrix/client/v3/rooms/!r:localhost/event/") { request in
            request.url.path.hasSuffix("$enc")
                ? .json(
                    200,
                    #"{"event_id": "$enc", "room_id": "!r:localhost", "sender": "@bob:localhost", "type": "m.room.encrypted", "content": {"ciphertext": "x"}}"#
                )
                : .json(
                    200,
                    #"{"event_id": "$1", "room_id": "!r:localhost", "sender": "@bob:localhost", "type": "m.room.message", "origin_server_ts": 5, "content": {"msgtype": "m.text", "body": "hello"}}"#
                )
        }
        let push = PushFixtures.client(transport)
        let event = try await push.event(roomID: RoomID("!r:localhost"), eventID: EventID("$1"))
        #expect(event.body == "hello" && event.sender == "@bob:localhost" && !event.isEncrypted)
        #expect(!String(describing: event).contains("hello"))
        let encrypted = try await push.event(roomID: RoomID("!r:localhost"), eventID: EventID("$enc"))
        #expect(encrypted.isEncrypted && encrypted.body == nil)
    }

    @Test("Signed out or after the account ended, push refuses")
    func signedOut() async throws {
        let folder = PushFixtures.folder()
        let push = PushClient(dataDirectory: folder, chat: ChatClient(), servicesURL: "http://127.0.0.1:9")
        await #expect(throws: PushError.notSignedIn) { try await push.pushers() }
        #expect(push.counts.value == NotificationCounts())
        #expect(push.communityGatewayURL == "http://127.0.0.1:9/_matrix/push/v1/notify")
        let scope = AccountScope(label: "alice")
        let ended = PushFixtures.client(.communityServices(), scope: scope)
        scope.end(reason: .signedOut)
        await #expect(throws: PushError.accountEnded) { try await ended.rules() }
    }
}
