import Foundation
import SymorvaAIStudio
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTesting

/// Hands out a fixed OpenID token.
struct FixedOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        OpenIDToken(accessToken: Secret("openid-token"), matrixServerName: "localhost", expiresIn: 3600)
    }
}

/// A wall clock that moves with a ``ManualClock`` (a restart relates stored expiries to it).
struct FollowingWallClock: WallClock {
    let clock: ManualClock
    static let epoch: Int64 = 1_800_000_000_000
    var now: Timestamp { Timestamp(millisecondsSince1970: Self.epoch + clock.now.wholeMilliseconds) }
}

/// The messages of one room, as the device has them: the one content-source fake.
struct FixedContentSource: ConversationContentSource {
    let items: [ConversationItem]
    /// Extra items handed out with every read: a source that returns more than the scope.
    var extra: [ConversationItem] = []

    func timestamp(of eventID: EventID, in roomID: RoomID) async throws(StudioError) -> MatrixTimestamp {
        guard let item = items.first(where: { $0.eventID == eventID }) else { throw .contentUnavailable(eventID) }
        return item.timestamp
    }

    func items(
        in roomID: RoomID, scope: GrantScope, since: MatrixTimestamp?, limit: Int
    ) async throws(StudioError) -> [ConversationItem] {
        switch scope {
        case .selectedMessages(let ids):
            var out: [ConversationItem] = []
            for id in ids {
                guard let item = items.first(where: { $0.eventID == id }) else { throw .contentUnavailable(id) }
                out.append(item)
            }
            return out + extra
        case .conversation(let first):
            guard let since = since ?? items.first(where: { $0.eventID == first })?.timestamp else {
                throw .contentUnavailable(first)
            }
            return Array(items.filter { $0.timestamp >= since }.prefix(limit)) + extra
        }
    }
}

/// A scripted studio service on ``ScriptedHTTPTransport`` that checks, for every request the
/// transport actually sends, the promise: conversation content only in a summary request, and
/// only under a grant that is live at that moment and covers every item. Live means issued and
/// not ended in any way the service knows of: not revoked by the member on this device, not
/// revoked at the service (by this device's revoke, by the member's other device, or by the
/// service itself), and not expired by the **service's** clock, which runs apart from the
/// device's wall clock by ``serviceSkew``.
final class StudioWorld: Sendable {
    static let room = RoomID("!room:localhost")
    static let alice = UserID("@alice:localhost")
    static let grantsPath = "/_symorva/v1/studio/grants"
    static let summariesPath = "/_symorva/v1/studio/summaries"

    enum Fault: Sendable { case none, serverError, rateLimited, unreachable, revokedByService }

    /// Who revoked a grant at the service.
    enum Revoker: String, Sendable { case thisDevice, otherDevice, service }

    struct IssuedGrant: Sendable {
        var member: String
        var eventIDs: Set<String>?
        var since: Int64?
        var sinceID: String?
        /// The expiry by the service's clock, told on the runtime clock (the service's clock
        /// and the device's move together; only their readings differ, by the skew).
        var deadline: Duration
        var revokedByMember = false
        /// Revoked at the service, and by whom.
        var revokedOnService: Revoker?
    }

    struct State: Sendable {
        var grants: [String: IssuedGrant] = [:]
        var next = 0
        var fault: Fault = .none
        var holdSummaries = false
        var violations: [String] = []
        var summariesSent = 0
        var studioRequests = 0
        var members: Set<String> = ["@alice:localhost", "@bob:localhost"]
        var serviceSkew: Duration = .zero
        /// Every studio request the transport sent and every revoke by the member, in order.
        var log: [String] = []
    }

    let clock: ManualClock
    let wallClock: FollowingWallClock
    let transport = ScriptedHTTPTransport.communityServices()
    let gate = Lock(TestGate())
    let bodies: [String]
    private let state = Lock(State())

    init(clock: ManualClock, bodies: [String]) {
        self.clock = clock
        self.wallClock = FollowingWallClock(clock: clock)
        self.bodies = bodies
        transport.on("POST", Self.grantsPath) { [unowned self] request in self.grant(request) }
        transport.on("POST", Self.summariesPath) { [unowned self] request in await self.summarize(request) }
        transport.on("POST", pathPrefix: "/_symorva/v1/studio/grants/") { [unowned self] request in self.revoke(request)
        }
        transport.on("GET", pathPrefix: "/_symorva/v1/studio/grants/") { [unowned self] request in self.check(request) }
    }

