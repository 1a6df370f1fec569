import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

enum PusherFixture {
    static func pusher(_ key: String) -> Pusher {
        Pusher(
            pushkey: key, appID: "org.symorva.ios.dev", appDisplayName: "Symorva", deviceDisplayName: "Phone",
            profileTag: "abcdefgh12345678", gatewayURL: "http://127.0.0.1:9/_matrix/push/v1/notify")
    }
    static let a = pusher("key-a")
    static let b = pusher("key-b")

    static let sampleStates: [PusherMachine.State] = [
        .unregistered, .registering(a), .registered(a), .removing(a), .failed(a, .transport(.timeout)),
    ]
    static let sampleEvents: [PusherMachine.Event] = [
        .setRequested(a), .setRequested(b), .setAnswered(.success(a)), .setAnswered(.success(b)),
        .setAnswered(.failure(.forbidden)), .removeRequested, .removeAnswered(.success(a)),
        .removeAnswered(.failure(.notFound)), .removeAnswered(.failure(.transport(.timeout))), .adopted(a),
    ]
}

@Suite("Pusher machine")
struct PusherMachineTests {
    @Test("Set, then remove")
    func setThenRemove() throws {
        let store = MachineTestStore(PusherMachine(), initial: .unregistered)
        try store.send(
            .setRequested(PusherFixture.a), expecting: .registering(PusherFixture.a),
            effects: [.setPusher(PusherFixture.a)])
        try store.send(.setAnswered(.success(PusherFixture.a)), expecting: .registered(PusherFixture.a))
        try store.send(.setRequested(PusherFixture.a), stayingWith: [])
        try store.send(
            .removeRequested, expecting: .removing(PusherFixture.a), effects: [.removePusher(PusherFixture.a)])
        try store.send(.removeAnswered(.success(PusherFixture.a)), expecting: .unregistered)
        try store.assertIgnored([.removeRequested, .setAnswered(.success(PusherFixture.a))])
    }

    @Test("A new pusher replaces a set in flight; the old answer is dropped")
    func replaced() throws {
        let store = MachineTestStore(PusherMachine(), initial: .registering(PusherFixture.a))
        try store.send(
            .setRequested(PusherFixture.b), expecting: .registering(PusherFixture.b),
            effects: [.setPusher(PusherFixture.b)])
        try store.send(.setAnswered(.success(PusherFixture.a)), stayingWith: [])
        try store.send(.setAnswered(.success(PusherFixture.b)), expecting: .registered(PusherFixture.b))
    }

    @Test("Failures are kept with their pusher; a pusher already gone counts as removed")
    func failures() throws {
        let store = MachineTestStore(PusherMachine(), initial: .registering(PusherFixture.a))
        try store.send(.setAnswered(.failure(.forbidden)), expecting: .failed(PusherFixture.a, .forbidden))
        try store.send(
            .removeRequested, expecting: .removing(PusherFixture.a), effects: [.removePusher(PusherFixture.a)])
        try store.send(
            .removeAnswered(.failure(.transport(.timeout))),
            expecting: .failed(PusherFixture.a, .transport(.timeout)))
        try store.send(
            .removeRequested, expecting: .removing(PusherFixture.a), effects: [.removePusher(PusherFixture.a)])
        try store.send(.removeAnswered(.failure(.notFound)), expecting: .unregistered)
    }

    @Test("The installation's pusher found at sign-in is adopted, unless the app acted first")
    func adopted() throws {
        let store = MachineTestStore(PusherMachine(), initial: .unregistered)
        try store.send(.adopted(PusherFixture.a), expecting: .registered(PusherFixture.a))
        store.reset(to: .registering(PusherFixture.b))
        try store.assertIgnored(.adopted(PusherFixture.a))
    }

    @Test("A pusher never prints its pushkey")
    func redaction() {
        #expect(!String(describing: PusherFixture.pusher("canary-key")).contains("canary"))
        #expect(
            !String(describing: PusherMachine.Effect.setPusher(PusherFixture.pusher("canary-key"))).contains("canary"))
    }
}
