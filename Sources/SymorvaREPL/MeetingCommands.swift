import SymorvaKit
import SymorvaMachines
import SymorvaRuntime

/// The REPL's current meeting: the room joined by `meeting join`, and what prints its live lines.
package enum REPLMeetingKey: REPLStateKey {
    /// What the slot holds.
    package typealias Value = REPLMeeting
}

/// The meeting the REPL is in, with the subscriptions that print its changes.
package final class REPLMeeting: Sendable {
    /// The meeting.
    package let room: MeetingRoom
    private let stops: Lock<[@Sendable () -> Void]>

    init(room: MeetingRoom, output: any REPLOutput) {
        self.room = room
        let printer = MeetingPrinter(output: output, member: room.member)
        let people = room.participants.subscribe { printer.show($0) }
        let role = room.role.subscribe { printer.show(role: $0.kind) }
        let state = room.state.subscribe { printer.show(state: $0) }
        stops = Lock([people, role, state])
    }

    /// Stops printing.
    func close() {
        let all = stops.withLock { stops in
            defer { stops = [] }
            return stops
        }
        for stop in all { stop() }
    }
}

/// Prints a line for each change of roles and hands (not the first listing), of the member's
/// own role, and of the meeting's end.
private final class MeetingPrinter: Sendable {
    private let output: any REPLOutput
    private let member: UserID
    private let last = Lock<(people: [UserID: MeetingParticipant]?, role: ParticipantRole?, final: Bool)>(
        (nil, nil, false))

    init(output: any REPLOutput, member: UserID) {
        self.output = output
        self.member = member
    }

    func show(_ participants: [MeetingParticipant]) {
        let now = Dictionary(participants.map { ($0.userID, $0) }, uniquingKeysWith: { $1 })
        let lines = last.withLock { last -> [String] in
            defer { last.people = now }
            guard let before = last.people else { return [] }
            var lines: [String] = []
            for person in participants {
                switch before[person.userID] {
                case nil: lines.append("meeting: \(person.userID) joined as \(person.role.rawValue)")
                case let old?:
                    if old.role != person.role {
                        lines.append("meeting: \(person.userID) is now \(person.role.rawValue)")
                    }
                    if old.handRaised != person.handRaised {
                        lines.append("meeting: \(person.userID) hand \(person.handRaised ? "up" : "down")")
                    }
                }
            }
            for id in before.keys.sorted() where now[id] == nil { lines.append("meeting: \(id) left") }
            return lines
        }
        for line in lines { output.print(line) }
    }

    func show(role: ParticipantRole) {
        let changed = last.withLock { last -> Bool in
            defer { last.role = role }
            return last.role != nil && last.role != role
        }
        if changed { output.print("meeting: you are now \(role == .stage ? "on stage" : "a listener")") }
    }

    func show(state: MeetingMachine.State) {
        let line: String?
        switch state {
        case .ended: line = "meeting: ended"
        case .left(.removed): line = "meeting: you are no longer in the meeting"
        case .failed(let error): line = "meeting: \(MeetingCommands.message(for: error))"
        default: line = nil
        }
        guard let line else { return }
        let first = last.withLock { last -> Bool in
            defer { last.final = true }
            return !last.final
        }
        if first { output.print(line) }
    }
}

