import Foundation
import SymorvaAIStudio
import SymorvaKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTesting
import SymorvaTransport
import Testing

/// The AI studio against the real Synapse and the reference server: consent first (counted at
/// the service), summaries of exactly the granted messages, revoke and expiry failing typed, a
/// grant unusable after an account switch, and no body in a log, a trace or the service's audit.
@Suite(
    "AI studio against the reference server", .serialized,
    .requires(DevEnvironment.isAvailable, "needs Scripts/dev-server start --test"), .shutsDownCommunities)
struct StudioIntegrationTests {
    /// A signed-in member of a community with a room of messages they sent.
    struct Member {
        let fixture: StudioCommunity
        let account: Account
        let studio: StudioClient
        let room: RoomID
        let messages: [EventID]
        let answers = LockedAnswers()

        static func make(bodies: [String], fixture: StudioCommunity = StudioCommunity()) async throws -> Member {
            let account = try await fixture.community.session.register(
                username: DevEnvironment.uniqueUsername("studio"), password: testPassword)
            let requester = try #require(fixture.community.requester)
            let room = try await StudioIntegrationTests.createRoom(requester)
            var ids: [EventID] = []
            for (n, body) in bodies.enumerated() {
                ids.append(try await StudioIntegrationTests.send(body, to: room, n: n, requester))
            }
            let studio = try #require(fixture.community.aiStudio)
            let member = Member(fixture: fixture, account: account, studio: studio, room: room, messages: ids)
            let answers = member.answers
            studio.consentPresenter = ClosureConsentPresenter { sheet in answers.answer(sheet) }
            return member
        }

        /// Studio requests this member's services token sent, as the service counts them.
        func studioRequests() async throws -> Int {
            let services = try #require(fixture.community.services)
            let answer = try await services.send(.get, "/_symorva/v1/test/studio/stats")
            let body = try #require(try JSONSerialization.jsonObject(with: Data(answer)) as? [String: Any])
            return try #require(body["requests"] as? Int)
        }

        /// A summarize request sent around the SDK (the service's own check).
        func rawSummarize(_ grant: ConversationGrant, bodies: [String]) async throws -> ServicesError? {
            let services = try #require(fixture.community.services)
            let items = zip(messages, bodies).map { id, body in
                ["event_id": id.rawValue, "sender": account.userID.rawValue, "timestamp": 0, "body": body]
                    as [String: Any]
            }
            let json = try JSONSerialization.data(withJSONObject: ["grant_id": grant.id.rawValue, "items": items])
            do throws(ServicesError) {
                _ = try await services.send(.post, "/_symorva/v1/studio/summaries", json: Array(json))
                return nil
            } catch {
                return error
            }
        }
    }

    final class LockedAnswers: Sendable {
        private let state = Lock<(answer: ConsentAnswer, sheets: [ConsentSheet])>((.approved, []))
        func set(_ answer: ConsentAnswer) { state.withLock { $0.answer = answer } }
        var sheets: [ConsentSheet] { state.withLock { $0.sheets } }
        func answer(_ sheet: ConsentSheet) -> ConsentAnswer {
            state.withLock { state in
                state.sheets.append(sheet)
                return state.answer
            }
        }
    }

