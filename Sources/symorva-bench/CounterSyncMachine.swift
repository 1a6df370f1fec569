import SymorvaRuntime

/// The runtime benchmark's machine: a counter that pushes its total to a server.
///
/// Small but not empty, in the shape of the SDK's feature machines: an enum state whose cases
/// carry data, six events (requests and their completions in pairs), one keyed effect, and a
/// total `switch` with moves, stays and ignored events.
struct CounterSyncMachine: StateMachine {
    static let name = "CounterSync"

    /// What has been counted, and what the server has not seen yet.
    struct Tally: Sendable, Equatable {
        /// The running total.
        var total: Int
        /// Changes since the last push started.
        var unsynced: Int
        /// When the last completed push was requested (the round-trip probe reads it).
        var lastSync: Duration?
    }

    enum State: Sendable, Equatable, CaseNamed {
        /// Nothing counted yet.
        case idle
        /// Counting.
        case counting(Tally)
        /// Counting is paused: changes are ignored until resumed.
        case paused(Tally)
        /// A push is in flight; counting goes on.
        case syncing(Tally, requestedAt: Duration)

        /// A `switch` instead of the reflective default: traces name every state, and reflection
        /// costs microseconds per name.
        var caseNameLiteral: StaticString? {
            switch self {
            case .idle: "idle"
            case .counting: "counting"
            case .paused: "paused"
            case .syncing: "syncing"
            }
        }

        /// The running total in any state.
        var total: Int {
            switch self {
            case .idle: 0
            case .counting(let tally), .paused(let tally), .syncing(let tally, _): tally.total
            }
        }
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// The count went up.
        case increment(by: Int)
        /// The count went down; more than the total is refused (stay).
        case decrement(by: Int)
        /// The member paused counting.
        case pause
        /// The member resumed counting.
        case resume
        /// Time to push the total (a timer or the member asked).
        case syncRequested(at: Duration)
        /// The server acknowledged the push requested at `requestedAt`.
        case syncCompleted(total: Int, requestedAt: Duration)

        var caseNameLiteral: StaticString? {
            switch self {
            case .increment: "increment"
            case .decrement: "decrement"
            case .pause: "pause"
            case .resume: "resume"
            case .syncRequested: "syncRequested"
            case .syncCompleted: "syncCompleted"
            }
        }
    }

    enum Effect: MachineEffect, Equatable {
        /// Sends the total to the server; one push at a time.
        case push(total: Int, requestedAt: Duration)

        static let pushKey = EffectKey("counter.push")
        var caseNameLiteral: StaticString? { "push" }
        var directive: EffectDirective { .keyed(Self.pushKey) }
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle:
            switch event {
            case .increment(let amount): return .move(to: .counting(Tally(total: amount, unsynced: 1)))
            case .pause: return .move(to: .paused(Tally(total: 0, unsynced: 0)))
            case .decrement, .resume, .syncRequested, .syncCompleted: return .ignored
            }
        case .counting(var tally):
            switch event {
            case .increment(let amount):
                tally.total &+= amount
                tally.unsynced &+= 1
                return .move(to: .counting(tally))
            case .decrement(let amount):
                guard amount <= tally.total else { return .stay }
                tally.total -= amount
                tally.unsynced &+= 1
                return .move(to: .counting(tally))
            case .pause:
                return .move(to: .paused(tally))
            case .syncRequested(let at):
                guard tally.unsynced > 0 else { return .stay }
                tally.unsynced = 0
                return .move(
                    to: .syncing(tally, requestedAt: at), effects: [.push(total: tally.total, requestedAt: at)])
            case .resume, .syncCompleted:
                return .ignored
            }
        case .paused(let tally):
            switch event {
            case .resume: return .move(to: .counting(tally))
            case .increment, .decrement, .pause, .syncRequested, .syncCompleted: return .ignored
            }
        case .syncing(var tally, let requestedAt):
            switch event {
            case .increment(let amount):
                tally.total &+= amount
                tally.unsynced &+= 1
                return .move(to: .syncing(tally, requestedAt: requestedAt))
            case .decrement(let amount):
                guard amount <= tally.total else { return .stay }
                tally.total -= amount
                tally.unsynced &+= 1
                return .move(to: .syncing(tally, requestedAt: requestedAt))
            case .syncCompleted(_, let acknowledged):
                guard acknowledged == requestedAt else { return .ignored }
                tally.lastSync = acknowledged
                return .move(to: .counting(tally))
            case .pause, .resume, .syncRequested:
                return .ignored
            }
        }
    }

    /// The throughput mix, repeated: 16 events, of which 13 move, 1 stays (a refused
    /// decrement) and 2 are ignored (a change while paused, a resume while counting). No
    /// effects: the mailbox, not effect tasks, is measured.
    static let throughputCycle: [Event] = [
        .increment(by: 1), .increment(by: 2), .increment(by: 3), .decrement(by: 1),
        .increment(by: 1), .increment(by: 5), .pause, .increment(by: 1),
        .resume, .increment(by: 2), .increment(by: 1), .decrement(by: 1 << 40),
        .increment(by: 4), .resume, .increment(by: 1), .decrement(by: 2),
    ]

    /// `count` events of ``throughputCycle``.
    static func throughputEvents(count: Int) -> [Event] {
        (0..<count).map { throughputCycle[$0 % throughputCycle.count] }
    }
}
