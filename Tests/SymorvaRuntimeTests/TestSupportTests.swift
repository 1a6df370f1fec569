import Foundation
import SymorvaRuntime
import SymorvaTesting
import Synchronization
import Testing

/// A door with a code lock: the smallest charted machine with a guarded alternative.
struct DoorMachine: ChartedMachine {
    static let name = "Door"
    let code: Int

    enum State: Sendable, Equatable, CaseNameListing {
        /// The door is open.
        case opened
        /// The door is shut but not locked.
        case closed
        /// The door is locked.
        case locked
        static let allCaseNames = ["opened", "closed", "locked"]
    }

    enum Event: Sendable, Equatable, CaseNameListing {
        /// Somebody opens the door.
        case open
        /// Somebody shuts it.
        case close
        /// Somebody locks it.
        case lock
        /// Somebody tries a code.
        case unlock(code: Int)
        /// Somebody knocks.
        case knock
        static let allCaseNames = ["open", "close", "lock", "unlock", "knock"]
    }

    enum Effect: MachineEffect, Equatable {
        case ring
        case alarm
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.closed, .open): .move(to: .opened)
        case (.opened, .close): .move(to: .closed)
        case (.closed, .lock): .move(to: .locked)
        case (.locked, .unlock(let entered)): entered == code ? .move(to: .closed) : .stay(effects: [.alarm])
        case (.closed, .knock), (.locked, .knock): .stay(effects: [.ring])
        default: .ignored
        }
    }
}

let doorChart = """
    <?xml version="1.0" encoding="UTF-8"?>
    <scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0" name="Door" initial="closed">
      <state id="opened">
        <transition event="close" target="closed"/>
      </state>
      <state id="closed">
        <transition event="open" target="opened"/>
        <transition event="lock" target="locked"/>
        <transition event="knock"/>
      </state>
      <state id="locked">
        <transition event="unlock" cond="right code" target="closed"/>
        <transition event="unlock" cond="wrong code"/>
        <transition event="knock"/>
      </state>
    </scxml>
    """

/// The door again, with a state type that names `locked` one way by `caseName` and another by
/// `caseNameLiteral`.
struct MisnamedDoorMachine: ChartedMachine {
    static let name = "Door"

    enum State: Sendable, Equatable, CaseNameListing {
        case opened, closed, locked
        static let allCaseNames = ["opened", "closed", "locked"]

        init(_ door: DoorMachine.State) {
            switch door {
            case .opened: self = .opened
            case .closed: self = .closed
            case .locked: self = .locked
            }
        }

        var door: DoorMachine.State {
            switch self {
            case .opened: .opened
            case .closed: .closed
            case .locked: .locked
            }
        }

        var caseName: String { caseLabel(of: door) }
        var caseNameLiteral: StaticString? { self == .locked ? "bolted" : nil }
    }

    func transition(from state: State, on event: DoorMachine.Event) -> Transition<State, DoorMachine.Effect> {
        switch DoorMachine(code: 1234).transition(from: state.door, on: event) {
        case .ignored: .ignored
        case .stay(let effects): .stay(effects: effects)
        case .move(let next, let effects): .move(to: State(next), effects: effects)
        }
    }
}

@Suite("Test support: chart checker")
struct ChartCheckerTests {
    let states: [DoorMachine.State] = [.opened, .closed, .locked]
    let events: [DoorMachine.Event] = [.open, .close, .lock, .unlock(code: 1234), .unlock(code: 1), .knock]

    func checker(_ xml: String = doorChart) throws -> ChartChecker<DoorMachine> {
        ChartChecker(machine: DoorMachine(code: 1234), chart: try StateChart(data: Data(xml.utf8), source: "Door"))
    }

    @Test("A machine that matches its chart passes")
    func conforming() throws {
        try checker().assertConforms(states: states, events: events, initial: .closed)
    }

    @Test("A wrong target names state, event, expected and actual")
    func wrongTarget() throws {
        let chart = doorChart.replacingOccurrences(
            of: #"<transition event="close" target="closed"/>"#, with: #"<transition event="close" target="locked"/>"#)
        let found = try checker(chart).mismatches(states: states, events: events)
        #expect(
            found == [
                .transition(
                    state: "opened", event: "close", expected: ["locked"], actual: "closed", sample: "opened on close"),
                .unwitnessedTransition(StateChart.Transition(source: "opened", event: "close", target: "locked")),
            ])
        #expect(found[0].description.contains("state opened, event close: chart expects locked, code gives closed"))
    }

