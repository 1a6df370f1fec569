import Foundation
import SymorvaHTTP
import SymorvaMachines
import SymorvaRuntime
import SymorvaServices
import SymorvaStore
import SymorvaTesting
import SymorvaWallet
import Testing

/// A ``TransferInterpreter`` over a ``ScriptedHTTPTransport``, an in-memory store and a manual clock.
struct InterpreterHarness {
    let transport = ScriptedHTTPTransport.communityServices()
    let clock = ManualClock(now: .seconds(100))
    let store: WalletStore
    let interpreter: TransferInterpreter

    /// `rateLimitPolicy`: `.never` shows each 429 as the services client reports it; the
    /// client waits on the harness's clock.
    init(rateLimitPolicy: RateLimitPolicy = .never) async throws {
        let database = try await SQLiteDatabase.open(path: ":memory:")
        store = try await WalletStore.open(on: database)
        let services = CommunityServicesClient(
            baseURL: URL(string: "http://services.test")!, transport: transport, tokenSource: FixedOpenIDSource(),
            clock: clock, rateLimitPolicy: rateLimitPolicy)
        interpreter = TransferInterpreter(services: services, store: store, requestTimeout: .seconds(5))
    }

    func perform(_ effect: TransferMachine.Effect) async -> TransferMachine.Event? {
        await interpreter.perform(effect, context: EffectContext(epoch: Epoch(1), clock: clock) { _ in })
    }

    func confirm(answering answer: @escaping ScriptedHTTPTransport.Answer) async -> TransferMachine.Event? {
        transport.on("POST", "/_symorva/v1/wallet/transfers/confirm", answer)
        return await perform(
            .sendConfirm(
                commandID: WalletFixtures.commandID, draftID: WalletFixtures.draftID,
                verification: WalletFixtures.sealed
            ))
    }

    func query(answering answer: @escaping ScriptedHTTPTransport.Answer) async -> TransferMachine.Event? {
        transport.on("GET", "/_symorva/v1/wallet/commands/\(WalletFixtures.commandID.rawValue)", answer)
        return await perform(.sendQuery(WalletFixtures.commandID))
    }

    func prepare(answering answer: @escaping ScriptedHTTPTransport.Answer) async -> TransferMachine.Event? {
        transport.on("POST", "/_symorva/v1/wallet/transfers/prepare", answer)
        let request = TransferRequest(
            recipient: WalletFixtures.bob, asset: WalletFixtures.orb, amount: WalletFixtures.amount("25.00"))
        return await perform(.sendPrepare(request))
    }
}