/// The `meeting` command group: join, hand, mic, promote, demote, who, leave, end.
package enum MeetingCommands {
    /// The commands to register: the `meeting` group.
    package static var commands: [REPLCommand] { [meeting] }

    /// `meeting join|hand|promote|demote|who|leave|end`.
    package static let meeting = REPLCommand.group(
        "meeting", summary: "meetings of the signed-in member's rooms",
        details: "Roles and hands print live lines while a meeting is joined.",
        subcommands: [join, hand, mic, promote, demote, who, leave, end])

    /// What `meeting join` was asked for.
    struct JoinRequest: Sendable, Equatable {
        var room: String
        var broadcast = false
        /// The test tone's frequency in hertz, instead of the microphone.
        var tone: Int?
    }

    /// `meeting join <room> [--broadcast] [--tone <hz>]`.
    package static let join = REPLCommand(
        "join", usage: "meeting join <room> [--broadcast] [--tone <hz>]",
        summary: "join (or open) the meeting of a room; prints the admitted role",
        details: """
            On stage the microphone is the machine's capture device; --tone <hz> sends a sine tone
            of that frequency (20…20000 Hz) instead, so the stage can be heard from a machine
            without a microphone ('meeting mic on' turns it on).
            """,
        parse: { arguments throws(REPLError) in
            var request = JoinRequest(room: try arguments.next())
            while let flag = arguments.optional() {
                switch flag {
                case "--broadcast" where !request.broadcast: request.broadcast = true
                case "--tone" where request.tone == nil: request.tone = try arguments.nextInteger(in: 20...20_000)
                default: throw arguments.usageError
                }
            }
            return request
        },
        run: { request, context async throws(REPLError) in
            let community = try await CommunitySlot.community(in: context)
            let roomID = try ChatCommands.resolveRoom(request.room, context)
            var engine: (any MediaEngine)?
            if let tone = request.tone {
                engine = AccountModuleFactory.toneMediaEngine(
                    frequency: tone, transport: community.environment.transport, tracer: context.tracer)
                guard engine != nil else { throw .commandFailed("no test tone on this platform's media engine") }
            }
            context[REPLMeetingKey.self]?.close()
            let room = try await perform { () async throws(MeetingError) in
                try await community.meetings.join(roomID: roomID, broadcast: request.broadcast, mediaEngine: engine)
            }
            context[REPLMeetingKey.self] = REPLMeeting(room: room, output: context.output)
            switch room.role.value {
            case .stage(let session):
                let voice =
                    request.tone.map { ", a \($0) Hz test tone for a microphone: 'meeting mic on' sends it" } ?? ""
                let mediaRoom =
                    if case .stage(_, let descriptor) = room.state.value { "media room \(descriptor.room)" } else {
                        "media room"
                    }
                context.output.print("joined \(room.meetingID) on stage (\(mediaRoom)\(voice))")
                do throws(MeetingError) { try await session.connect() } catch {
                    context.output.print("media: \(message(for: error))")
                }
            case .listener(let playback):
                playback.play()
                context.output.print("joined \(room.meetingID) as a listener (playback stream started)")
            }
        })

    /// `meeting hand up|down`.
    package static let hand = REPLCommand(
        "hand", usage: "meeting hand up|down", summary: "raise or lower your hand (a signal to the hosts)",
        parse: { arguments throws(REPLError) in
            switch try arguments.next() {
            case "up": true
            case "down": false
            default: throw arguments.usageError
            }
        },
        run: { raised, context async throws(REPLError) in
            let room = try current(context)
            try await perform { () async throws(MeetingError) in
                if raised { try await room.raiseHand() } else { try await room.lowerHand() }
            }
            context.output.print("hand \(raised ? "up" : "down")")
        })

    /// `meeting mic on|off`.
    package static let mic = REPLCommand(
        "mic", usage: "meeting mic on|off", summary: "stage: turn your microphone on or off (off shows you muted)",
        parse: { arguments throws(REPLError) in
            switch try arguments.next() {
            case "on": true
            case "off": false
            default: throw arguments.usageError
            }
        },
        run: { enabled, context async throws(REPLError) in
            let room = try current(context)
            guard case .stage(let session) = room.role.value else {
                throw .commandFailed(message(for: .wrongRole))
            }
            try await perform { () async throws(MeetingError) in try await session.setMicrophoneEnabled(enabled) }
            context.output.print("microphone \(enabled ? "on" : "off")")
        })

    /// `meeting promote <@user>`.
    package static let promote = REPLCommand(
        "promote", usage: "meeting promote <@user>", summary: "hosts: move a listener to the stage",
        parse: { arguments throws(REPLError) in try member(try arguments.next()) },
        run: { target, context async throws(REPLError) in
            let room = try current(context)
            try await perform { () async throws(MeetingError) in try await room.promote(target) }
            context.output.print("promoted \(target)")
        })

    /// `meeting demote <@user>`.
    package static let demote = REPLCommand(
        "demote", usage: "meeting demote <@user>", summary: "hosts: move a stage member back to listener",
        parse: { arguments throws(REPLError) in try member(try arguments.next()) },
        run: { target, context async throws(REPLError) in
            let room = try current(context)
            try await perform { () async throws(MeetingError) in try await room.demote(target) }
            context.output.print("demoted \(target)")
        })

    /// `meeting who`.
    package static let who = REPLCommand(
        "who", usage: "meeting who", summary: "list the participants, their roles and hands",
        run: { context async throws(REPLError) in
            let room = try current(context)
            let people = room.participants.value
            if people.isEmpty { context.output.print("nobody") }
            context.output.printColumns(
                people.map { ($0.userID.rawValue, $0.role.rawValue + ($0.handRaised ? "  hand up" : "")) })
        })

    /// `meeting leave`.
    package static let leave = REPLCommand(
        "leave", usage: "meeting leave", summary: "leave the meeting",
        run: { context async throws(REPLError) in
            let room = try current(context)
            context[REPLMeetingKey.self]?.close()
            context[REPLMeetingKey.self] = nil
            try await perform { () async throws(MeetingError) in try await room.leave() }
            context.output.print("left \(room.meetingID)")
        })

    /// `meeting end`.
    package static let end = REPLCommand(
        "end", usage: "meeting end", summary: "hosts: end the meeting for everyone",
        run: { context async throws(REPLError) in
            let room = try current(context)
            try await perform { () async throws(MeetingError) in try await room.end() }
            context[REPLMeetingKey.self]?.close()
            context[REPLMeetingKey.self] = nil
            context.output.print("ended \(room.meetingID)")
        })

    // MARK: Helpers

    private static func current(_ context: REPLContext) throws(REPLError) -> MeetingRoom {
        guard let meeting = context[REPLMeetingKey.self], !meeting.room.isFinished else {
            throw .commandFailed("not in a meeting (meeting join <room>)")
        }
        return meeting.room
    }

    private static func member(_ word: String) throws(REPLError) -> UserID {
        guard let id = UserID(word) else { throw .invalidArgument("'\(word)' is not a Matrix user ID (@name:server)") }
        return id
    }

    private static func perform<T>(_ body: () async throws(MeetingError) -> T) async throws(REPLError) -> T {
        do throws(MeetingError) {
            return try await body()
        } catch {
            throw .commandFailed(message(for: error))
        }
    }

    /// A meeting failure as the member reads it.
    package static func message(for error: MeetingError) -> String {
        switch error {
        case .notRoomMember: "you are not a member of that room"
        case .notHost: "only hosts can do that"
        case .meetingUnknown: "no such meeting"
        case .roomUnknown: "no such room"
        case .meetingEnded: "the meeting has ended"
        case .notParticipant: "not in the meeting"
        case .stageFull: "the stage is full"
        case .wrongRole: "not possible in that role"
        case .mediaUnavailable: "media unavailable (the media server failed, or no real-time media engine here)"
        case .homeserverUnavailable: "the services could not reach the homeserver"
        case .rateLimited: "rate limited; try again shortly"
        case .transport: "the services could not be reached"
        case .invalidResponse: "the services answered something unexpected"
        case .refused(let code, _): "refused (\(code))"
        case .notSignedIn: "not signed in"
        case .accountEnded: "that account is no longer active"
        case .moduleDisabled: "the meetings module is disabled in this community"
        case .media(.unauthorized): "the media server refused the stage token (revoked)"
        case .media(.engine(.missingComponent(.captureDevice))):
            "no audio capture device (microphone) here: join with a test tone instead (meeting join <room> --tone 440)"
        case .media(.engine(.missingComponent(let component))): "the media engine cannot start: \(component)"
        case .media(.engine(let failure)): "the media engine failed: \(failure)"
        case .media: "the media connection failed"
        }
    }
}