    static func createRoom(_ requester: any MatrixRequester) async throws -> RoomID {
        let response = try await requester.send(
            MatrixEndpoint(
                method: .post, path: "/_matrix/client/v3/createRoom", body: Array(#"{"preset": "private_chat"}"#.utf8),
                requiresAuth: true))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return RoomID(try #require(body["room_id"] as? String))
    }

    static func send(_ text: String, to room: RoomID, n: Int, _ requester: any MatrixRequester) async throws -> EventID
    {
        let content = try JSONSerialization.data(withJSONObject: ["msgtype": "m.text", "body": text])
        let response = try await requester.send(
            MatrixEndpoint(
                method: .put,
                path: "/_matrix/client/v3/rooms/\(percentEncoded(room.rawValue))/send/m.room.message/t\(n)-\(UUID())",
                body: Array(content), requiresAuth: true))
        let body = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        return EventID(try #require(body["event_id"] as? String))
    }

    static let bodies = [
        "The release is blocked because the database migration timed out on the large table.",
        "Lunch is at noon on Friday.",
        "We should rerun the migration with a longer timeout and an index first.",
        "The migration needs the new index before the release can go out.",
    ]

    @Test("A declined consent: no request at all reaches the studio (counted at the service)")
    func declined() async throws {
        let member = try await Member.make(bodies: Self.bodies)
        member.answers.set(.declined)
        await #expect(throws: StudioError.declined) {
            _ = try await member.studio.requestGrant(for: member.room, scope: .selectedMessages(member.messages))
        }
        member.answers.set(.unavailable)
        await #expect(throws: StudioError.consentUnavailable) {
            _ = try await member.studio.requestGrant(for: member.room, scope: .conversation(since: member.messages[0]))
        }
        #expect(member.answers.sheets.count == 2)
        #expect(try await member.studioRequests() == 0)
    }

    @Test("Approved: a summary of exactly the selected messages, citing only them")
    func approved() async throws {
        let member = try await Member.make(bodies: Self.bodies)
        let selected = [member.messages[0], member.messages[2], member.messages[3]]
        let grant = try await member.studio.requestGrant(for: member.room, scope: .selectedMessages(selected))
        #expect(member.answers.sheets.first?.text.contains("3 selected messages") == true)
        let summary = try await member.studio.summarize(using: grant)
        #expect(summary.itemCount == 3 && summary.backend == "extractive-lexrank")
        #expect(!summary.points.isEmpty && Set(summary.citedEventIDs).isSubset(of: selected))
        let audit = try await member.studio.audit()
        let entry = try #require(audit.first { $0.action == "summarize" })
        #expect(entry.outcome == "ok" && Set(entry.itemIDs) == Set(selected))
        // The grant, the check that it is live at the service, the summary, the audit: nothing else.
        #expect(try await member.studioRequests() == 4)
    }

    @Test("A conversation grant covers the messages from its first one on")
    func conversation() async throws {
        let member = try await Member.make(bodies: Self.bodies)
        let grant = try await member.studio.requestGrant(
            for: member.room, scope: .conversation(since: member.messages[1]))
        let summary = try await member.studio.summarize(using: grant)
        #expect(summary.itemCount == 3)
        #expect(Set(summary.citedEventIDs).isSubset(of: Set(member.messages.dropFirst())))
    }

    @Test("After revoke, summarize fails typed on the device and at the service")
    func revoked() async throws {
        let member = try await Member.make(bodies: Self.bodies)
        let grant = try await member.studio.requestGrant(for: member.room, scope: .selectedMessages(member.messages))
        try await member.studio.revoke(grant)
        #expect(grant.status == .revoked)
        await #expect(throws: StudioError.grantNotLive(.revoked)) {
            _ = try await member.studio.summarize(using: grant)
        }
        let refused = try await member.rawSummarize(grant, bodies: Self.bodies)
        guard case .server("SY_GRANT_REVOKED", 409, _, _) = refused else {
            Issue.record("the service did not refuse a revoked grant: \(String(describing: refused))")
            return
        }
    }

    @Test("An expired grant fails typed: expiry on the runtime clock, and at the service")
    func expired() async throws {
        let member = try await Member.make(bodies: Self.bodies)
        let services = try #require(member.fixture.community.services)
        let requester = try #require(member.fixture.community.requester)
        let database = try await SQLiteDatabase.open(path: ":memory:", configuration: .account)
        let studio = try await AccountStudio(
            member: member.account.userID, services: services, content: HomeserverContentSource(requester: requester),
            database: database, scope: AccountScope(label: "expiry"),
            presenter: ClosureConsentPresenter { _ in .approved },
            configuration: StudioConfiguration(grantLifetime: .seconds(2)))
        defer { Task { await studio.shutdown() } }
        let grant = try await studio.requestGrant(for: member.room, scope: .selectedMessages(member.messages))
        #expect(grant.expiresAt.duration(since: SystemWallClock().now) <= .seconds(3))
        _ = try await studio.grants.wait(timeout: .seconds(20), until: { $0.first?.status == .expired })
        await #expect(throws: StudioError.grantNotLive(.expired)) { _ = try await studio.summarize(using: grant) }
        // The device counts the lifetime from when the grant request left, so it expires the
        // grant no later than the service does; the service's own check needs its instant to pass.
        let left = grant.expiresAt.duration(since: SystemWallClock().now)
        if left > .zero { try await Task.sleep(for: left + .milliseconds(50)) }
        let refused = try await member.rawSummarize(grant, bodies: Self.bodies)
        guard case .server("SY_GRANT_EXPIRED", 409, _, _) = refused else {
            Issue.record(
                "the service did not refuse an expired grant: \(String(describing: refused)); expires \(grant.expiresAt), now \(SystemWallClock().now)"
            )
            return
        }
    }