    @Test("A handled pair the chart ignores, and an ignored pair the chart handles, both fail")
    func ignoredVersusHandled() throws {
        let chart = doorChart.replacingOccurrences(of: #"<transition event="knock"/>"#, with: "")
            .replacingOccurrences(
                of: #"<transition event="close" target="closed"/>"#,
                with: #"<transition event="close" target="closed"/><transition event="open"/>"#)
        let found = try checker(chart).mismatches(states: states, events: events)
        #expect(found.contains(.eventMissingFromChart("knock")))
        #expect(
            found.contains {
                if case .transition("closed", "knock", ["ignored"], "closed", _) = $0 { true } else { false }
            })
        #expect(
            found.contains {
                if case .transition("opened", "open", ["opened"], "ignored", _) = $0 { true } else { false }
            })
    }

    @Test("Samples that miss a state or event case fail")
    func missingSamples() throws {
        let found = try checker().mismatches(states: [.opened, .closed], events: [.open, .close, .lock, .knock])
        #expect(found.contains(.stateNotSampled("locked")))
        #expect(found.contains(.eventNotSampled("unlock")))
    }

    @Test("An untested guarded alternative fails")
    func unwitnessed() throws {
        let found = try checker().mismatches(
            states: states, events: [.open, .close, .lock, .unlock(code: 1234), .knock])
        #expect(
            found == [
                .unwitnessedTransition(
                    StateChart.Transition(source: "locked", event: "unlock", target: nil, condition: "wrong code"))
            ])
    }

    @Test("A type whose caseName and caseNameLiteral disagree fails")
    func disagreeingNames() throws {
        let checker = ChartChecker(
            machine: MisnamedDoorMachine(), chart: try StateChart(data: Data(doorChart.utf8), source: "Door"))
        let found = checker.mismatches(states: [.opened, .closed, .locked], events: events)
        #expect(found == [.caseNamesDisagree(caseName: "locked", literal: "bolted")])
        #expect(found[0].description == "caseName locked and caseNameLiteral bolted name the same case differently")
    }

    @Test("Chart states and events the code lacks, and code cases the chart lacks, fail")
    func vocabulary() throws {
        let chart = doorChart.replacingOccurrences(
            of: #"<state id="opened">"#,
            with: #"<state id="ajar"><transition event="slam" target="closed"/></state><state id="opened">"#
        )
        .replacingOccurrences(of: #"<transition event="lock" target="locked"/>"#, with: "")
        let found = try checker(chart).mismatches(states: states, events: events, initial: .opened)
        #expect(found.contains(.stateMissingFromCode("ajar")))
        #expect(found.contains(.eventMissingFromCode("slam")))
        #expect(found.contains(.eventMissingFromChart("lock")))
        #expect(found.contains(.initialState(chart: "closed", code: "opened")))
    }

    @Test("Charts outside the subset or inconsistent ones are rejected")
    func parsing() {
        let nested = doorChart.replacingOccurrences(
            of: #"<transition event="close" target="closed"/>"#, with: #"<state id="inner"/>"#)
        #expect(throws: ChartError.self) { try StateChart(data: Data(nested.utf8)) }
        let unknownTarget = doorChart.replacingOccurrences(of: #"target="opened""#, with: #"target="nowhere""#)
        #expect(throws: ChartError.invalid("chart: closed --open--> nowhere targets unknown state nowhere")) {
            try StateChart(data: Data(unknownTarget.utf8))
        }
        let badInitial = doorChart.replacingOccurrences(of: #"initial="closed""#, with: #"initial="gone""#)
        #expect(throws: ChartError.self) { try StateChart(data: Data(badInitial.utf8)) }
        #expect(throws: ChartError.self) { try StateChart(data: Data("<scxml name=".utf8)) }
    }

    @Test("A chart that is not valid UTF-8 is rejected, not a crash (Fuzz/Crashes/scxml, a comment)")
    func invalidUTF8() {
        // FoundationXML traps on a comment that is not UTF-8; the loader must refuse it first.
        let chart =
            Data("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!--\n ".utf8) + Data([0xE0, 0xAB, 0x97, 0x9A])
            + Data(" -->\n".utf8) + Data(doorChart.utf8)
        #expect(throws: ChartError.malformedXML("Door: not valid UTF-8")) {
            try StateChart(data: chart, source: "Door")
        }
    }

    @Test(
        "A processing instruction without data, or anywhere but the XML declaration, is rejected, not a crash (Fuzz/Crashes/scxml)"
    )
    func processingInstructions() throws {
        // FoundationXML dereferences the null data of `<?xml?>`; the loader must refuse it first.
        let body = String(doorChart.split(separator: "\n", maxSplits: 1)[1])
        for prefix in [
            "<?xml?>\n", "<?xml version=\"1.0\"?>\n<?target?>\n", "<?pi data?>\n", "<?xml ~><?hversionb?>\n",
        ] {
            #expect(throws: ChartError.self) { try StateChart(data: Data((prefix + body).utf8), source: "Door") }
        }
        // The declaration itself is fine.
        _ = try StateChart(data: Data(doorChart.utf8))
    }

    @Test("The locator finds the package root from a test file")
    func locator() throws {
        let root = try ChartLocator.packageRoot()
        #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent("Package.swift").path))
        #expect(try ChartLocator.chartsDirectory().lastPathComponent == "StateCharts")
        #expect(throws: ChartError.self) { try ChartLocator.chartURL(named: "NoSuchMachine") }
        #expect(throws: ChartError.self) { try ChartLocator.packageRoot(from: "/no/such/dir/File.swift") }
    }
}

@Suite("Test support: machine test store")
struct MachineTestStoreTests {
    @Test("Matching steps pass and advance the store")
    func passes() throws {
        let store = MachineTestStore(DoorMachine(code: 1), initial: .closed)
        try store.send(.knock, stayingWith: [.ring])
        try store.send(.lock, expecting: .locked)
        try store.send(.unlock(code: 2), stayingWith: [.alarm])
        try store.assertIgnored([.open, .close, .lock])
        try store.send(.unlock(code: 1), expecting: .closed)
        try store.assertState(.closed)
        #expect(store.stepCount == 7)
    }

    @Test("A wrong next state fails, showing expected and actual")
    func wrongState() {
        let store = MachineTestStore(DoorMachine(code: 1), initial: .closed)
        let failure = #expect(throws: TestFailure.self) { try store.send(.lock, expecting: .opened) }
        #expect(failure?.message.contains("expected: move to opened, effects []") == true)
        #expect(failure?.message.contains("actual:   move to locked, effects []") == true)
        #expect(failure?.message.contains("event lock in state closed") == true)
        #expect(store.state == .locked)
    }

    @Test("A missing or unexpected effect fails")
    func effects() {
        let store = MachineTestStore(DoorMachine(code: 1), initial: .closed)
        let unexpected = #expect(throws: TestFailure.self) { try store.send(.knock, stayingWith: []) }
        #expect(
            unexpected?.message.contains("unexpected effects: [SymorvaRuntimeTests.DoorMachine.Effect.ring]") == true)
        let missing = #expect(throws: TestFailure.self) { try store.send(.knock, stayingWith: [.ring, .ring]) }
        #expect(missing?.message.contains("missing effects:") == true)
    }

    @Test("Stay, move and ignored are told apart")
    func outcomesDiffer() {
        let store = MachineTestStore(DoorMachine(code: 1), initial: .closed)
        #expect(throws: TestFailure.self) { try store.send(.knock, expecting: .closed, effects: [.ring]) }
        #expect(throws: TestFailure.self) { try store.assertIgnored(.knock) }
        #expect(throws: TestFailure.self) { try store.send(.close, stayingWith: []) }
        #expect(throws: TestFailure.self) { try store.send(.lock, stayingWith: []) }
    }
}

