import SymorvaREPL
import SymorvaRuntime

/// A tiny machine for the transcripts' `trace on` scenario: it pings until it has had
/// `count` pongs. It exists only in tests; real commands trace the SDK's own machines.
struct PingMachine: StateMachine {
    static let name = "Ping"

    enum State: Sendable, Equatable, CaseNamed {
        /// Nothing asked yet.
        case idle
        /// A ping is out; `remaining` pongs are still expected.
        case waiting(remaining: Int)
        /// Every pong arrived.
        case done
    }

    enum Event: Sendable, Equatable, CaseNamed {
        /// Someone asked for `count` round trips.
        case started(count: Int)
        /// The interpreter answered a ping.
        case pongReceived
    }

    enum Effect: MachineEffect, Equatable {
        /// Send one ping.
        case sendPing
    }

    func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle:
            switch event {
            case .started(let count):
                return count > 0 ? .move(to: .waiting(remaining: count), effects: [.sendPing]) : .move(to: .done)
            case .pongReceived:
                return .ignored
            }
        case .waiting(let remaining):
            switch event {
            case .started:
                return .ignored
            case .pongReceived:
                if remaining > 1 { return .move(to: .waiting(remaining: remaining - 1), effects: [.sendPing]) }
                return .move(to: .done)
            }
        case .done:
            return .ignored
        }
    }
}

/// The state slot the `fixture remember` / `fixture recall` pair shares.
enum RememberedWordKey: REPLStateKey {
    typealias Value = String
}

/// Commands that the transcript tests add to the built-ins, written the way a feature module
/// writes its own: they exercise subcommands, argument parsing, secrets, state slots,
/// failures and tracing.
enum REPLFixtures {
    static var commands: [REPLCommand] { [fixture] }

    static let fixture = REPLCommand.group(
        "fixture", summary: "test-only commands",
        subcommands: [ping, secret, send, remember, recall, fail])

    static let ping = REPLCommand(
        "ping", usage: "fixture ping [<count>]", summary: "run a test machine through a host (count round trips)",
        parse: { arguments throws(REPLError) -> Int in
            guard !arguments.isAtEnd else { return 1 }
            return try arguments.nextInteger(in: 0...100)
        },
        run: { count, context async throws(REPLError) in
            let host = MachineHost(
                machine: PingMachine(), initial: .idle,
                interpreter: ClosureInterpreter<PingMachine> { _, _ in .pongReceived }, tracer: context.tracer)
            let states = host.states.values
            await host.send(.started(count: count))
            for await state in states {
                if case .done = state { break }
            }
            // A second start has no meaning once done: the trace shows it as ignored.
            await host.send(.started(count: count))
            await host.stop()
            context.output.print("ping: \(count) round trips")
        })

    static let secret = REPLCommand(
        "secret", usage: "fixture secret <label>", summary: "read a secret and show that it stays redacted",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { label, context async throws(REPLError) in
            let value = try await context.readSecret(prompt: "\(label): ")
            context.output.print("read \(label): \(value) (\(value.exposedValue.count) characters)")
        })

    static let send = REPLCommand(
        "send", usage: "fixture send <member> <amount> <asset>", summary: "parse a wallet-style command",
        parse: { arguments throws(REPLError) in
            (
                member: try arguments.next(), amount: try arguments.nextInteger(in: 1...1_000_000),
                asset: try arguments.next()
            )
        },
        run: { transfer, context async throws(REPLError) in
            context.output.print("would send \(transfer.amount) \(transfer.asset) to \(transfer.member)")
        })

    static let remember = REPLCommand(
        "remember", usage: "fixture remember <word>", summary: "keep a word in a state slot",
        parse: { arguments throws(REPLError) in try arguments.next() },
        run: { word, context async throws(REPLError) in context[RememberedWordKey.self] = word })

    static let recall = REPLCommand(
        "recall", usage: "fixture recall", summary: "print the remembered word",
        run: { context async throws(REPLError) in
            guard let word = context[RememberedWordKey.self] else { throw .commandFailed("nothing remembered yet") }
            context.output.print(word)
        })

    static let fail = REPLCommand(
        "fail", usage: "fixture fail", summary: "fail the way a feature command fails",
        run: { _ async throws(REPLError) in throw .commandFailed("the fixture failed on purpose") })

    /// The configuration transcripts run with: what `config.transcript` shows.
    static let transcriptConfiguration = REPLConfiguration(
        manifestPath: "Fixtures/symorva.config.json", environmentFilePath: "Fixtures/dev.env",
        environment: REPLEnvironment(
            processValues: ["SYMORVA_SERVER_NAME": "localhost", "PATH": "/usr/bin"],
            fileValues: [
                "SYMORVA_HOMESERVER_URL": "http://127.0.0.1:8008", "SYMORVA_ADMIN_PASSWORD": "s3cret",
                "SYMORVA_SERVER_NAME": "ignored: the process wins",
            ]))

    /// A session with the built-ins and the fixtures, writing to `capture`, with its own tracer
    /// and log center so that parallel tests never see each other's traces or levels.
    static func session(capture: CapturingREPLOutput, configuration: REPLConfiguration = transcriptConfiguration)
        -> REPLSession
    {
        let context = REPLContext(
            output: capture, configuration: configuration, tracer: Tracer(),
            logCenter: LogCenter(threshold: .warning))
        return REPLSession(context: context, commands: commands)
    }
}
