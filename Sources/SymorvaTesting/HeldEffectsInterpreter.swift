import SymorvaRuntime

/// An ``/SymorvaRuntime/EffectInterpreter`` that holds every effect until the test releases it, then performs
/// it with the interpreter it wraps: the way to run a host's effects in any order the host
/// allows.
///
/// A host starts each effect in its own task, so effects launched by one transition, or by
/// transitions in a row, may run in any order. A test reproduces the order it fears by
/// releasing the held effects one by one; ``release(fileID:line:where:)`` returns when the
/// released effect has been performed (its result then goes back through the host's mailbox).
///
/// ```swift
/// let held = HeldEffectsInterpreter(interpreter)
/// let host = MachineHost(machine: machine, initial: .idle, interpreter: held)
/// await host.send(.started)                 // launches [.subscribe, .fetchPage]
/// try await held.waitForHeld(count: 2)
/// try await held.release(.fetchPage)        // the later effect runs first
/// try await held.release(.subscribe)
/// ```
///
/// A held effect that the host cancels (its key replaced, the host stopped, the scope ended) is
/// dropped without being performed.
public final class HeldEffectsInterpreter<Machine: StateMachine>: EffectInterpreter {
    private struct Entry: Sendable {
        let id: UInt64
        let effect: Machine.Effect
        let start: TestGate
        let done: TestGate
    }

    private struct Storage {
        var entries: [Entry] = []
        var nextID: UInt64 = 0
    }

    private let base: any EffectInterpreter<Machine>
    private let storage = Lock(Storage())
    private let heldPublisher = ObservableValue<[Machine.Effect]>.Publisher([])

    /// Holds the effects that `base` performs once released.
    public init(_ base: any EffectInterpreter<Machine>) {
        self.base = base
    }

    /// The effects waiting to be released, in the order they reached the interpreter.
    public var held: [Machine.Effect] { heldPublisher.value }

    /// The held effects, observable (wait on them with `wait(until:)`).
    public var heldEffects: ObservableValue<[Machine.Effect]> { heldPublisher.observable }

    /// Holds `effect` until it is released, then performs it with the wrapped interpreter.
    public func perform(_ effect: Machine.Effect, context: EffectContext<Machine.Event>) async -> Machine.Event? {
        let entry = storage.withLock { storage -> Entry in
            let entry = Entry(id: storage.nextID, effect: effect, start: TestGate(), done: TestGate())
            storage.nextID += 1
            storage.entries.append(entry)
            heldPublisher.publish(storage.entries.map(\.effect))
            return entry
        }
        do {
            try await entry.start.waitCancellable()
        } catch {
            storage.withLock { storage in
                storage.entries.removeAll { $0.id == entry.id }
                heldPublisher.publish(storage.entries.map(\.effect))
            }
            entry.done.open()
            return nil
        }
        let event = await base.perform(effect, context: context)
        entry.done.open()
        return event
    }

    /// Performs the earliest held effect that matches `predicate` and returns when the wrapped
    /// interpreter has finished it.
    ///
    /// - Throws: a ``TestFailure`` naming the held effects when none matches.
    public func release(
        fileID: String = #fileID, line: Int = #line, where predicate: (Machine.Effect) -> Bool
    ) async throws(TestFailure) {
        let entry = storage.withLock { storage -> Entry? in
            guard let index = storage.entries.firstIndex(where: { predicate($0.effect) }) else { return nil }
            let entry = storage.entries.remove(at: index)
            heldPublisher.publish(storage.entries.map(\.effect))
            return entry
        }
        guard let entry else {
            throw TestFailure("no held effect matches; holding \(held.map(\.caseName))", fileID: fileID, line: line)
        }
        entry.start.open()
        await entry.done.wait()
    }

    /// Waits until at least `count` effects are held.
    public func waitForHeld(
        count: Int, timeout: Duration = TestWaiting.defaultTimeout, fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        do {
            try await heldPublisher.observable.wait(timeout: timeout, until: { $0.count >= count })
        } catch {
            throw TestFailure(
                "timed out waiting for \(count) held effect(s); holding \(held.map(\.caseName))", fileID: fileID,
                line: line)
        }
    }
}

extension HeldEffectsInterpreter where Machine.Effect: Equatable {
    /// Performs the earliest held effect equal to `effect` and returns when it has finished.
    ///
    /// - Throws: a ``TestFailure`` naming the held effects when none is equal.
    public func release(
        _ effect: Machine.Effect, fileID: String = #fileID, line: Int = #line
    ) async throws(TestFailure) {
        try await release(fileID: fileID, line: line, where: { $0 == effect })
    }
}
