import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaMachines

/// Each test is one scenario: state, event, whole next state, whole effect list.
@Suite("StudioGrant machine")
struct StudioGrantMachineTests {
    typealias F = StudioFixture
    let machine = StudioGrantMachine()

    // MARK: Consent first

    @Test("A grant request shows the consent sheet and asks nothing of the service")
    func consentFirst() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .grantRequested(F.request), expecting: .awaitingConsent(F.request),
            effects: [.presentConsent(F.request.consentSheet)])
    }

    @Test("The consent sheet says what, with whom and for how long")
    func consentText() {
        #expect(
            F.request.consentSheet.text
                == "Share 2 selected messages of !room:example.org with Orbit assistant to summarize them, for 1 hour.")
        #expect(F.sinceRequest.consentSheet.text.contains("every message from $e5 on"))
    }

    @Test("Approving asks the service for the grant")
    func approved() throws {
        let store = MachineTestStore(machine, initial: .awaitingConsent(F.request))
        try store.send(
            .consentAnswered(.approved), expecting: .requestingGrant(F.request), effects: [.sendGrantRequest(F.request)]
        )
    }

    @Test("Declining ends it with no request at all", arguments: [ConsentAnswer.declined, .unavailable])
    func declined(answer: ConsentAnswer) throws {
        let store = MachineTestStore(machine, initial: .awaitingConsent(F.request))
        try store.send(.consentAnswered(answer), expecting: .declined(F.request, answer))
        try store.assertIgnored(F.sampleEvents)
    }

    @Test("Nothing but the answer moves the consent sheet on")
    func consentIgnoresOthers() throws {
        let store = MachineTestStore(machine, initial: .awaitingConsent(F.request))
        try store.assertIgnored([
            .grantRequested(F.request), .grantResponse(.success(F.grant())),
            .summarizeRequested(F.requestID, F.covering),
            .revokeRequested, .expiryReached, .restored(F.grant()),
        ])
    }

    // MARK: The grant

    @Test("A matching grant is live: stored and its expiry armed on the runtime clock")
    func granted() throws {
        let store = MachineTestStore(machine, initial: .requestingGrant(F.request))
        try store.send(
            .grantResponse(.success(F.grant())), expecting: .granted(F.active),
            effects: [.persistGrant(F.grant()), .scheduleExpiry(at: F.deadline)])
    }

    @Test("A grant for another scope than asked is refused, never used")
    func mismatchedGrant() throws {
        let store = MachineTestStore(machine, initial: .requestingGrant(F.request))
        try store.send(
            .grantResponse(.success(F.grant(F.sinceRequest))),
            expecting: .failed(F.request, .rejected(code: "SY_GRANT_MISMATCH")))
    }

    @Test("A refused grant fails with the service's reason")
    func grantRefused() throws {
        let store = MachineTestStore(machine, initial: .requestingGrant(F.request))
        try store.send(.grantResponse(.failure(.notRoomMember)), expecting: .failed(F.request, .notRoomMember))
        try store.assertIgnored(F.sampleEvents)
    }

    @Test("A restored grant is live again with its expiry")
    func restored() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(.restored(F.grant()), expecting: .granted(F.active), effects: [.scheduleExpiry(at: F.deadline)])
    }

    // MARK: Content

    @Test("Content covering exactly the selection leaves, as content only the machine makes")
    func summarize() throws {
        let store = MachineTestStore(machine, initial: .granted(F.active))
        try store.send(
            .summarizeRequested(F.requestID, F.covering), expecting: .summarizing(F.active, F.content),
            effects: [.sendSummarize(F.content)])
    }

    @Test(
        "Content that does not cover exactly the scope never leaves",
        arguments: [
            ([F.item(1), F.item(3)], ScopeMismatch.outside(F.event(3))),
            ([F.item(1), F.item(1)], .duplicate(F.event(1))),
            ([F.item(1)], .missing(F.event(2))),
            ([], .missing(F.event(1))),
        ])
    func outOfScope(items: [ConversationItem], mismatch: ScopeMismatch) throws {
        let store = MachineTestStore(machine, initial: .granted(F.active))
        try store.send(
            .summarizeRequested(F.requestID, items),
            expecting: .granted(ActiveGrant(grant: F.grant(), last: .refused(F.requestID, .outOfScope(mismatch)))))
    }

    @Test("A conversation grant covers its first message and later ones, not earlier ones")
    func sinceScope() throws {
        let grant = F.grant(F.sinceRequest)
        let store = MachineTestStore(machine, initial: .granted(ActiveGrant(grant: grant)))
        let inside = [F.item(5), F.item(9)]
        let content = GrantedContent(grant: grant, requestID: F.requestID, items: inside)
        try store.send(
            .summarizeRequested(F.requestID, inside), expecting: .summarizing(ActiveGrant(grant: grant), content),
            effects: [.sendSummarize(content)])
        store.reset(to: .granted(ActiveGrant(grant: grant)))
        try store.send(
            .summarizeRequested(F.requestID, [F.item(6), F.item(4)]),
            expecting: .granted(
                ActiveGrant(grant: grant, last: .refused(F.requestID, .outOfScope(.outside(F.event(4)))))))
    }

    @Test("A summary of the content returns the grant to granted with it")
    func summarized() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .summaryResponse(F.requestID, .success(F.summary)),
            expecting: .granted(ActiveGrant(grant: F.grant(), last: .summarized(F.requestID, F.summary))))
    }

    @Test("A summary citing messages it was not given is refused")
    func badCitation() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        let invented = Summary(
            grantID: F.grantID, backend: "x", itemCount: 2, points: [.init(text: "x", eventIDs: [F.event(9)])],
            citedEventIDs: [F.event(9)])
        try store.send(
            .summaryResponse(F.requestID, .success(invented)),
            expecting: .granted(
                ActiveGrant(grant: F.grant(), last: .refused(F.requestID, .rejected(code: "SY_BAD_CITATION")))))
    }

    @Test("A service error leaves the grant live, with the reason")
    func summaryServiceError() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .summaryResponse(F.requestID, .failure(.serviceUnreachable(.timeout))),
            expecting: .granted(
                ActiveGrant(grant: F.grant(), last: .refused(F.requestID, .serviceUnreachable(.timeout)))))
    }

    @Test("The service saying revoked ends the grant")
    func summaryRevokedByService() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .summaryResponse(F.requestID, .failure(.grantRevoked)), expecting: .revoked(F.grant(), confirmed: true),
            effects: [.cancel(StudioGrantMachine.Keys.expiry), .forgetGrant(F.grantID)])
    }

    @Test("The service saying expired ends the grant")
    func summaryExpiredByService() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .summaryResponse(F.requestID, .failure(.grantExpired)), expecting: .expired(F.grant()),
            effects: [.cancel(StudioGrantMachine.Keys.expiry), .forgetGrant(F.grantID)])
    }

    @Test("One summary at a time")
    func oneAtATime() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.assertIgnored([.summarizeRequested(SummaryRequestID(2), F.covering), .restored(F.grant())])
    }

    // MARK: Revoke and expiry

    @Test("Revoking forgets the grant locally first, then tells the service")
    func revoke() throws {
        let store = MachineTestStore(machine, initial: .granted(F.active))
        try store.send(
            .revokeRequested, expecting: .revoking(F.grant()),
            effects: [.cancel(StudioGrantMachine.Keys.expiry), .forgetGrant(F.grantID), .sendRevoke(F.grantID)])
        try store.send(.revokeResponse(.success(F.grantID)), expecting: .revoked(F.grant(), confirmed: true))
        try store.send(.revokeRequested, stayingWith: [])
        try store.assertIgnored([.summarizeRequested(F.requestID, F.covering), .expiryReached, .restored(F.grant())])
    }

    @Test("Revoking while summarizing cancels the summary request before it leaves")
    func revokeWhileSummarizing() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .revokeRequested, expecting: .revoking(F.grant()),
            effects: [
                .cancel(StudioGrantMachine.Keys.summarize), .cancel(StudioGrantMachine.Keys.expiry),
                .forgetGrant(F.grantID), .sendRevoke(F.grantID),
            ])
        try store.assertIgnored([.summaryResponse(F.requestID, .success(F.summary))])
    }

    @Test("A revoke the service did not confirm stays revoked here and may be sent again")
    func revokeUnconfirmed() throws {
        let store = MachineTestStore(machine, initial: .revoking(F.grant()))
        try store.send(
            .revokeResponse(.failure(.serviceUnreachable(.unreachable))),
            expecting: .revoked(F.grant(), confirmed: false))
        try store.assertIgnored([.summarizeRequested(F.requestID, F.covering)])
        try store.send(.revokeRequested, expecting: .revoking(F.grant()), effects: [.sendRevoke(F.grantID)])
        try store.send(.revokeResponse(.failure(.grantRevoked)), expecting: .revoked(F.grant(), confirmed: true))
    }

    @Test("Expiry ends a live grant")
    func expiry() throws {
        let store = MachineTestStore(machine, initial: .granted(F.active))
        try store.send(.expiryReached, expecting: .expired(F.grant()), effects: [.forgetGrant(F.grantID)])
        try store.assertIgnored(F.sampleEvents)
    }

    @Test("Expiry during a summary request cancels it")
    func expiryWhileSummarizing() throws {
        let store = MachineTestStore(machine, initial: .summarizing(F.active, F.content))
        try store.send(
            .expiryReached, expecting: .expired(F.grant()),
            effects: [.cancel(StudioGrantMachine.Keys.summarize), .forgetGrant(F.grantID)])
    }

    @Test("The expiry timer fires expiryReached; no other effect is a timer")
    func timerEvent() {
        #expect(machine.event(firing: .scheduleExpiry(at: F.deadline)) == .expiryReached)
        #expect(machine.event(firing: .sendRevoke(F.grantID)) == nil)
        #expect(
            StudioGrantMachine.Effect.scheduleExpiry(at: F.deadline).directive
                == .timer(StudioGrantMachine.Keys.expiry, .at(F.deadline)))
    }

    // MARK: The last check before content leaves

    @Test("Content is checked again before it leaves: revoked, expired, scope")
    func recheck() {
        let content = F.content
        #expect(content.recheck(at: .seconds(10), revoked: []) == nil)
        #expect(content.recheck(at: .seconds(10), revoked: [F.grantID]) == .grantRevoked)
        #expect(content.recheck(at: F.deadline, revoked: []) == .grantExpired)
    }

    @Test("Descriptions of content carry no body")
    func descriptionsAreRedacted() {
        let canary = "canary-\(UInt64.random(in: 0...UInt64.max))"
        let item = F.item(1, body: canary)
        let content = GrantedContent(grant: F.grant(), requestID: F.requestID, items: [item, F.item(2)])
        let texts = [
            String(describing: item), String(reflecting: item), String(describing: content),
            String(reflecting: content), String(describing: StudioGrantMachine.Effect.sendSummarize(content)),
            String(describing: StudioGrantMachine.Event.summarizeRequested(F.requestID, [item])),
            String(describing: F.summary),
        ]
        var dumped = ""
        dump(content, to: &dumped)
        for text in texts + [dumped] { #expect(!text.contains(canary), "\(text)") }
    }
}
