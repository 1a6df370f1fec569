import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Joining, roles, hands, promotion and demotion, the feed and its reconnection, leaving.
/// Each test is one scenario: state, event, whole next state, whole effect list.
@Suite("Meeting machine")
struct MeetingMachineTests {
    typealias F = MeetingFixture
    let machine = MeetingFixture.machine
    let stopAll: [MeetingMachine.Effect] = [
        .cancel(MeetingMachine.Keys.feed), .cancel(MeetingMachine.Keys.feedRetry),
        .cancel(MeetingMachine.Keys.media), .cancel(MeetingMachine.Keys.mediaTimer),
    ]

    // MARK: Joining

    @Test("A join request goes to the services")
    func joinRequested() throws {
        let store = MachineTestStore(machine, initial: .idle)
        try store.send(
            .joinRequested(F.room, broadcast: true), expecting: .joining(roomID: F.room, broadcast: true),
            effects: [.sendJoin(F.room, broadcast: true)])
    }

    @Test("Admitted to the stage: the feed starts from the join's cursor and the token's renewal is armed")
    func admittedToStage() throws {
        let store = MachineTestStore(machine, initial: .joining(roomID: F.room, broadcast: false))
        try store.send(
            .joinResponse(.success(F.answer(.stage(F.descriptor())))),
            expecting: .stage(F.joined(.stage), F.descriptor()),
            effects: [.pollFeed(F.meetingID, since: 5), .scheduleMediaRenewal(at: F.renewalAt)])
    }

    @Test("Admitted as a listener: the feed starts, no media")
    func admittedAsListener() throws {
        let store = MachineTestStore(machine, initial: .joining(roomID: F.room, broadcast: false))
        try store.send(
            .joinResponse(.success(F.answer(.listener(F.playback)))),
            expecting: .listener(F.joined(.listener)), effects: [.pollFeed(F.meetingID, since: 5)])
    }

    @Test("A refused join fails with the services' reason")
    func joinRefused() throws {
        let store = MachineTestStore(machine, initial: .joining(roomID: F.room, broadcast: false))
        try store.send(.joinResponse(.failure(.notRoomMember)), expecting: .failed(.notRoomMember))
    }

    @Test("Leaving while the join is out cancels it")
    func leaveWhileJoining() throws {
        let store = MachineTestStore(machine, initial: .joining(roomID: F.room, broadcast: false))
        try store.send(.leaveRequested, expecting: .left(.requested), effects: [.cancel(MeetingMachine.Keys.join)])
    }

    // MARK: Hands

    @Test("A listener's raised hand (the services' answer) is handRaised, and nothing else")
    func handRaised() throws {
        let store = MachineTestStore(machine, initial: .listener(F.joined(.listener)))
        let raised = F.snapshot(.listener, hand: true, cursor: 6)
        try store.send(
            .snapshotReceived(raised),
            expecting: .handRaised(JoinedMeeting(userID: F.me, snapshot: raised, playback: F.playback)))
    }

    @Test("The feed lowering the hand returns to listener and polls on")
    func handLoweredByFeed() throws {
        let store = MachineTestStore(machine, initial: .handRaised(F.joined(.listener, hand: true)))
        try store.send(
            .feedResponse(.success(F.batch(.listener, cursor: 8))),
            expecting: .listener(F.joined(.listener, cursor: 8)),
            effects: [.pollFeed(F.meetingID, since: 8)])
    }

    @Test("An answer older than what the member knows changes nothing")
    func staleSnapshot() throws {
        let store = MachineTestStore(machine, initial: .listener(F.joined(.listener, cursor: 5)))
        try store.send(.snapshotReceived(F.snapshot(.stage, cursor: 4)), stayingWith: [])
    }

    // MARK: Promotion

    @Test("Promoted by a host: the member asks for its own descriptor, then is on stage")
    func promotion() throws {
        let store = MachineTestStore(machine, initial: .handRaised(F.joined(.listener, hand: true)))
        try store.send(
            .feedResponse(.success(F.batch(.stage, cursor: 9))), expecting: .promoting(F.joined(.stage, cursor: 9)),
            effects: [.pollFeed(F.meetingID, since: 9), .requestMediaSession(F.meetingID)])
        try store.send(
            .mediaSessionResponse(.success(F.descriptor(participant: 8))),
            expecting: .stage(F.joined(.stage, cursor: 9), F.descriptor(participant: 8)),
            effects: [.scheduleMediaRenewal(at: F.renewalAt)])
    }

    @Test("A lost descriptor request is asked again after a backoff")
    func promotionRetry() throws {
        let store = MachineTestStore(machine, initial: .promoting(F.joined(.stage)))
        try store.send(
            .mediaSessionResponse(.failure(.transport(.timeout))),
            stayingWith: [.scheduleMediaRetry(after: .seconds(1))])
        try store.send(.timerFired(.mediaRequest), stayingWith: [.requestMediaSession(F.meetingID)])
    }

    @Test("A refused descriptor (not on stage after all) listens")
    func promotionRefused() throws {
        let store = MachineTestStore(machine, initial: .promoting(F.joined(.stage)))
        try store.send(.mediaSessionResponse(.failure(.wrongRole)), expecting: .listener(F.joined(.stage)))
    }

    @Test("Demoted again before the descriptor came: the request is cancelled")
    func promotionUndone() throws {
        let store = MachineTestStore(machine, initial: .promoting(F.joined(.stage)))
        try store.send(
            .feedResponse(.success(F.batch(.listener))), expecting: .listener(F.joined(.listener, cursor: 6)),
            effects: [
                .pollFeed(F.meetingID, since: 6), .cancel(MeetingMachine.Keys.media),
                .cancel(MeetingMachine.Keys.mediaTimer),
            ])
    }

