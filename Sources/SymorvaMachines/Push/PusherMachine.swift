import SymorvaRuntime

/// The pusher of one account on this installation, from set to removed.
///
/// ```
/// unregistered ─setRequested→ registering ─setAnswered→ registered ─removeRequested→ removing ─removeAnswered→ unregistered
///                                  └──────────failure────→ failed ←──────failure─────────┘
/// ```
///
/// One request at a time: a new ``Event/setRequested(_:)`` replaces a set in flight (its
/// request is cancelled), a removal cancels a set in flight, and an answer is applied only in
/// the state that asked for it. Setting the pusher that is already registered starts nothing.
package struct PusherMachine: StateMachine {
    package static let name = "Pusher"

    /// A machine.
    package init() {}

    /// Keys of the machine's cancellable effects.
    package enum Keys {
        /// The set or remove request in flight.
        package static let request = EffectKey("push.request.pusher")
    }

    /// The machine state: ``PusherState`` (public: an app observes it).
    package typealias State = PusherState

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNamed, CustomStringConvertible {
        /// The app asked for this pusher.
        case setRequested(Pusher)
        /// The homeserver answered the set request.
        case setAnswered(Result<Pusher, PushError>)
        /// The app asked to remove the pusher (or the account signs out).
        case removeRequested
        /// The homeserver answered the remove request.
        case removeAnswered(Result<Pusher, PushError>)
        /// At sign-in the homeserver already had this installation's pusher (same profile tag).
        case adopted(Pusher)

        /// Every event case name, in declaration order: the chart's event names.
        package static let caseNames = ["setRequested", "setAnswered", "removeRequested", "removeAnswered", "adopted"]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .setRequested: "setRequested"
            case .setAnswered: "setAnswered"
            case .removeRequested: "removeRequested"
            case .removeAnswered: "removeAnswered"
            case .adopted: "adopted"
            }
        }

        /// The case name only: a pusher carries a device token.
        package var description: String { caseName }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable, CustomStringConvertible {
        /// `POST /pushers/set` with the pusher; answers ``Event/setAnswered(_:)``.
        case setPusher(Pusher)
        /// `POST /pushers/set` with `kind: null`; answers ``Event/removeAnswered(_:)``.
        case removePusher(Pusher)

        package var directive: EffectDirective { .keyed(Keys.request) }

        /// Every effect case name, in declaration order.
        package static let caseNames = ["setPusher", "removePusher"]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .setPusher: "setPusher"
            case .removePusher: "removePusher"
            }
        }

        /// The case name only: a pusher carries a device token.
        package var description: String { caseName }
    }

    /// Every state case name: the chart checker compares these with its samples and the chart.
    package static var stateCaseNames: [String] { State.caseNames }
    /// Every event case name: the chart checker compares these with its samples and the chart.
    package static var eventCaseNames: [String] { Event.caseNames }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.registered(let current), .setRequested(let pusher)) where current == pusher:
            return .stay
        case (.registering(let current), .setRequested(let pusher)) where current == pusher:
            return .stay
        case (.removing, .setRequested(let pusher)), (.unregistered, .setRequested(let pusher)),
            (.registering, .setRequested(let pusher)), (.registered, .setRequested(let pusher)),
            (.failed, .setRequested(let pusher)):
            // A new set replaces whatever request runs under the key (keyed effect).
            return .move(to: .registering(pusher), effects: [.setPusher(pusher)])

        case (.registering(let asked), .setAnswered(.success(let pusher))) where asked == pusher:
            return .move(to: .registered(pusher))
        case (.registering(let asked), .setAnswered(.failure(let error))):
            return .move(to: .failed(asked, error))
        case (.registering, .setAnswered(.success)):
            return .stay  // an answer for another pusher than the one asked for now: dropped

        case (.registering(let pusher), .removeRequested), (.registered(let pusher), .removeRequested),
            (.failed(let pusher, _), .removeRequested):
            return .move(to: .removing(pusher), effects: [.removePusher(pusher)])

        case (.removing, .removeAnswered(.success)):
            return .move(to: .unregistered)
        case (.removing, .removeAnswered(.failure(.notFound))):
            return .move(to: .unregistered)  // already gone: what was asked for
        case (.removing(let pusher), .removeAnswered(.failure(let error))):
            return .move(to: .failed(pusher, error))

        case (.unregistered, .adopted(let pusher)):
            return .move(to: .registered(pusher))

        case (.registering, .adopted), (.registered, .adopted), (.removing, .adopted), (.failed, .adopted):
            return .ignored  // the app has acted since: its request decides
        case (.unregistered, .setAnswered), (.unregistered, .removeRequested), (.unregistered, .removeAnswered),
            (.registering, .removeAnswered), (.registered, .setAnswered), (.registered, .removeAnswered),
            (.removing, .setAnswered), (.removing, .removeRequested), (.failed, .setAnswered),
            (.failed, .removeAnswered):
            return .ignored
        }
    }
}

/// Where the account's pusher is: what an app observes (`PushClient.pusherState`).
///
/// The state of the SDK's pusher machine; the machine, its events and its effects are internal
/// to the SDK (`package`).
public enum PusherState: Sendable, Equatable, CaseNamed {
    /// No pusher set by this installation (or it was removed).
    case unregistered
    /// The homeserver is setting this pusher.
    case registering(Pusher)
    /// The homeserver pushes to this pusher.
    case registered(Pusher)
    /// The homeserver is removing this pusher.
    case removing(Pusher)
    /// The last set or remove failed; `pusher` is the one it was for.
    case failed(Pusher, PushError)

    /// Every state case name, in declaration order: the chart's state ids.
    public static let caseNames = ["unregistered", "registering", "registered", "removing", "failed"]

    public var caseNameLiteral: StaticString? {
        switch self {
        case .unregistered: "unregistered"
        case .registering: "registering"
        case .registered: "registered"
        case .removing: "removing"
        case .failed: "failed"
        }
    }

    /// The pusher this state is about, if any.
    public var pusher: Pusher? {
        switch self {
        case .unregistered: nil
        case .registering(let pusher), .registered(let pusher), .removing(let pusher), .failed(let pusher, _):
            pusher
        }
    }
}

extension PusherMachine: ChartedMachine {}

extension PusherState: CaseNameListing {
    public static var allCaseNames: [String] { caseNames }
}

extension PusherMachine.Event: CaseNameListing {
    package static var allCaseNames: [String] { caseNames }
}