@Suite("Transfer interpreter: confirm answers")
struct TransferInterpreterConfirmTests {
    @Test("A settled answer becomes settled with the service's figures")
    func settled() async throws {
        let harness = try await InterpreterHarness()
        let event = await harness.confirm { _ in
            .json(200, WalletFixtures.answer("settled", extra: #", "transfer": \#(WalletFixtures.transferJSON)"#))
        }
        #expect(event == .confirmResponse(.settled(WalletFixtures.transfer)))
    }

    @Test("The confirm request carries the command, the draft and the sealed bytes in base64")
    func requestBody() async throws {
        let harness = try await InterpreterHarness()
        _ = await harness.confirm { _ in .json(200, WalletFixtures.answer("pending")) }
        let request = try #require(harness.transport.requests.last)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
        #expect(body["command_id"] as? String == WalletFixtures.commandID.rawValue)
        #expect(body["draft_id"] as? String == "d_abc")
        let verification = try #require(body["verification"] as? [String: String])
        #expect(verification == ["method": "pin", "sealed": "AQID"])
        // The transport must never resend it by itself (libcurl would, on a dead reused connection).
        #expect(request.deliversAtMostOnce)
    }

    @Test(
        "Failure codes map to the member's reasons",
        arguments: [
            (WalletFixtures.failure("wrong_pin", attemptsLeft: 3), TransferFailure.wrongPIN(attemptsLeft: 3)),
            (WalletFixtures.failure("locked_out", attemptsLeft: 0), .lockedOut),
            (WalletFixtures.failure("insufficient_funds"), .insufficientFunds),
            (WalletFixtures.failure("draft_expired"), .draftExpired),
            (WalletFixtures.failure("method_not_offered"), .verification(.methodNotOffered)),
            (WalletFixtures.failure("command_fenced"), .rejected(code: "command_fenced")),
            (WalletFixtures.failure("verification_failed"), .rejected(code: "verification_failed")),
        ])
    func failures(answer: String, expected: TransferFailure) async throws {
        let harness = try await InterpreterHarness()
        let event = await harness.confirm { _ in .json(200, answer) }
        #expect(event == .confirmResponse(.failed(expected)))
    }

    @Test("A pending answer is pending")
    func pending() async throws {
        let harness = try await InterpreterHarness()
        #expect(
            await harness.confirm { _ in .json(200, WalletFixtures.answer("pending")) } == .confirmResponse(.pending))
    }

    @Test(
        "Every failure without a command answer is ambiguous, by kind",
        arguments: [
            (Result<HTTPResponse, TransportError>.failure(.timedOut), TransportProblem.timeout),
            (.failure(.connectFailed), .unreachable),
            (.failure(.dnsFailure), .unreachable),
            (.failure(.emptyResponse), .responseDropped),
            (.failure(.connectionLost), .connectionReset),
            (.failure(.partialResponse), .responseDropped),
            (.failure(.other(code: 7, message: "Couldn't connect to server")), .connectionReset),
            (.json(503, WalletFixtures.error("SY_INJECTED_FAULT")), .serverError(status: 503)),
            (.json(500, "<html>oops</html>"), .serverError(status: 500)),
            (.json(200, "{\"status\": \"sett"), .responseDropped),
            (.json(200, WalletFixtures.answer("settled")), .responseDropped),
            (.json(200, WalletFixtures.answer("unknown_command")), .responseDropped),
        ])
    func ambiguous(answer: Result<HTTPResponse, TransportError>, problem: TransportProblem) async throws {
        let harness = try await InterpreterHarness()
        #expect(await harness.confirm { _ in answer } == .confirmResponse(.transportError(problem)))
    }

    @Test("A 4xx refusal is definitive: the service records nothing before it")
    func refusal() async throws {
        let harness = try await InterpreterHarness()
        let event = await harness.confirm { _ in .json(400, WalletFixtures.error("SY_INVALID_PARAM")) }
        #expect(event == .confirmResponse(.failed(.rejected(code: "SY_INVALID_PARAM"))))
    }

    @Test("The confirm request is sent exactly once, whatever happens to it")
    func neverRetried() async throws {
        let harness = try await InterpreterHarness()
        _ = await harness.confirm { _ in .failure(.timedOut) }
        #expect(harness.transport.requests.count == 1)
    }
}

@Suite("Transfer interpreter: queries and prepare")
struct TransferInterpreterQueryTests {
    @Test("Query answers map one to one; unknown_command is the service's 'never received'")
    func queryAnswers() async throws {
        let harness = try await InterpreterHarness()
        let settled = WalletFixtures.answer("settled", extra: #", "transfer": \#(WalletFixtures.transferJSON)"#)
        #expect(await harness.query { _ in .json(200, settled) } == .queryResponse(.settled(WalletFixtures.transfer)))
        #expect(
            await harness.query { _ in .json(200, WalletFixtures.failure("wrong_pin", attemptsLeft: 2)) }
                == .queryResponse(.failed(.wrongPIN(attemptsLeft: 2))))
        #expect(await harness.query { _ in .json(200, WalletFixtures.answer("pending")) } == .queryResponse(.pending))
        #expect(
            await harness.query { _ in .json(200, WalletFixtures.answer("unknown_command")) }
                == .queryResponse(.unknownCommand))
    }

    @Test("A failed query leaves the command unknown, even a 4xx")
    func queryFailures() async throws {
        let harness = try await InterpreterHarness()
        #expect(await harness.query { _ in .failure(.timedOut) } == .queryResponse(.transportError(.timeout)))
        #expect(
            await harness.query { _ in .json(502, WalletFixtures.error("SY_HOMESERVER_UNAVAILABLE")) }
                == .queryResponse(.transportError(.serverError(status: 502))))
        #expect(
            await harness.query { _ in .json(400, WalletFixtures.error("SY_INVALID_PARAM")) }
                == .queryResponse(.transportError(.responseDropped)))
    }

    @Test("A draft's expiry becomes an instant of the host clock: now + the lifetime the service left")
    func draft() async throws {
        let harness = try await InterpreterHarness()
        let event = await harness.prepare { _ in .json(200, WalletFixtures.draftJSON) }
        guard case .prepareResponse(.drafted(let draft)) = event else {
            Issue.record("expected a draft, got \(String(describing: event))")
            return
        }
        #expect(draft.expiresAt == .seconds(100) + .seconds(120))
        #expect(draft.summary == WalletFixtures.summary)
        #expect(draft.sealingPublicKey == WalletFixtures.serverKey)
        #expect(draft.verificationMethods == [.pin])
        let request = try #require(harness.transport.requests.last)
        let body = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: String])
        #expect(body == ["recipient": "@bob:localhost", "asset": "ORB", "amount": "25.00"])
    }

    @Test(
        "Prepare refusals map to reasons; transport failures are safe to report",
        arguments: [
            ("SY_INSUFFICIENT_FUNDS", 409, TransferFailure.insufficientFunds),
            ("SY_RECIPIENT_UNKNOWN", 404, .recipientUnknown),
            ("SY_INVALID_AMOUNT", 400, .invalidAmount),
            ("SY_UNKNOWN_ASSET", 400, .assetUnknown),
            ("SY_WALLET_LOCKED", 403, .lockedOut),
            ("SY_PIN_NOT_SET", 409, .rejected(code: "SY_PIN_NOT_SET")),
        ])
    func prepareRefusals(code: String, status: Int, expected: TransferFailure) async throws {
        let harness = try await InterpreterHarness()
        let event = await harness.prepare { _ in .json(status, WalletFixtures.error(code)) }
        #expect(event == .prepareResponse(.failed(expected)))
    }

    @Test("An unreachable or unreadable prepare is a transport error")
    func prepareTransport() async throws {
        let harness = try await InterpreterHarness()
        #expect(
            await harness.prepare { _ in .failure(.connectFailed) } == .prepareResponse(.transportError(.unreachable)))
        #expect(
            await harness.prepare { _ in .json(200, #"{"draft_id": 1}"#) }
                == .prepareResponse(.transportError(.responseDropped)))
    }
}