    @Test("A grant of another account is unusable after a switch")
    func accountSwitch() async throws {
        let fixture = StudioCommunity()
        let alice = try await Member.make(bodies: Self.bodies, fixture: fixture)
        let grant = try await alice.studio.requestGrant(for: alice.room, scope: .selectedMessages(alice.messages))
        let bob = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("studio-bob"), password: testPassword)
        #expect(fixture.community.aiStudio?.member == bob.userID)
        await #expect(throws: StudioError.accountEnded) { _ = try await alice.studio.summarize(using: grant) }
        await #expect(throws: StudioError.accountEnded) { try await alice.studio.revoke(grant) }
        try await fixture.community.session.switchAccount(to: alice.account)
        // Back on Alice: the handle still belongs to the scope that ended.
        await #expect(throws: StudioError.accountEnded) { _ = try await alice.studio.summarize(using: grant) }
    }

    @Test("Canary: no message body reaches a log, a trace, or the service's audit or log")
    func canary() async throws {
        let tag = UUID().uuidString.prefix(8)
        let bodies = Self.bodies.map { "canary-\(tag) \($0)" }
        let shared = SharedLogCapture()
        defer { shared.finish() }
        let member = try await Member.make(bodies: bodies)
        let grant = try await member.studio.requestGrant(
            for: member.room, scope: .conversation(since: member.messages[0]))
        let summary = try await member.studio.summarize(using: grant)
        #expect(summary.points.contains { $0.text.contains("canary-\(tag)") })  // the content did go, under the grant
        let audit = try await member.studio.audit()
        try await member.studio.revoke(grant)
        let traced = member.fixture.trace.records.map { "\($0)" }.joined(separator: "\n")
        #expect(!member.fixture.trace.records.isEmpty && member.fixture.logs.records.count > 0)
        for (name, text) in [
            ("log", member.fixture.logs.text), ("shared log", shared.text), ("trace", traced), ("audit", "\(audit)"),
        ] {
            #expect(!text.contains("canary-\(tag)"), "a body reached the \(name)")
        }
        if let log = ProcessInfo.processInfo.environment["SERVICES_LOG"],
            let text = try? String(contentsOfFile: log, encoding: .utf8)
        {
            #expect(!text.contains("canary-\(tag)"), "a body reached the services log")
        }
    }
}

/// A community of the dev environment with the AI studio enabled (the shared
/// `DevEnvironment.configuration` leaves it off), capturing its logs and traces.
struct StudioCommunity {
    let environment = DevEnvironment.current!
    let data = TemporaryDataDirectory()
    let tracer = Tracer()
    let trace = ObservableTraceRecorder()
    let logs = CapturingLogSink()
    let logCenter = LogCenter(threshold: .trace)
    let community: SymorvaCommunity

    init() {
        tracer.addSink(trace)
        tracer.addSink(LoggingTraceSink(logger: Logger(category: "trace", center: logCenter)))
        logCenter.addSink(logs)
        var configuration = environment.configuration
        configuration.modules.aiStudio = .init(isEnabled: true)
        community = SymorvaCommunity(
            configuration: configuration,
            environment: SymorvaEnvironment(
                dataDirectory: data.path, transport: CurlTransport(), tracer: tracer, logCenter: logCenter))
        FixtureRun.current?.add(community)
    }
}
