import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines
import Testing

/// Chat through the ``FaultProxy`` in front of Synapse: Alice's requests meet injected faults,
/// Bob talks to Synapse directly and reads what really arrived.
extension ChatDeliveryTests {
    @Test("The answer to a send is lost after Synapse stored the event: the retry reuses the transaction ID, one event")
    func sendAnswerLost() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let rule = setup.proxy.inject(.dropResponse, method: "PUT", path: "/send/m.room.message/")
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }

            let receipt = try await setup.alice.conversation(id: setup.roomID).send(.text("answer lost"))
            try await receipt.waitUntilSent()
            #expect(setup.proxy.injectedCount(rule) == 1)
            // Synapse stored the first request. The sync's remote echo may settle the receipt before
            // the retry leaves; if the retry leaves, it carries the same transaction ID.
            #expect((1...2).contains(setup.proxy.forwardedCount(rule)))
            try await bobRoom.waitForTimeline { $0.texts.contains("answer lost") }
            let followUp = try await setup.alice.conversation(id: setup.roomID).send(.text("after the loss"))
            try await followUp.waitUntilSent()
            let items = try await bobRoom.waitForTimeline { $0.texts.contains("after the loss") }
            #expect(items.texts.filter { $0 == "answer lost" }.count == 1)
        }
    }

    @Test("Sends answered 502 by the proxy (Synapse never sees them) are retried until one reaches it, once")
    func sendServerErrors() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let rule = setup.proxy.inject(.status(502), method: "PUT", path: "/send/m.room.message/", times: 2)
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }

            let receipt = try await setup.alice.conversation(id: setup.roomID).send(.text("through errors"))
            try await receipt.waitUntilSent()
            #expect(setup.proxy.injectedCount(rule) == 2)
            #expect(setup.proxy.forwardedCount(rule) == 1)
            let items = try await bobRoom.waitForTimeline { $0.texts.contains("through errors") }
            #expect(items.texts.filter { $0 == "through errors" }.count == 1)
        }
    }

    @Test("A delayed answer to a send holds the queue: the next message goes after it, both once, in order")
    func sendAnswerDelayed() async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let rule = setup.proxy.inject(.delay(.seconds(2)), method: "PUT", path: "/send/m.room.message/")
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            let stopObserving = bobRoom.observe()
            defer { stopObserving() }

            let aliceRoom = try await setup.alice.conversation(id: setup.roomID)
            let first = try await aliceRoom.send(.text("slow first"))
            let second = try await aliceRoom.send(.text("quick second"))
            try await second.waitUntilSent()
            #expect(first.state.value != .sending, "the second message was sent before the first was answered")
            #expect(setup.proxy.forwardedCount(rule) == 2)
            let items = try await bobRoom.waitForTimeline { $0.texts.contains("quick second") }
            #expect(
                items.texts.filter { $0.hasPrefix("slow") || $0.hasPrefix("quick") } == ["slow first", "quick second"])
        }
    }

    @Test(
        "A /sync answer cut mid-body is retried from the same token: every message arrives once",
        arguments: [FaultProxy.Fault.resetMidBody, .truncateBody])
    func syncAnswerCut(fault: FaultProxy.Fault) async throws {
        try await withChatTestRun { run in
            let setup = try await makeSetup(run)
            let aliceRoom = try await setup.alice.conversation(id: setup.roomID)
            let stopObserving = aliceRoom.observe()
            defer { stopObserving() }
            // The long poll in flight is not affected; the next one, answered by Bob's second
            // message, gets the fault.
            let rule = setup.proxy.inject(fault, method: "GET", path: "/_matrix/client/v3/sync")
            let bobRoom = try await setup.bob.conversation(id: setup.roomID)
            try await bobRoom.send(.text("before the cut")).waitUntilSent()
            try await aliceRoom.waitForTimeline { $0.texts.contains("before the cut") }
            try await bobRoom.send(.text("in the cut")).waitUntilSent()
            try await bobRoom.send(.text("after the cut")).waitUntilSent()
            let items = try await aliceRoom.waitForTimeline { $0.texts.contains("after the cut") }
            #expect(setup.proxy.injectedCount(rule) == 1)
            let bobs = items.texts.filter { $0.hasSuffix(" the cut") }
            #expect(bobs == ["before the cut", "in the cut", "after the cut"])
        }
    }
}
