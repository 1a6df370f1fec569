import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaTesting
import SymorvaTransport
import Testing

/// The device's push rule evaluator against its oracle: Synapse's own counts. Bob (power 100)
/// and Carol (power 0) send a seeded random stream of messages, notices, edits and reactions
/// with mentions of Alice by name, by display name, by `m.mentions`, `@room` both ways and
/// near-misses; Alice never reads, so Synapse's `notification_count` and `highlight_count` for
/// the room are the number of events its rules made notify and highlight. The device, given
/// Alice's push rules as the server holds them, must agree at every checkpoint.
@Suite(
    "Push rules evaluated on the device agree with Synapse's counts",
    .requires(DevEnvironment.isAvailable, "the dev servers (Scripts/dev-server start)"))
struct PushRuleOracleTests {
    let transport = CurlTransport()

    func requester(_ account: RegisteredAccount) -> FixedTokenMatrixRequester {
        FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL(DevEnvironment.current!.homeserverURL.absoluteString)!,
            userID: UserID(account.userID)!, accessToken: account.accessToken, transport: transport)
    }

    func call(
        _ account: RegisteredAccount, _ method: MatrixEndpoint.Method, _ path: String,
        query: [MatrixEndpoint.QueryItem] = [],
        _ body: String? = nil
    ) async throws -> JSONValue {
        let response = try await requester(account).send(
            MatrixEndpoint(
                method: method, path: path, query: query, body: body.map { Array($0.utf8) }, requiresAuth: true),
            timeout: .seconds(30))
        guard response.isSuccess else {
            throw IntegrationFailure(
                "\(method.rawValue) \(path) answered \(response.status): \(String(decoding: response.body, as: UTF8.self))"
            )
        }
        return try JSONValue(parsing: response.body)
    }

    static func string(_ text: String) -> String {
        String(decoding: try! JSONValue.string(text).canonicalEncoding(), as: UTF8.self)
    }

    @Test(
        "A seeded random stream: the device's notify and highlight decisions sum to Synapse's counts at every checkpoint"
    )
    func randomStream() async throws {
        let environment = try #require(DevEnvironment.current)
        let alice = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("pr-a"), in: environment, transport: transport)
        let bob = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("pr-b"), in: environment, transport: transport)
        let carol = try await RegisteredAccount.register(
            DevEnvironment.uniqueUsername("pr-c"), in: environment, transport: transport)
        let displayName = "Alice Tester"
        let aliceEscaped = alice.userID.replacingOccurrences(of: "/", with: "%2F")
        _ = try await call(
            alice, .put, "/_matrix/client/v3/profile/\(aliceEscaped)/displayname",
            #"{"displayname": "\#(displayName)"}"#)

        let created = try await call(
            bob, .post, "/_matrix/client/v3/createRoom", #"{"preset": "public_chat", "name": "Push oracle"}"#)
        guard case .object(let fields) = created, case .string(let roomID)? = fields["room_id"] else {
            throw IntegrationFailure("no room ID")
        }
        for member in [alice, carol] { _ = try await call(member, .post, "/_matrix/client/v3/join/\(roomID)", "{}") }

        let rules = PushRuleSet(parsing: try await call(alice, .get, "/_matrix/client/v3/pushrules/"))
        let evaluator = PushRuleEvaluator(rules)
        let localpart = String(alice.userID.dropFirst().prefix { $0 != ":" })

        // Alice's sync position after the joins: the counts start at zero there.
        var since = try await sync(alice, since: nil).since
        let seed = UInt64.random(in: 1...UInt64.max)
        var random = SeededGenerator(seed: seed)
        var expected = (notifications: 0, highlights: 0)
        var lastEventID = ""
        let words = [
            "hello", localpart, localpart.uppercased(), displayName, "@room", "room", "m\(localpart)", "deploy",
            "@roommate", "\(localpart)s", "(\(localpart))", "see you",
        ]
        for index in 1...120 {
            let sender = random.next() % 3 == 0 ? carol : bob
            let kind = random.next() % 10
            let body = (0..<(1 + Int(random.next() % 3))).map { _ in words[Int(random.next() % UInt64(words.count))] }
                .joined(separator: " ")
            var content: String
            var type = "m.room.message"
            switch kind {
            case 0: content = #"{"msgtype": "m.notice", "body": \#(Self.string(body))}"#
            case 1 where !lastEventID.isEmpty:
                content =
                    #"{"msgtype": "m.text", "body": \#(Self.string("* " + body)), "m.new_content": {"msgtype": "m.text", "body": \#(Self.string(body))}, "m.relates_to": {"rel_type": "m.replace", "event_id": "\#(lastEventID)"}}"#
            case 2 where !lastEventID.isEmpty:
                type = "m.reaction"
                content =
                    #"{"m.relates_to": {"rel_type": "m.annotation", "event_id": "\#(lastEventID)", "key": "👍\#(index)"}}"#
            default:
                let mentions: String
                switch random.next() % 6 {
                case 0: mentions = #", "m.mentions": {}"#
                case 1: mentions = #", "m.mentions": {"user_ids": ["\#(alice.userID)"]}"#
                case 2: mentions = #", "m.mentions": {"user_ids": ["\#(carol.userID)"]}"#
                case 3: mentions = #", "m.mentions": {"room": true}"#
                default: mentions = ""
                }
                content = #"{"msgtype": "m.text", "body": \#(Self.string(body))\#(mentions)}"#
            }
            let sent = try await call(
                sender, .put, "/_matrix/client/v3/rooms/\(roomID)/send/\(type)/t\(index)-\(seed)", content)
            if case .object(let answer) = sent, case .string(let eventID)? = answer["event_id"],
                type == "m.room.message"
            {
                lastEventID = eventID
            }
            let event = try JSONValue(
                parsing: Array(
                    #"{"type": "\#(type)", "sender": "\#(sender.userID)", "room_id": "\#(roomID)", "content": \#(content)}"#
                        .utf8))
            let context = PushContext(
                userID: alice.userID, displayName: displayName, memberCount: 3,
                senderPowerLevel: sender.userID == bob.userID ? 100 : 0)
            if let actions = evaluator.actions(for: event, context: context) {
                if actions.notify { expected.notifications += 1 }
                if actions.notify && actions.highlight { expected.highlights += 1 }
            }
            if index % 20 == 0 {
                let answer = try await sync(alice, since: since, room: roomID)
                since = answer.since
                let counts = try #require(answer.counts, "seed \(seed): no counts for the room after event \(index)")
                #expect(
                    counts.notifications == expected.notifications && counts.highlights == expected.highlights,
                    "seed \(seed), after \(index) events: Synapse \(counts), the device \(expected)")
            }
        }
        #expect(expected.notifications > 0 && expected.highlights > 0, "seed \(seed): the stream had both kinds")
    }

    /// One `/sync` of Alice (no wait): its `next_batch` and the room's unread counts, if sent.
    func sync(_ account: RegisteredAccount, since: String?, room: String? = nil) async throws
        -> (since: String, counts: (notifications: Int, highlights: Int)?)
    {
        var query = [MatrixEndpoint.QueryItem(name: "timeout", value: "0")]
        if let since { query.append(.init(name: "since", value: since)) }
        let answer = try await call(account, .get, "/_matrix/client/v3/sync", query: query)
        guard case .object(let top) = answer, case .string(let next)? = top["next_batch"] else {
            throw IntegrationFailure("sync without next_batch")
        }
        guard let room, case .object(let rooms)? = top["rooms"], case .object(let joined)? = rooms["join"],
            case .object(let entry)? = joined[room], case .object(let unread)? = entry["unread_notifications"]
        else { return (next, nil) }
        return (next, (unread["notification_count"]?.integerValue ?? 0, unread["highlight_count"]?.integerValue ?? 0))
    }
}