    func services() -> CommunityServicesClient {
        CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: .never)
    }

    var fault: Fault {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    var holdSummaries: Bool {
        get { state.withLock { $0.holdSummaries } }
        set { state.withLock { $0.holdSummaries = newValue } }
    }

    /// How far the service's wall clock is ahead of the device's (negative: behind). The
    /// service stamps its grants' `created_at_ms`/`expires_at_ms` by it.
    var serviceSkew: Duration {
        get { state.withLock { $0.serviceSkew } }
        set { state.withLock { $0.serviceSkew = newValue } }
    }

    var violations: [String] { state.withLock { $0.violations } }
    /// Every studio request the transport sent and every revoke by the member, in order (no content).
    var log: [String] { state.withLock { $0.log } }
    var summariesSent: Int { state.withLock { $0.summariesSent } }
    /// Every studio request the transport sent.
    var studioRequests: Int { state.withLock { $0.studioRequests } }

    /// The test says the member revoked `id`, before asking the studio to.
    func memberRevokes(_ id: GrantID) {
        state.withLock {
            $0.grants[id.rawValue]?.revokedByMember = true
            $0.log.append("memberRevokes \(id.rawValue)")
        }
    }

    /// The member revokes `id` on another device: the service knows, this device does not.
    func otherDeviceRevokes(_ id: GrantID) {
        state.withLock {
            if $0.grants[id.rawValue]?.revokedOnService == nil {
                $0.grants[id.rawValue]?.revokedOnService = .otherDevice
            }
            $0.log.append("otherDeviceRevokes \(id.rawValue)")
        }
    }

    func removeMember(_ user: String) { state.withLock { _ = $0.members.remove(user) } }

    // MARK: Handlers

    private static func json(_ request: HTTPRequest) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any]) ?? [:]
    }

    private func noContent(_ request: HTTPRequest) {
        let text = String(decoding: request.body, as: UTF8.self)
        state.withLock { state in
            state.studioRequests += 1
            state.log.append("\(request.method.rawValue) \(request.url.path) fault=\(state.fault)")
            for body in bodies where text.contains(body) {
                state.violations.append("content in \(request.method.rawValue) \(request.url.path)")
            }
        }
    }

    private func faultAnswer() -> Result<HTTPResponse, TransportError>? {
        switch fault {
        case .none, .revokedByService: nil
        case .serverError: .json(503, #"{"errcode": "SY_UNKNOWN", "error": "down"}"#)
        case .rateLimited: .rateLimited(milliseconds: 500)
        case .unreachable: .failure(.connectFailed)
        }
    }

    private func grant(_ request: HTTPRequest) -> Result<HTTPResponse, TransportError> {
        noContent(request)
        if let fault = faultAnswer() { return fault }
        let body = Self.json(request)
        let scope = body["scope"] as? [String: Any] ?? [:]
        let lifetime = (body["expires_in_ms"] as? NSNumber)?.int64Value ?? 3_600_000
        let deadline = clock.now
        return state.withLock { state in
            let now = wallClock.now.millisecondsSince1970 + state.serviceSkew.wholeMilliseconds
            guard state.members.contains(StudioWorld.alice.rawValue) else {
                return .json(403, #"{"errcode": "SY_NOT_ROOM_MEMBER", "error": "not joined"}"#)
            }
            state.next += 1
            let id = "gr_\(state.next)"
            state.grants[id] = IssuedGrant(
                member: StudioWorld.alice.rawValue, eventIDs: (scope["event_ids"] as? [String]).map(Set.init),
                since: (scope["since_ts"] as? NSNumber)?.int64Value, sinceID: scope["since_event_id"] as? String,
                deadline: deadline + .milliseconds(lifetime))
            let scopeJSON = String(decoding: try! JSONSerialization.data(withJSONObject: scope), as: UTF8.self)
            return .json(
                200,
                #"{"grant_id": "\#(id)", "user_id": "@alice:localhost", "room_id": "\#(body["room_id"] as? String ?? "")", "purpose": "summarize", "scope": \#(scopeJSON), "state": "active", "created_at_ms": \#(now), "expires_at_ms": \#(now + lifetime), "revoked_at_ms": null}"#
            )
        }
    }

    /// `GET …/grants/{id}`: the grant's state on the service's clock (the runtime clock here).
    private func check(_ request: HTTPRequest) -> Result<HTTPResponse, TransportError> {
        noContent(request)
        if let fault = faultAnswer() { return fault }
        let id = request.url.path.split(separator: "/").last.map(String.init) ?? ""
        let now = clock.now
        return state.withLock { state in
            guard let grant = state.grants[id] else {
                return .json(404, #"{"errcode": "SY_GRANT_UNKNOWN", "error": "unknown"}"#)
            }
            let left = max(Duration.zero, grant.deadline - now)
            let status = grant.revokedOnService != nil ? "revoked" : left == .zero ? "expired" : "active"
            let ms = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000
            return .json(
                200,
                #"{"grant_id": "\#(id)", "user_id": "@alice:localhost", "room_id": "!room:localhost", "purpose": "summarize", "scope": {"kind": "selected_messages", "event_ids": ["$m1"]}, "state": "\#(status)", "created_at_ms": 0, "expires_at_ms": 0, "expires_in_ms": \#(ms), "revoked_at_ms": null}"#
            )
        }
    }

    /// Whether the service holds `id` as live now (not revoked by anyone, not expired by its clock).
    func isLiveAtService(_ id: GrantID) -> Bool {
        let now = clock.now
        return state.withLock { state in
            guard let grant = state.grants[id.rawValue] else { return false }
            return grant.revokedOnService == nil && now < grant.deadline
        }
    }

    /// The service revokes `id` on its own (or another device of the member did).
    func serviceRevokes(_ id: GrantID) {
        state.withLock {
            if $0.grants[id.rawValue]?.revokedOnService == nil { $0.grants[id.rawValue]?.revokedOnService = .service }
            $0.log.append("serviceRevokes \(id.rawValue)")
        }
    }

    private func revoke(_ request: HTTPRequest) -> Result<HTTPResponse, TransportError> {
        noContent(request)
        if let fault = faultAnswer() { return fault }
        let id = request.url.path.split(separator: "/").dropLast().last.map(String.init) ?? ""
        state.withLock {
            if $0.grants[id]?.revokedOnService == nil { $0.grants[id]?.revokedOnService = .thisDevice }
        }
        return .json(200, #"{"grant_id": "\#(id)", "state": "revoked"}"#)
    }

    private func summarize(_ request: HTTPRequest) async -> Result<HTTPResponse, TransportError> {
        // The moment the request leaves: check the promise.
        let body = Self.json(request)
        let grantID = body["grant_id"] as? String ?? ""
        let items = body["items"] as? [[String: Any]] ?? []
        let now = clock.now
        let ids = items.compactMap { $0["event_id"] as? String }
        let (hold, refusal) = state.withLock { state -> (Bool, String?) in
            state.studioRequests += 1
            state.summariesSent += 1
            state.log.append("summary \(grantID) fault=\(state.fault) now=\(now)")
            guard let grant = state.grants[grantID] else {
                state.violations.append("content under a grant never issued: \(grantID)")
                return (state.holdSummaries, "SY_GRANT_UNKNOWN")
            }
            if grant.revokedByMember { state.violations.append("content under revoked grant \(grantID)") }
            if let revoker = grant.revokedOnService {
                state.violations.append("content under grant \(grantID) revoked at the service by \(revoker)")
            }
            if now >= grant.deadline {
                state.violations.append("content under grant \(grantID) expired by the service's clock")
            }
            for (index, item) in items.enumerated() {
                let id = item["event_id"] as? String ?? ""
                let ts = (item["timestamp"] as? NSNumber)?.int64Value ?? -1
                let covered =
                    if let selected = grant.eventIDs { selected.contains(id) } else {
                        id == grant.sinceID || ts >= (grant.since ?? .max)
                    }
                if !covered { state.violations.append("item \(index) (\(id)) outside grant \(grantID)") }
            }
            if let selected = grant.eventIDs, Set(ids) != selected {
                state.violations.append("content is not exactly the selection of \(grantID)")
            }
            // What the service answers (the content has arrived all the same).
            let refusal: String? =
                if grant.revokedOnService != nil { "SY_GRANT_REVOKED" } else if now >= grant.deadline {
                    "SY_GRANT_EXPIRED"
                } else { nil }
            return (state.holdSummaries, refusal)
        }
        if hold { await gate.withLock { $0 }.wait() }
        if let fault = faultAnswer() { return fault }
        if let refusal { return .json(409, #"{"errcode": "\#(refusal)", "error": "refused"}"#) }
        if fault == .revokedByService {
            // The service revokes the grant itself: later content under it is a violation.
            state.withLock { $0.grants[grantID]?.revokedOnService = .service }
            return .json(409, #"{"errcode": "SY_GRANT_REVOKED", "error": "revoked"}"#)
        }
        let first = ids.first ?? ""
        return .json(
            200,
            #"{"grant_id": "\#(grantID)", "backend": "extractive-lexrank", "item_count": \#(ids.count), "points": [{"text": "point", "event_ids": ["\#(first)"]}], "cited_event_ids": ["\#(first)"]}"#
        )
    }
}

enum StudioFixtures {
    static func messages(_ count: Int, tag: String = "canary-studio") -> [ConversationItem] {
        (1...count).map { n in
            ConversationItem(
                eventID: EventID("$m\(n)"), sender: UserID("@bob:localhost"),
                timestamp: MatrixTimestamp(milliseconds: 1_000 + Int64(n)), body: "\(tag)-\(n) about the migration")
        }
    }
}
