import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// In-room verification without a server: the room forms of the contents (an `m.reference` to
/// the request instead of `transaction_id`, the request an `m.room.message`), and two centers
/// whose room events are passed in process: a whole flow, and the events a center ignores
/// (another room, another user, a flow it has no part in, a request for someone else, its own
/// echo).
@Suite("In-room verification")
struct InRoomVerificationTests {
    static let room = RoomID("!dm:example.org")

    @Test("The request is an m.room.message with msgtype, from_device, methods, to and a body; no transaction_id")
    func requestShape() throws {
        let content = VerificationMessages.roomRequest(
            fromDevice: DeviceID("ALICE"), to: UserID("@bob:example.org"), methods: ["m.sas.v1"])
        guard case .object(let fields) = content else {
            Issue.record("not an object")
            return
        }
        #expect(fields["msgtype"] == .string("m.key.verification.request"))
        #expect(fields["from_device"] == .string("ALICE"))
        #expect(fields["methods"] == .array([.string("m.sas.v1")]))
        #expect(fields["to"] == .string("@bob:example.org"))
        if case .string(let body)? = fields["body"] { #expect(!body.isEmpty) } else { Issue.record("no body") }
        #expect(fields["transaction_id"] == nil && fields["timestamp"] == nil)
        let parsed = try #require(VerificationMessages.parseRequest(content))
        #expect(parsed.device == DeviceID("ALICE") && parsed.methods == ["m.sas.v1"] && parsed.timestamp == nil)
        #expect(VerificationMessages.requestRecipient(content) == UserID("@bob:example.org"))
        let read = try #require(
            VerificationMessages.roomMessage(type: "m.room.message", content: content, eventID: "$req"))
        #expect(read.kind == .request && read.transactionID == "$req")
        // A to-device request without its timestamp is not one.
        #expect(
            VerificationMessages.parseRequest(
                .object(["from_device": .string("A"), "methods": .array([]), "transaction_id": .string("t")])) == nil)
    }

    @Test("Every step in a room relates to the request (m.reference) and carries no transaction_id")
    func stepShapes() throws {
        let flow = VerificationFlow(
            transactionID: "$request",
            ourselves: VerificationParty(userID: "@alice:example.org", deviceID: DeviceID("ALICE")),
            peerUserID: "@bob:example.org", peerDeviceID: DeviceID("BOB"), usesRequest: true)
        let contents: [(VerificationMessages.Kind, JSONValue)] = [
            (.ready, VerificationMessages.ready(flow, methods: ["m.sas.v1"])),
            (.start, VerificationMessages.start(flow, offer: .ours)),
            (.key, VerificationMessages.key(flow, publicKey: "k")),
            (.mac, VerificationMessages.mac(flow, macs: ["ed25519:ALICE": "m"], keys: "ks")),
            (.done, VerificationMessages.done(flow)),
            (.cancel, VerificationMessages.cancel(flow, code: .user)),
        ]
        for (kind, toDevice) in contents {
            let content = VerificationMessages.inRoom(toDevice)
            guard case .object(let fields) = content else {
                Issue.record("\(kind): not an object")
                continue
            }
            #expect(fields["transaction_id"] == nil, "\(kind)")
            #expect(
                fields["m.relates_to"]
                    == .object(["rel_type": .string("m.reference"), "event_id": .string("$request")]), "\(kind)")
            let read = try #require(
                VerificationMessages.roomMessage(type: kind.rawValue, content: content, eventID: "$x"))
            #expect(read.kind == kind && read.transactionID == "$request")
        }
        // Not verification: no relation, another relation, another msgtype, a request type as an event.
        let done = VerificationMessages.done(flow)
        #expect(VerificationMessages.roomMessage(type: "m.key.verification.done", content: done, eventID: "$x") == nil)
        let annotation = JSONValue.object([
            "m.relates_to": .object(["rel_type": .string("m.annotation"), "event_id": .string("$request")])
        ])
        #expect(
            VerificationMessages.roomMessage(type: "m.key.verification.done", content: annotation, eventID: "$x") == nil
        )
        let text = JSONValue.object(["msgtype": .string("m.text"), "body": .string("hi")])
        #expect(VerificationMessages.roomMessage(type: "m.room.message", content: text, eventID: "$x") == nil)
        let request = VerificationMessages.inRoom(
            VerificationMessages.request(flow, methods: ["m.sas.v1"], timestampMilliseconds: 1))
        #expect(
            VerificationMessages.roomMessage(type: "m.key.verification.request", content: request, eventID: "$x") == nil
        )
    }

    /// What one center sent into rooms.
    final class RoomLog: Sendable {
        struct Event: Sendable {
            var room: RoomID
            var eventID: String
            var type: String
            var content: [UInt8]
        }
        let events = Lock<[Event]>([])
        let counter: Lock<Int>
        let prefix: String

        init(_ prefix: String, counter: Lock<Int>) {
            self.prefix = prefix
            self.counter = counter
        }

        var sender: VerificationRoomSender {
            { [self] room, type, content throws(KeyVerificationError) in
                let id = counter.withLock { count in
                    count += 1
                    return "$\(prefix)\(count)"
                }
                events.withLock { $0.append(Event(room: room, eventID: id, type: type, content: content)) }
                return id
            }
        }

        /// The events sent since `index`, as the other side reads them.
        func taken(from index: inout Int, sender: UserID, room: RoomID? = nil) -> [VerificationRoomEvent] {
            let all = events.withLock { $0 }
            defer { index = all.count }
            return all[index...].map {
                VerificationRoomEvent(
                    roomID: room ?? $0.room, eventID: $0.eventID, sender: sender, type: $0.type, content: $0.content,
                    originServerTS: 1_000)
            }
        }

        var types: [String] { events.withLock { $0.map(\.type) } }
    }

    struct Pair {
        let alice: EngineFixture.Device
        let bob: EngineFixture.Device
        let aliceCenter: VerificationCenter
        let bobCenter: VerificationCenter
        let aliceLog: RoomLog
        let bobLog: RoomLog
        var aliceRead = 0
        var bobRead = 0

        /// Passes what each side sent to the other until neither sends more.
        mutating func pump() async {
            while true {
                let toBob = aliceLog.taken(from: &aliceRead, sender: alice.userID)
                let toAlice = bobLog.taken(from: &bobRead, sender: bob.userID)
                if toBob.isEmpty && toAlice.isEmpty { return }
                await bobCenter.deliver(room: toBob)
                await aliceCenter.deliver(room: toAlice)
            }
        }
    }

    static func pair() async throws -> Pair {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        let counter = Lock(0)
        let aliceLog = RoomLog("a", counter: counter)
        let bobLog = RoomLog("b", counter: counter)
        let aliceCenter = VerificationCenterTests.center(for: alice, transport: ScriptedHTTPTransport())
        let bobCenter = VerificationCenterTests.center(for: bob, transport: ScriptedHTTPTransport())
        await aliceCenter.setRoomSender(aliceLog.sender)
        await bobCenter.setRoomSender(bobLog.sender)
        return Pair(
            alice: alice, bob: bob, aliceCenter: aliceCenter, bobCenter: bobCenter, aliceLog: aliceLog,
            bobLog: bobLog)
    }

    @Test("A whole flow in a room: the request's event ID is the flow's, the same emoji on both sides, both verified")
    func wholeFlow() async throws {
        var pair = try await Self.pair()
        let outgoing = try await pair.aliceCenter.request(user: pair.bob.userID, inRoom: Self.room)
        #expect(outgoing.transactionID == "$a1")
        #expect(pair.aliceLog.types == ["m.room.message"])
        await pair.pump()
        let incoming = try #require(pair.bobCenter.incoming.observable.value)
        #expect(incoming.transactionID == "$a1" && incoming.state.value == .incoming)
        await incoming.accept()
        await pair.pump()
        #expect(outgoing.state.value == .ready)
        #expect(outgoing.otherDeviceID == DeviceID("BOB"))
        // The request and the ready again (a sync that brings them twice): nothing changes.
        var again = 0
        await pair.bobCenter.deliver(room: pair.aliceLog.taken(from: &again, sender: pair.alice.userID))
        again = 0
        await pair.aliceCenter.deliver(room: pair.bobLog.taken(from: &again, sender: pair.bob.userID))
        #expect(outgoing.state.value == .ready && incoming.state.value == .ready)
        await outgoing.startSAS()
        await pair.pump()
        guard case .showingCode = outgoing.state.value else {
            Issue.record("Alice: \(outgoing.state.value)")
            return
        }
        #expect(incoming.state.value == outgoing.state.value)
        await outgoing.confirm()
        await incoming.confirm()
        await pair.pump()
        #expect(outgoing.state.value == .verified)
        #expect(incoming.state.value == .verified)
        #expect(
            pair.aliceLog.types == [
                "m.room.message", "m.key.verification.start", "m.key.verification.key", "m.key.verification.mac",
                "m.key.verification.done",
            ])
        #expect(
            pair.bobLog.types == [
                "m.key.verification.ready", "m.key.verification.accept", "m.key.verification.key",
                "m.key.verification.mac", "m.key.verification.done",
            ])
        // Every step relates to the request and names no transaction.
        for event in pair.aliceLog.events.withLock({ $0 }).dropFirst() + pair.bobLog.events.withLock({ $0 }) {
            let content = try JSONValue(parsing: event.content)
            #expect(VerificationMessages.transactionID(of: content) == nil)
            #expect(
                VerificationMessages.roomMessage(type: event.type, content: content, eventID: "")?.transactionID
                    == "$a1")
            #expect(event.room == Self.room)
        }
    }

    @Test(
        "Ignored: a step from another room or another user, a step of a flow it has no part in, a request for someone else, its own echo"
    )
    func ignored() async throws {
        var pair = try await Self.pair()
        let outgoing = try await pair.aliceCenter.request(user: pair.bob.userID, inRoom: Self.room)
        await pair.pump()
        let incoming = try #require(pair.bobCenter.incoming.observable.value)
        let cancel = try VerificationMessages.inRoom(
            VerificationMessages.cancel(transactionID: outgoing.transactionID, code: .user)
        ).canonicalEncoding()
        func event(_ id: String, room: RoomID = Self.room, sender: UserID, type: String, content: [UInt8])
            -> VerificationRoomEvent
        {
            VerificationRoomEvent(
                roomID: room, eventID: id, sender: sender, type: type, content: content, originServerTS: 1_000)
        }
        // Alice's cancel, but in another room; a cancel from a third user in the right room.
        await pair.bobCenter.deliver(room: [
            event(
                "$x1", room: RoomID("!other:example.org"), sender: pair.alice.userID, type: "m.key.verification.cancel",
                content: cancel),
            event("$x2", sender: UserID("@eve:example.org"), type: "m.key.verification.cancel", content: cancel),
        ])
        #expect(incoming.state.value == .incoming)
        // A step of a flow Bob has no part in: ignored, nothing answered in the room.
        let unknownReady = try VerificationMessages.inRoom(
            .object([
                "transaction_id": .string("$elsewhere"), "from_device": .string("ALICE"),
                "methods": .array([.string("m.sas.v1")]),
            ])
        ).canonicalEncoding()
        await pair.bobCenter.deliver(room: [
            event("$x3", sender: pair.alice.userID, type: "m.key.verification.ready", content: unknownReady)
        ])
        #expect(pair.bobLog.types.isEmpty)
        // A request for someone else does not open a flow.
        let forEve = try VerificationMessages.roomRequest(
            fromDevice: DeviceID("ALICE"), to: UserID("@eve:example.org"), methods: ["m.sas.v1"]
        ).canonicalEncoding()
        await pair.bobCenter.deliver(room: [
            event("$x4", sender: pair.alice.userID, type: "m.room.message", content: forEve)
        ])
        #expect(pair.bobCenter.incoming.observable.value?.transactionID == outgoing.transactionID)
        // Alice's own echo of her request changes nothing on her side.
        var all = 0
        await pair.aliceCenter.deliver(room: pair.aliceLog.taken(from: &all, sender: pair.alice.userID))
        #expect(outgoing.state.value == .requested)
        #expect(pair.aliceCenter.incoming.observable.value == nil)
        // The real cancel, from Alice in the room, ends Bob's flow.
        await pair.bobCenter.deliver(room: [
            event("$x5", sender: pair.alice.userID, type: "m.key.verification.cancel", content: cancel)
        ])
        #expect(incoming.state.value == .cancelled(code: "m.user", byUs: false))
    }

    @Test(
        "Bob's other device shows the request too; when his first device answers in the room, the other ends cancelled m.accepted and sends nothing"
    )
    func answeredByAnotherOwnDevice() async throws {
        var pair = try await Self.pair()
        let fixture = EngineFixture()
        let other = try await fixture.device("@bob:example.org", "BOB2")
        _ = try await other.store.storeQueried(
            [pair.alice.userID: [try await pair.alice.listed()]], users: [pair.alice.userID])
        let otherLog = RoomLog("c", counter: Lock(0))
        let otherCenter = VerificationCenterTests.center(for: other, transport: ScriptedHTTPTransport())
        await otherCenter.setRoomSender(otherLog.sender)
        let outgoing = try await pair.aliceCenter.request(user: pair.bob.userID, inRoom: Self.room)
        var read = 0
        await otherCenter.deliver(room: pair.aliceLog.taken(from: &read, sender: pair.alice.userID))
        await pair.pump()
        let first = try #require(pair.bobCenter.incoming.observable.value)
        let second = try #require(otherCenter.incoming.observable.value)
        #expect(first.transactionID == outgoing.transactionID && second.transactionID == outgoing.transactionID)
        await first.accept()
        var bobRead = 0
        await otherCenter.deliver(room: pair.bobLog.taken(from: &bobRead, sender: pair.bob.userID))
        #expect(second.state.value == .cancelled(code: "m.accepted", byUs: false))
        #expect(otherLog.types.isEmpty)
        // Bob's own echo of his ready changes nothing on his first device.
        var echo = 0
        await pair.bobCenter.deliver(room: pair.bobLog.taken(from: &echo, sender: pair.bob.userID))
        #expect(first.state.value == .ready)
    }
}
