import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Sharing a room's key: every decision (query, rotation, claim, batches, concurrent requests)
/// is the machine's, with no I/O.
@Suite("CryptoMachine: sharing a room's key")
struct CryptoSharingMachineTests {
    let machine = CryptoMachine()
    let alice = UserID("@alice:example.org")
    let bob = UserID("@bob:example.org")
    let carol = UserID("@carol:example.org")
    let roomID = RoomID("!room:example.org")

    var room: EncryptedRoom { EncryptedRoom(roomID: roomID, joined: [alice, bob, carol]) }
    var bob1: ShareDevice { ShareDevice(userID: bob, deviceID: "B1", curve25519: "b1key") }
    var bob2: ShareDevice { ShareDevice(userID: bob, deviceID: "B2", curve25519: "b2key") }
    var carol1: ShareDevice { ShareDevice(userID: carol, deviceID: "C1", curve25519: "c1key") }

    func ready(_ change: (inout CryptoWork) -> Void = { _ in }) -> CryptoMachine.State {
        var work = CryptoWork(maxOneTimeKeys: 100, serverOneTimeKeyCount: 50, jitter: JitterSource(seed: 3))
        change(&work)
        return .ready(work)
    }

    func share(_ step: RoomKeyShare.Step, round: UInt64 = 1, tickets: [UInt64] = [1], queried: Bool = false)
        -> RoomKeyShare
    {
        var share = RoomKeyShare(room: room, round: round, step: step, tickets: tickets.map(ShareTicket.init))
        share.queried = queried
        return share
    }

    func outbound(messages: Int = 3, created: Int64 = 0, sharedWith: Set<ShareDevice>) -> OutboundSessionFacts {
        OutboundSessionFacts(
            sessionID: "S1", createdMilliseconds: created, messageCount: messages, sharedWith: sharedWith)
    }