    // MARK: Demotion

    @Test("Demoted by a host: the media session closes before the member listens")
    func demotion() throws {
        let store = MachineTestStore(machine, initial: .stage(F.joined(.stage), F.descriptor()))
        try store.send(
            .feedResponse(.success(F.batch(.listener))), expecting: .demoting(F.joined(.listener, cursor: 6)),
            effects: [
                .pollFeed(F.meetingID, since: 6), .cancel(MeetingMachine.Keys.media),
                .cancel(MeetingMachine.Keys.mediaTimer), .closeMediaSession,
            ])
        try store.send(.mediaSessionClosed, expecting: .listener(F.joined(.listener, cursor: 6)))
    }

    @Test("Promoted again while the old session closed: a fresh descriptor is asked for")
    func repromotedWhileDemoting() throws {
        let store = MachineTestStore(machine, initial: .demoting(F.joined(.stage)))
        try store.send(
            .mediaSessionClosed, expecting: .promoting(F.joined(.stage)), effects: [.requestMediaSession(F.meetingID)])
    }

    // MARK: The stage token

    @Test("The stage token is renewed before it expires")
    func renewal() throws {
        let store = MachineTestStore(machine, initial: .stage(F.joined(.stage), F.descriptor()))
        try store.send(.timerFired(.mediaRequest), stayingWith: [.requestMediaSession(F.meetingID)])
        let later = Timestamp(millisecondsSince1970: F.expiry.millisecondsSince1970 + 3_600_000)
        try store.send(
            .mediaSessionResponse(.success(F.descriptor(participant: 9, expiresAt: later))),
            expecting: .stage(F.joined(.stage), F.descriptor(participant: 9, expiresAt: later)),
            effects: [.scheduleMediaRenewal(at: later.advanced(by: .seconds(-60)))])
    }

    // MARK: The feed

    @Test("A dropped feed keeps the role and reconnects from the same cursor with a growing backoff")
    func feedReconnects() throws {
        let store = MachineTestStore(machine, initial: .listener(F.joined(.listener, cursor: 5)))
        try store.send(
            .feedResponse(.failure(.transport(.connectionReset))),
            expecting: .listener(F.joined(.listener, cursor: 5, feed: .reconnecting(attempt: 1))),
            effects: [.scheduleFeedRetry(after: .seconds(1))])
        try store.send(.timerFired(.feedRetry), stayingWith: [.pollFeed(F.meetingID, since: 5)])
        try store.send(
            .feedResponse(.failure(.transport(.timeout))),
            expecting: .listener(F.joined(.listener, cursor: 5, feed: .reconnecting(attempt: 2))),
            effects: [.scheduleFeedRetry(after: .seconds(2))])
        try store.send(.timerFired(.feedRetry), stayingWith: [.pollFeed(F.meetingID, since: 5)])
        // The changes made while it was away arrive in the first answer.
        try store.send(
            .feedResponse(.success(F.batch(.listener, hand: true, cursor: 9))),
            expecting: .handRaised(F.joined(.listener, hand: true, cursor: 9)),
            effects: [.pollFeed(F.meetingID, since: 9)])
    }

    @Test("The feed saying the meeting ended stops everything, media included")
    func endedByFeed() throws {
        let store = MachineTestStore(machine, initial: .stage(F.joined(.stage), F.descriptor()))
        let ended = MeetingSnapshot(
            meetingID: F.meetingID, roomID: F.room, mode: .open, ended: true, participants: [], cursor: 6)
        try store.send(
            .feedResponse(.success(F.batch(nil, ended: true))), expecting: .ended(ended),
            effects: stopAll + [.closeMediaSession])
    }

    @Test("No longer listed (left the room, removed): the member's part ends")
    func removed() throws {
        let store = MachineTestStore(machine, initial: .listener(F.joined(.listener)))
        try store.send(.feedResponse(.failure(.notRoomMember)), expecting: .left(.removed), effects: stopAll)
    }

    // MARK: Leaving

    @Test("Leaving the stage stops the feed and the media, then tells the services")
    func leaveStage() throws {
        let store = MachineTestStore(machine, initial: .stage(F.joined(.stage), F.descriptor()))
        try store.send(
            .leaveRequested, expecting: .leaving(F.joined(.stage)),
            effects: stopAll + [.closeMediaSession, .sendLeave(F.meetingID)])
        try store.send(.leaveResponse(.left), expecting: .left(.requested))
        try store.assertIgnored(.feedResponse(.success(F.batch(.stage))))
    }

    @Test("A leave the services could not be told of fails; a refusal means already out")
    func leaveOutcomes() throws {
        let store = MachineTestStore(machine, initial: .leaving(F.joined(.listener)))
        try store.send(.leaveResponse(.failed(.transport(.unreachable))), expecting: .failed(.transport(.unreachable)))
        store.reset(to: .leaving(F.joined(.listener)))
        try store.send(.leaveResponse(.failed(.notParticipant)), expecting: .left(.requested))
    }

    @Test("Final states ignore everything")
    func finalStates() throws {
        for state in [MeetingMachine.State.left(.requested), .ended(F.snapshot(nil, ended: true)), .failed(.notHost)] {
            let store = MachineTestStore(machine, initial: state)
            for event in MeetingFixture.sampleEvents { try store.assertIgnored(event) }
        }
    }

    @Test("Events and effects describe themselves by case name only")
    func redaction() {
        let event = MeetingMachine.Event.mediaSessionResponse(.success(F.descriptor()))
        #expect(event.description == "mediaSessionResponse")
        #expect(MeetingMachine.Effect.requestMediaSession(F.meetingID).description == "requestMediaSession")
    }
}