/// A stairwell light: pressing the switch while it is on moves to `.on` again, which restarts
/// its state timeout; looking at it stays. The two outcomes end in equal states.
struct StairLightMachine: StateMachine {
    static let name = "StairLight"

    enum State: Sendable, Equatable, CaseNamed {
        /// The light is off.
        case off
        /// The light is on until its state timeout turns it off.
        case on
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Somebody presses the switch.
        case press
        /// Somebody looks at the light.
        case look
        /// The state timeout fired.
        case timeout
    }

    enum Effect: MachineEffect, Equatable {
        case click
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.off, .press), (.on, .press): .move(to: .on, effects: [.click])
        case (.on, .look): .stay
        case (.on, .timeout): .move(to: .off)
        case (.off, .look), (.off, .timeout): .ignored
        }
    }
}

@Suite("Test support: a move to an equal state is not a stay")
struct MoveVersusStayTests {
    @Test("A move to the same state passes as a move and fails as a stay")
    func moveToSameState() {
        let store = MachineTestStore(StairLightMachine(), initial: .on)
        #expect(throws: Never.self) { try store.send(.press, expecting: .on, effects: [.click]) }
        let failure = #expect(throws: TestFailure.self) { try store.send(.press, stayingWith: [.click]) }
        #expect(failure?.message.contains("expected: stay, effects [") == true)
        #expect(failure?.message.contains("actual:   move to on, effects [") == true)
        #expect(store.state == .on)
    }