    @Test("A new room: facts, one claim for the devices without an Olm session, then a new session to those reached")
    func newRoom() throws {
        let store = MachineTestStore(machine, initial: ready())
        try store.send(
            .roomKeyNeeded(room, ShareTicket(1)),
            expecting: ready {
                $0.sharing[roomID] = share(.loadingFacts)
                $0.nextShareRound = 2
            }, effects: [.loadRoomKeyFacts(room, round: 1)])
        let facts = RoomKeyFacts(
            devices: [bob1, bob2, carol1], withoutOlmSession: [bob2, carol1], nowMilliseconds: 10)
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .success(facts)),
            expecting: ready {
                $0.sharing[roomID] = share(
                    .claiming(session: .new, recipients: [bob1, bob2, carol1], claiming: [bob2, carol1]))
                $0.nextShareRound = 2
            }, effects: [.claimOneTimeKeys(roomID, round: 1, [bob2, carol1])])
        // Carol's device had no one-time key left: she gets no key this time.
        try store.send(
            .oneTimeKeysClaimed(roomID, round: 1, .success([bob2])),
            expecting: ready {
                $0.sharing[roomID] = share(.sending(session: .new, remaining: []))
                $0.nextShareRound = 2
            }, effects: [.sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .new, devices: [bob1, bob2]))])
        try store.send(
            .roomKeySent(roomID, round: 1, .success(RoomKeySent(sessionID: "S1", devices: [bob1, bob2]))),
            expecting: ready {
                $0.shareOutcomes[ShareTicket(1)] = .shared(sessionID: "S1")
                $0.nextShareRound = 2
            })
        try store.send(.shareOutcomeTaken(ShareTicket(1)), expecting: ready { $0.nextShareRound = 2 })
    }

    @Test("The current session goes only to the devices it has not reached; with none, the round ends at once")
    func currentSession() throws {
        let store = MachineTestStore(machine, initial: ready { $0.sharing[roomID] = share(.loadingFacts) })
        let facts = RoomKeyFacts(
            devices: [bob1, bob2, carol1], outbound: outbound(sharedWith: [bob1]), nowMilliseconds: 10)
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .success(facts)),
            expecting: ready {
                $0.sharing[roomID] = share(.sending(session: .current("S1"), remaining: []))
            },
            effects: [.sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .current("S1"), devices: [bob2, carol1]))])

        store.reset(to: ready { $0.sharing[roomID] = share(.loadingFacts) })
        let everyone = RoomKeyFacts(
            devices: [bob1, carol1], outbound: outbound(sharedWith: [bob1, carol1]), nowMilliseconds: 10)
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .success(everyone)),
            expecting: ready { $0.shareOutcomes[ShareTicket(1)] = .shared(sessionID: "S1") })
    }

    @Test(
        "The session is replaced when used for the room's number of messages, older than its period, or shared with a device no longer there",
        arguments: [0, 1, 2])
    func rotation(reason: Int) throws {
        let (messages, created, left): (Int, Int64, Bool) =
            [(100, 0, false), (3, -7 * 24 * 3_600_000, false), (3, 0, true)][reason]
        let store = MachineTestStore(machine, initial: ready { $0.sharing[roomID] = share(.loadingFacts) })
        let gone = ShareDevice(userID: bob, deviceID: "OLD", curve25519: "oldkey")
        let facts = RoomKeyFacts(
            devices: [bob1, carol1],
            outbound: outbound(messages: messages, created: created, sharedWith: left ? [bob1, gone] : [bob1]),
            nowMilliseconds: 0)
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .success(facts)),
            expecting: ready { $0.sharing[roomID] = share(.sending(session: .new, remaining: [])) },
            effects: [.sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .new, devices: [bob1, carol1]))])
    }

    @Test("The room's rotation settings decide; the defaults are a week and 100 messages")
    func rotationPolicy() {
        let facts = { (messages: Int) in
            RoomKeyFacts(devices: [], outbound: self.outbound(messages: messages, sharedWith: []), nowMilliseconds: 0)
        }
        var room = room
        #expect(!RoomKeySharing.mustRotate(facts(99), policy: RotationPolicy(room: room)))
        #expect(RoomKeySharing.mustRotate(facts(100), policy: RotationPolicy(room: room)))
        room.rotationPeriodMessages = 2
        #expect(RoomKeySharing.mustRotate(facts(2), policy: RotationPolicy(room: room)))
        #expect(!RoomKeySharing.mustRotate(facts(1), policy: RotationPolicy(room: room)))
        #expect(RoomKeySharing.mustRotate(RoomKeyFacts(devices: [], nowMilliseconds: 0), policy: RotationPolicy()))
    }

    @Test("Batches hold whole users, at most 250 devices each; a user with more goes alone")
    func batches() {
        func devices(_ user: String, _ count: Int) -> [ShareDevice] {
            (0..<count).map {
                ShareDevice(userID: UserID("@\(user):x")!, deviceID: "D\($0)", curve25519: "\(user)\($0)")
            }
        }
        let batches = RoomKeySharing.batches(
            devices("a", 200) + devices("b", 100) + devices("c", 300) + devices("d", 10))
        #expect(batches.map(\.count) == [200, 100, 300, 10])
        #expect(batches.allSatisfy { Set($0.map(\.userID)).count == 1 })
        #expect(RoomKeySharing.batches(devices("a", 120) + devices("b", 120) + devices("c", 5)).map(\.count) == [245])
        #expect(RoomKeySharing.batches([]).isEmpty)
    }

    @Test("Several batches go one after the other with the session the first one created")
    func batchesInTurn() throws {
        let many = (0..<260).map { ShareDevice(userID: UserID("@u\($0):x")!, deviceID: "D", curve25519: "k\($0)") }
        let store = MachineTestStore(machine, initial: ready { $0.sharing[roomID] = share(.loadingFacts) })
        let sorted = many.sorted()
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .success(RoomKeyFacts(devices: many, nowMilliseconds: 0))),
            expecting: ready {
                $0.sharing[roomID] = share(.sending(session: .new, remaining: [Array(sorted[250...])]))
            }, effects: [.sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .new, devices: Array(sorted[..<250])))])
        try store.send(
            .roomKeySent(roomID, round: 1, .success(RoomKeySent(sessionID: "S9", devices: Array(sorted[..<250])))),
            expecting: ready { $0.sharing[roomID] = share(.sending(session: .current("S9"), remaining: [])) },
            effects: [
                .sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .current("S9"), devices: Array(sorted[250...])))
            ])
    }

    @Test(
        "Outdated recipients are queried once a round, by the machine's one keys/query, then the facts are read again")
    func outdatedRecipients() throws {
        let store = MachineTestStore(machine, initial: ready { $0.sharing[roomID] = share(.loadingFacts) })
        try store.send(
            .roomKeyFactsLoaded(
                roomID, round: 1, .success(RoomKeyFacts(devices: [bob1], outdatedUsers: [carol], nowMilliseconds: 0))),
            expecting: ready {
                $0.sharing[roomID] = share(.awaitingQuery([carol]), queried: true)
                $0.querying = [carol]
            }, effects: [.queryKeys([carol])])
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [], unanswered: [carol]))),
            expecting: ready { $0.sharing[roomID] = share(.loadingFacts, queried: true) },
            effects: [.loadRoomKeyFacts(room, round: 1)])
        // Carol's server could not answer: she stays outdated, and the round goes on without
        // asking again.
        try store.send(
            .roomKeyFactsLoaded(
                roomID, round: 1, .success(RoomKeyFacts(devices: [bob1], outdatedUsers: [carol], nowMilliseconds: 0))),
            expecting: ready { $0.sharing[roomID] = share(.sending(session: .new, remaining: []), queried: true) },
            effects: [.sendRoomKey(roomID, round: 1, RoomKeyBatch(session: .new, devices: [bob1]))])
    }

    @Test("A round waits for a query already running for its users instead of starting another")
    func waitsForRunningQuery() throws {
        let store = MachineTestStore(
            machine,
            initial: ready {
                $0.sharing[roomID] = share(.loadingFacts)
                $0.querying = [carol]
            })
        try store.send(
            .roomKeyFactsLoaded(
                roomID, round: 1, .success(RoomKeyFacts(devices: [], outdatedUsers: [carol], nowMilliseconds: 0))),
            expecting: ready {
                $0.sharing[roomID] = share(.awaitingQuery([carol]), queried: true)
                $0.querying = [carol]
            })
        try store.send(
            .keysQueried(.success(KeyQueryReport(users: [carol]))),
            expecting: ready { $0.sharing[roomID] = share(.loadingFacts, queried: true) },
            effects: [.loadRoomKeyFacts(room, round: 1)])
    }

    @Test("A retryable query failure ends the rounds waiting for it (the send queue retries) and backs off")
    func queryFailureEndsRound() throws {
        let store = MachineTestStore(
            machine,
            initial: ready {
                $0.sharing[roomID] = share(.awaitingQuery([carol]), queried: true)
                $0.querying = [carol]
            })
        var jitter = JitterSource(seed: 3)
        let delay = jitter.delay(attempt: 1, backoff: .crypto, retryAfter: nil)
        var work = CryptoWork(
            maxOneTimeKeys: 100, serverOneTimeKeyCount: 50, outdated: [carol], failures: 1, jitter: jitter)
        work.shareOutcomes[ShareTicket(1)] = .failed(.network)
        try store.send(
            .keysQueried(.failure(.network)), expecting: .backingOff(work), effects: [.scheduleRetry(after: delay)])
        // While backing off a send is refused: the caller hears it at once.
        try store.assertIgnored(.roomKeyNeeded(room, ShareTicket(2)))
    }

    @Test("A request for a room whose round runs joins the next round, which starts when this one ends")
    func concurrentRequests() throws {
        let store = MachineTestStore(
            machine,
            initial: ready {
                $0.sharing[roomID] = share(.sending(session: .new, remaining: []))
                $0.nextShareRound = 2
            })
        var moved = room
        moved.joined = [alice, bob]
        try store.send(
            .roomKeyNeeded(moved, ShareTicket(2)),
            expecting: ready {
                var running = share(.sending(session: .new, remaining: []))
                running.room = moved
                running.nextTickets = [ShareTicket(2)]
                $0.sharing[roomID] = running
                $0.nextShareRound = 2
            })
        try store.send(
            .roomKeySent(roomID, round: 1, .success(RoomKeySent(sessionID: "S1", devices: []))),
            expecting: ready {
                $0.shareOutcomes[ShareTicket(1)] = .shared(sessionID: "S1")
                $0.sharing[roomID] = RoomKeyShare(room: moved, round: 2, step: .loadingFacts, tickets: [ShareTicket(2)])
                $0.nextShareRound = 3
            }, effects: [.loadRoomKeyFacts(moved, round: 2)])
        // A late answer of the first round is stale.
        try store.send(
            .roomKeySent(roomID, round: 1, .success(RoomKeySent(sessionID: "S1", devices: []))), stayingWith: [])
    }

    @Test("Failures end the round with a typed outcome: claim, send, and a busy store (retryable)")
    func failures() throws {
        let store = MachineTestStore(
            machine,
            initial: ready {
                $0.sharing[roomID] = share(.claiming(session: .new, recipients: [bob1], claiming: [bob1]))
            })
        try store.send(
            .oneTimeKeysClaimed(roomID, round: 1, .failure(.server(status: 502))),
            expecting: ready { $0.shareOutcomes[ShareTicket(1)] = .failed(.server(status: 502)) })
        store.reset(to: ready { $0.sharing[roomID] = share(.sending(session: .new, remaining: [[carol1]])) })
        try store.send(
            .roomKeySent(roomID, round: 1, .failure(.rejected(status: 403, errorCode: "M_FORBIDDEN"))),
            expecting: ready {
                $0.shareOutcomes[ShareTicket(1)] = .failed(.rejected(status: 403, errorCode: "M_FORBIDDEN"))
            })
        store.reset(to: ready { $0.sharing[roomID] = share(.loadingFacts) })
        try store.send(
            .roomKeyFactsLoaded(roomID, round: 1, .failure(.store(.busy))),
            expecting: ready { $0.shareOutcomes[ShareTicket(1)] = .failed(.storeUnavailable(.busy)) })
    }

    @Test("No key is shared before the device's keys are published; stopping cancels the rounds in progress")
    func notReadyAndStop() throws {
        let store = MachineTestStore(
            machine,
            initial: .publishing(CryptoWork(maxOneTimeKeys: 100, isUploading: true, jitter: JitterSource(seed: 3))))
        try store.assertIgnored(.roomKeyNeeded(room, ShareTicket(1)))
        store.reset(
            to: ready {
                $0.sharing[roomID] = share(.loadingFacts, round: 7)
            })
        let transition = store.step(.stopped)
        guard case .move(to: .idle, let effects) = transition else {
            throw TestFailure("not stopped: \(transition)")
        }
        #expect(effects.contains(.cancel(CryptoMachine.shareKey(7))))
        #expect(CryptoMachine.Effect.loadRoomKeyFacts(room, round: 7).directive == .keyed(CryptoMachine.shareKey(7)))
    }
}
