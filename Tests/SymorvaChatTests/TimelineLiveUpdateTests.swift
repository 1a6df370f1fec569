import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaChatStore
@testable import SymorvaMatrix

/// An observed timeline shows every committed sync batch, whatever order the host runs the
/// effects of its observation in. The host starts each effect in its own task, so the test holds
/// them (``HeldEffectsInterpreter``) and runs them in the order it fears; the store is real and
/// the sync loop does not run: the test commits batches and routes them as the loop does.
@Suite("Live updates of an observed timeline, whatever order its effects run in")
struct TimelineLiveUpdateTests {
    typealias Room = ConversationReactionTests

    let machine = TimelineMachine(initialPageSize: ChatOptions().initialPageSize)
    let trace = ObservableTraceRecorder()

    @Test("A batch committed after the first page was read, before the observation's other effects ran, is shown")
    func batchBetweenFirstPageAndTheRest() async throws {
        try await withHeldConversation { conversation, held in
            let observer = conversation.timeline.subscribe { _ in }
            defer { observer() }
            let observing = launched(from: .idle, on: .observed)
            try await held.waitForHeld(count: observing.count)

            // The newest page is read first…
            for effect in observing where isPageLoad(effect) { try await held.release(effect) }
            try await waitForPages(1)
            // …then sync commits a batch and routes it…
            try await deliver(
                "b2", [Room.text(id: "$m2", from: "@alice:example.org", body: "second")], to: conversation)
            // …and only then do the observation's other effects run.
            for effect in observing where !isPageLoad(effect) { try await held.release(effect) }

            let window = await conversation.timelineHost.currentState.window?.eventIDs ?? []
            #expect(window.contains(Room.message))
            try #require(window.contains(EventID("$m2")), "the batch committed after the page was read is missing")
            try await conversation.timeline.wait(until: { $0.contains { $0.eventID == EventID("$m2") } })
        }
    }

    @Test("Live updates stay on when an observer comes back before the last one's leaving has been performed")
    func observedAgainBeforeLeavingRan() async throws {
        try await withHeldConversation { conversation, held in
            let first = conversation.timeline.subscribe { _ in }
            let observing = launched(from: .idle, on: .observed)
            try await held.waitForHeld(count: observing.count)
            for effect in observing { try await held.release(effect) }
            try await waitForPages(1)
            let settled = await conversation.timelineHost.currentState

            // The last observer leaves and a new one comes at once…
            first()
            let second = conversation.timeline.subscribe { _ in }
            defer { second() }
            let relaunched = launched(from: settled, on: .unobserved) + launched(from: .idle, on: .observed)
            try await held.waitForHeld(count: relaunched.count)
            // …and the host runs their effects newest first.
            for effect in relaunched.reversed() { try await held.release(effect) }
            try await waitForPages(2)

            try await deliver(
                "b2", [Room.text(id: "$m2", from: "@alice:example.org", body: "second")], to: conversation)
            let window = await conversation.timelineHost.currentState.window?.eventIDs ?? []
            #expect(window.contains(Room.message))
            try #require(window.contains(EventID("$m2")), "live updates are off while the timeline is observed")
            try await conversation.timeline.wait(until: { $0.contains { $0.eventID == EventID("$m2") } })
        }
    }

    @Test(
        "A limited batch that reaches back to the shown events continues the timeline: no gap, the new event after them"
    )
    func limitedBatchThatContinues() async throws {
        try await withHeldConversation { conversation, held in
            let observer = conversation.timeline.subscribe { _ in }
            defer { observer() }
            let observing = launched(from: .idle, on: .observed)
            try await held.waitForHeld(count: observing.count)
            for effect in observing { try await held.release(effect) }
            try await waitForPages(1)

            // A new sliding sync connection sends the room again, limited, from the shown message.
            try await deliver(
                "b2",
                [
                    Room.text(id: "$m1", from: "@alice:example.org", body: "hello"),
                    Room.text(id: "$m2", from: "@alice:example.org", body: "second"),
                ], limitedFrom: "older", to: conversation)
            let state = await conversation.timelineHost.currentState
            if case .gap = state { Issue.record("a gap before events the timeline already shows") }
            #expect(state.window?.eventIDs.suffix(2) == [Room.message, EventID("$m2")])
            try await conversation.timeline.wait(until: { $0.contains { $0.eventID == EventID("$m2") } })
        }
    }

    // MARK: Support

    /// Runs `body` with a conversation of a chat on an in-memory store that holds the room with
    /// alice's first message; the timeline's effects wait until `body` releases them. The
    /// conversation is shut down however `body` ends.
    func withHeldConversation(
        _ body: (Conversation, HeldEffectsInterpreter<TimelineMachine>) async throws -> Void
    ) async throws {
        let store = try await ChatStore.open(path: ":memory:")
        _ = try await SyncIngestor(store: store).ingest(
            Room.sync(
                "b1",
                [
                    Room.member("@me:example.org", id: "$join-me"),
                    Room.member("@alice:example.org", id: "$join-alice"),
                    Room.text(id: "$m1", from: "@alice:example.org", body: "hello"),
                ]))
        let requester = FixedTokenMatrixRequester(
            homeserverURL: HomeserverURL("https://matrix.example.org")!, userID: Room.me, accessToken: Secret("token"),
            transport: ScriptedHTTPTransport(fallback: ReactionHomeserver.unrecognized))
        let tracer = Tracer()
        tracer.addSink(trace)
        let chat = AccountChat(
            requester: requester, database: store.databaseForTesting, scope: AccountScope(label: Room.me.rawValue),
            clock: ManualClock(), tracer: tracer)
        var held: HeldEffectsInterpreter<TimelineMachine>?
        let conversation = Conversation(roomID: Room.roomID, client: chat) { interpreter in
            let wrapper = HeldEffectsInterpreter<TimelineMachine>(interpreter)
            held = wrapper
            return wrapper
        }
        do {
            try await body(conversation, try #require(held))
        } catch {
            await conversation.shutDown()
            throw error
        }
        await conversation.shutDown()
    }

    /// The effects a transition hands to the interpreter (a cancel never reaches it), in launch order.
    func launched(from state: TimelineMachine.State, on event: TimelineMachine.Event) -> [TimelineMachine.Effect] {
        machine.transition(from: state, on: event).effects.filter { effect in
            if case .cancel = effect.directive { return false }
            return true
        }
    }

    func isPageLoad(_ effect: TimelineMachine.Effect) -> Bool {
        effect.directive == .keyed(TimelineMachine.paginateKey)
    }

    /// Waits until the timeline has applied `count` store pages.
    func waitForPages(_ count: Int) async throws {
        try await trace.observable.wait(until: { records in
            records.filter { $0.machine == "Timeline" && $0.kind == .transition && $0.event == "storePageLoaded" }
                .count >= count
        })
    }

    /// Commits a `/sync` batch for the room and routes its changes to the conversation, as the
    /// sync loop does after its commit.
    func deliver(
        _ batch: String, _ events: [String], limitedFrom prevBatch: String? = nil, to conversation: Conversation
    ) async throws {
        let body = try SyncResponseDecoder.decode(Room.sync(batch, events, limitedFrom: prevBatch))
        let report = try await SyncIngestor(store: conversation.client.store).ingest(body)
        for room in SyncChanges(body, continued: report.continuedTimelines).rooms { await conversation.apply(room) }
    }
}