    @Test("A stay passes as a stay and fails as a move to the same state")
    func stayInSameState() {
        let store = MachineTestStore(StairLightMachine(), initial: .on)
        #expect(throws: Never.self) { try store.send(.look, stayingWith: []) }
        let failure = #expect(throws: TestFailure.self) { try store.send(.look, expecting: .on) }
        #expect(failure?.message.contains("expected: move to on, effects []") == true)
        #expect(failure?.message.contains("actual:   stay, effects []") == true)
        #expect(store.state == .on)
    }

    @Test("Neither a move nor a stay passes for an ignored event, and ignored fails for both")
    func ignoredIsNeither() {
        let store = MachineTestStore(StairLightMachine(), initial: .off)
        #expect(throws: TestFailure.self) { try store.send(.look, stayingWith: []) }
        #expect(throws: TestFailure.self) { try store.send(.look, expecting: .off) }
        #expect(throws: Never.self) { try store.assertIgnored(.look) }
        store.reset(to: .on)
        #expect(throws: TestFailure.self) { try store.assertIgnored(.look) }
        #expect(throws: TestFailure.self) { try store.assertIgnored(.press) }
    }

    @Test("Leaving out the effects asserts that there are none")
    func effectsAreExhaustive() {
        let store = MachineTestStore(StairLightMachine(), initial: .off)
        let failure = #expect(throws: TestFailure.self) { try store.send(.press, expecting: .on) }
        #expect(
            failure?.message.contains("unexpected effects: [SymorvaRuntimeTests.StairLightMachine.Effect.click]")
                == true)
    }
}

@Suite("Test support: manual clock")
struct ManualClockTests {
    @Test("Sleepers wake only when time reaches their deadline, earliest first")
    func deadlines() async throws {
        let clock = ManualClock()
        let woken = ObservableValue<[Int]>.Publisher([])
        for seconds in [3, 1, 2] {
            Task {
                try await clock.sleep(for: .seconds(seconds))
                woken.update { $0.append(seconds) }
            }
        }
        try await clock.waitForSleepers(count: 3)
        #expect(clock.pendingDeadlines == [.seconds(1), .seconds(2), .seconds(3)])
        await clock.advance(by: .milliseconds(1500))
        try await woken.observable.wait(for: [1])
        #expect(clock.sleeperCount == 2)
        #expect(clock.now == .milliseconds(1500))
        await clock.advance(by: .seconds(1))
        try await woken.observable.wait(for: [1, 2])
        await clock.advance(by: .seconds(10))
        try await woken.observable.wait(for: [1, 2, 3])
        #expect(clock.now == .milliseconds(12_500))
        #expect(clock.sleeperCount == 0)
    }

    @Test("Cancelling a sleeping task throws CancellationError and removes the sleeper")
    func cancellation() async throws {
        let clock = ManualClock()
        let sleeper = Task { () -> Bool in
            do {
                try await clock.sleep(for: .seconds(60))
                return false
            } catch is CancellationError {
                return true
            }
        }
        try await clock.waitForSleepers(count: 1)
        sleeper.cancel()
        #expect(try await sleeper.value)
        #expect(clock.sleeperCount == 0)
        #expect(clock.now == .zero)
    }

    @Test("A sleep of zero returns at once; an already cancelled task throws")
    func immediate() async throws {
        let clock = ManualClock()
        try await clock.sleep(for: .zero)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(clock.sleeperCount == 0)
    }
}

@Suite("Test support: held effects")
struct HeldEffectsInterpreterTests {
    @Test("Held effects run in the order the test releases them, and a cancelled one is dropped")
    func releaseOrder() async throws {
        let world = ProbeWorld()
        let recording = world.interpreter
        let held = HeldEffectsInterpreter(recording)
        let host = MachineHost(machine: ProbeMachine(), initial: .idle, interpreter: held, clock: world.clock)
        await host.send(.start)
        await host.send(.perform("first"))
        await host.send(.perform("second"))
        await host.send(.performKeyed("replaced"))
        try await held.waitForHeld(count: 3)
        await host.send(.cancelKeyed)
        try await held.heldEffects.wait(until: { $0.count == 2 && !$0.contains(.keyedWork("replaced")) })
        try await held.release(.work("second"))
        try await held.release(.work("first"))
        try await host.states.wait(until: { $0.log == ["done:second", "done:first"] })
        #expect(recording.performed == [.work("second"), .work("first")])
        #expect(held.held.isEmpty)
        await #expect(throws: TestFailure.self) { try await held.release(.keyedWork("replaced")) }
    }
}