@Suite("Transfer interpreter: sealing, store and timers")
struct TransferInterpreterLocalTests {
    @Test("The PIN is sealed to the draft's key: a sealed box of the bound payload, no PIN in clear")
    func sealing() async throws {
        let harness = try await InterpreterHarness()
        let context = SealingContext(
            commandID: WalletFixtures.commandID, draftID: WalletFixtures.draftID,
            serverPublicKey: WalletFixtures.serverKey)
        let event = await harness.perform(.sealVerification(.pin(Secret("4711")), context: context))
        guard case .verificationSealed(.success(let sealed)) = event else {
            Issue.record("expected sealed bytes, got \(String(describing: event))")
            return
        }
        let payloadLength = context.pinPayload(Secret("4711")).exposedValue.count
        #expect(sealed.method == .pin)
        #expect(sealed.sealedBytes.exposedValue.count == payloadLength + 48)
        #expect(!String(decoding: sealed.sealedBytes.exposedValue, as: UTF8.self).contains("4711"))
    }

    @Test("A bad key or a biometric request without a verifier never leaves the device")
    func sealingRefusals() async throws {
        let harness = try await InterpreterHarness()
        let badKey = SealingContext(
            commandID: WalletFixtures.commandID, draftID: WalletFixtures.draftID, serverPublicKey: [1])
        #expect(
            await harness.perform(.sealVerification(.pin(Secret("4711")), context: badKey))
                == .verificationSealed(.failure(.sealingFailed)))
        #expect(
            await harness.perform(.sealVerification(.biometric, context: badKey))
                == .verificationSealed(.failure(.methodNotOffered)))
        #expect(harness.transport.requests.isEmpty)
    }

    @Test("Persisting records the command once; a reused command ID is refused; clearing removes it")
    func persistence() async throws {
        let harness = try await InterpreterHarness()
        #expect(await harness.perform(.persistPendingCommand(WalletFixtures.pending)) == .commandPersisted)
        #expect(try await harness.store.pendingCommands() == [WalletFixtures.pending])
        #expect(await harness.perform(.persistPendingCommand(WalletFixtures.pending)) == .persistenceFailed)
        #expect(await harness.perform(.clearPendingCommand(WalletFixtures.commandID)) == nil)
        #expect(try await harness.store.pendingCommands().isEmpty)
    }

    @Test("Timers are the host's: the query timer after its delay, the expiry at its instant")
    func timers() async throws {
        let harness = try await InterpreterHarness()
        // The interpreter does nothing for a timer (and never sleeps): the host performs it.
        #expect(await harness.perform(.scheduleQuery(after: .seconds(2))) == nil)
        #expect(await harness.perform(.scheduleDraftExpiry(at: .seconds(110))) == nil)
        #expect(harness.clock.sleeperCount == 0)
        #expect(
            TransferMachine.Effect.scheduleQuery(after: .seconds(2)).directive
                == .timer(.stateTimeout, .after(.seconds(2))))
        #expect(
            TransferMachine.Effect.scheduleDraftExpiry(at: .seconds(110)).directive
                == .timer(.stateTimeout, .at(.seconds(110))))
        let machine = TransferMachine(configuration: .init())
        #expect(machine.event(firing: .scheduleQuery(after: .seconds(2))) == .timerFired(.query))
        #expect(machine.event(firing: .scheduleDraftExpiry(at: .seconds(110))) == .draftExpired)
    }
}
