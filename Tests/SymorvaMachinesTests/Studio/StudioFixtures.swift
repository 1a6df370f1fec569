import SymorvaRuntime

@testable import SymorvaMachines

/// Values shared by the studio machine tests: one member, one room, grants of both scopes,
/// content that covers them (and content that does not), and samples of every case.
enum StudioFixture {
    static let alice = UserID("@alice:example.org")
    static let bob = UserID("@bob:example.org")
    static let room = RoomID("!room:example.org")
    static let grantID = GrantID("gr_1")
    static let deadline = Duration.seconds(3600)

    static func event(_ n: Int) -> EventID { EventID("$e\(n)") }

    static let selectedScope = GrantScope.selectedMessages([event(1), event(2)])
    static let sinceScope = GrantScope.conversation(since: event(5))

    static let request = GrantRequest(
        member: alice, roomID: room, scope: selectedScope, lifetime: .seconds(3600), recipient: "Orbit assistant")
    static let sinceRequest = GrantRequest(
        member: alice, roomID: room, scope: sinceScope, sinceTimestamp: MatrixTimestamp(milliseconds: 1005),
        lifetime: .seconds(3600), recipient: "Orbit assistant")

    static func grant(_ request: GrantRequest = request, id: GrantID = grantID) -> StudioGrant {
        StudioGrant(
            id: id, member: request.member, roomID: request.roomID, scope: request.scope,
            sinceTimestamp: request.sinceTimestamp, purpose: request.purpose,
            expiresAt: Timestamp(millisecondsSince1970: 1_800_003_600_000), expiryDeadline: deadline)
    }

    static func item(_ n: Int, body: String = "message body") -> ConversationItem {
        ConversationItem(
            eventID: event(n), sender: bob, timestamp: MatrixTimestamp(milliseconds: 1000 + Int64(n)), body: body)
    }

    /// Exactly the selected messages.
    static let covering = [item(1), item(2)]
    static let requestID = SummaryRequestID(1)

    static var content: GrantedContent { GrantedContent(grant: grant(), requestID: requestID, items: covering) }
    static var active: ActiveGrant { ActiveGrant(grant: grant()) }

    static let summary = Summary(
        grantID: grantID, backend: "extractive-lexrank", itemCount: 2,
        points: [.init(text: "point", eventIDs: [event(1)])], citedEventIDs: [event(1)])

    static let sampleStates: [StudioGrantMachine.State] = [
        .idle,
        .awaitingConsent(request),
        .declined(request, .declined),
        .requestingGrant(request),
        .granted(active),
        .summarizing(active, content),
        .revoking(grant()),
        .revoked(grant(), confirmed: true),
        .revoked(grant(), confirmed: false),
        .expired(grant()),
        .failed(request, .notRoomMember),
    ]

    static let sampleEvents: [StudioGrantMachine.Event] = [
        .grantRequested(request),
        .consentAnswered(.approved),
        .consentAnswered(.declined),
        .consentAnswered(.unavailable),
        .grantResponse(.success(grant())),
        .grantResponse(.success(grant(sinceRequest))),  // a grant for something else
        .grantResponse(.failure(.notRoomMember)),
        .summarizeRequested(requestID, covering),
        .summarizeRequested(requestID, [item(1), item(3)]),
        .summaryResponse(requestID, .success(summary)),
        .summaryResponse(requestID, .failure(.grantRevoked)),
        .summaryResponse(requestID, .failure(.grantExpired)),
        .summaryResponse(requestID, .failure(.serviceUnreachable(.timeout))),
        .revokeRequested,
        .revokeResponse(.success(grantID)),
        .revokeResponse(.failure(.serviceUnreachable(.unreachable))),
        .expiryReached,
        .restored(grant()),
    ]
}
