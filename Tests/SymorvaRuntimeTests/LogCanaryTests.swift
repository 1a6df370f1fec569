import SymorvaRuntime
import SymorvaTesting
import Testing

/// A machine whose states, events and effects carry message bodies and secrets: the payloads
/// the log must never show.
private struct CanaryMachine: StateMachine {
    static let name = "Canary"

    enum State: Sendable, CaseNamed {
        /// Writing a message; the draft and the session token live in the state.
        case composing(draft: String, token: Secret<String>)
        /// The message went out.
        case sent(body: String)
    }

    enum Event: Sendable, CaseNamed {
        /// The member typed text.
        case typed(String)
        /// The member confirmed with a password.
        case submitted(password: Secret<String>)
        /// The server accepted the message.
        case delivered(body: String)
    }

    enum Effect: MachineEffect {
        case send(body: String, token: Secret<String>)
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch (state, event) {
        case (.composing(_, let token), .typed(let text)):
            .move(to: .composing(draft: text, token: token))
        case (.composing(let draft, let token), .submitted):
            .stay(effects: [.send(body: draft, token: token)])
        case (.composing, .delivered(let body)):
            .move(to: .sent(body: body))
        case (.sent, _):
            .ignored
        }
    }
}

@Suite("Log redaction")
struct LogCanaryTests {
    static let canaries = [
        "CANARY-DRAFT-55aa", "CANARY-BODY-7f3a", "CANARY-TOKEN-91c2", "CANARY-PASSWORD-0b1d", "CANARY-LATE-e4e4",
    ]

    @Test("Canary bodies and secrets never reach the log")
    func canaries() async throws {
        let capture = CapturingLogSink()
        let center = LogCenter(threshold: .trace, sinks: [capture])
        let logger = Logger(category: "canary", center: center)
        let tracer = Tracer()
        tracer.addSink(LoggingTraceSink(logger: Logger(category: "trace", center: center)))
        let trace = ObservableTraceRecorder()
        tracer.addSink(trace)

        let token = Secret("CANARY-TOKEN-91c2")
        let interpreter = RecordingInterpreter<CanaryMachine> { effect, _ in
            switch effect {
            case .send(let body, let token):
                logger.info("sending \(body) with token \(token) effect \(effect)")
                return .delivered(body: body)
            }
        }
        let host = MachineHost(
            machine: CanaryMachine(), initial: .composing(draft: "", token: token), interpreter: interpreter,
            instance: "@alice:example.org", tracer: tracer)

        await host.send(.typed("CANARY-DRAFT-55aa"))
        await host.send(.typed("CANARY-BODY-7f3a"))
        await host.send(.submitted(password: Secret("CANARY-PASSWORD-0b1d")))
        try await trace.wait(for: { $0.event == "delivered" })
        await host.send(.typed("CANARY-LATE-e4e4"))  // ignored in `sent`, still traced

        let state = await host.currentState
        logger.error(
            "state \(state) token \(token) body \("CANARY-BODY-7f3a") password \(Secret("CANARY-PASSWORD-0b1d"))")
        logger.warning("event \(CanaryMachine.Event.typed("CANARY-DRAFT-55aa")) count \(3)")

        let text = capture.text
        // The log did receive the lines, so an empty log cannot pass this test.
        #expect(text.contains("Canary[@alice:example.org] from=composing event=typed to=composing effects=[]"))
        #expect(text.contains("from=composing event=submitted to=composing effects=[send]"))
        #expect(text.contains("from=sent event=typed to=sent effects=[] (ignored)"))
        #expect(text.contains("sending <private> with token <redacted> effect <private>"))
        #expect(text.contains("token <redacted> body <private> password <redacted>"))
        #expect(text.contains("count 3"))
        for canary in Self.canaries {
            #expect(!text.contains(canary), "\(canary) leaked into the log")
        }
    }

    @Test("Every textual form of a secret is redacted")
    func secretForms() {
        let secret = Secret("CANARY-TOKEN-91c2")
        let forms = [
            String(describing: secret), String(reflecting: secret), "\(secret)", "\([secret])",
            "\(Optional(secret) as Any)", String(describing: Mirror(reflecting: secret).children.map(\.value)),
        ]
        for form in forms {
            #expect(!form.contains("CANARY"), "\(form)")
        }
        #expect(secret.exposedValue == "CANARY-TOKEN-91c2")
    }
}
