import SymorvaCrypto
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaTesting
import Testing

@testable import SymorvaE2EE

/// The verification center's timers on a manual clock: a request nobody answers is cancelled
/// with `m.timeout` after two minutes, and the cancel is sent.
@Suite("Verification center timers")
struct VerificationCenterTests {
    @Test("An unanswered request is cancelled m.timeout after 2 minutes, and the cancel goes to the device")
    func requestTimesOut() async throws {
        let fixture = EngineFixture()
        let alice = try await fixture.device("@alice:example.org", "ALICE")
        let bob = try await fixture.device("@bob:example.org", "BOB")
        try await fixture.introduce(alice, bob)
        let sent = RoomKeySharingTests.SentBodies()
        let transport = ScriptedHTTPTransport()
        transport.on("PUT", pathPrefix: "/_matrix/client/v3/sendToDevice/m.key.verification.") { request in
            if let body = try? JSONValue(parsing: request.body) { sent.withLock { $0.append(body) } }
            return .json(200, "{}")
        }
        let clock = ManualClock()
        let center = VerificationCenter(
            userID: alice.userID, deviceID: DeviceID("ALICE"), engine: alice.engine, store: alice.store,
            requester: FixedTokenMatrixRequester(
                homeserverURL: HomeserverURL("https://example.org")!, userID: alice.userID,
                accessToken: Secret("token"), transport: transport),
            wallClock: OlmProtocolTests.FixedClock(milliseconds: 1_000), clock: clock,
            logger: Logger(category: "test", center: LogCenter(threshold: .trace)))
        let verification = try await center.request(user: bob.userID, device: DeviceID("BOB"), startDirectly: false)
        #expect(verification.state.value == .requested)
        try await clock.waitForSleepers(count: 2)  // the overall and the request timers
        await clock.advance(by: .seconds(120))
        try await verification.state.wait(timeout: .seconds(10)) { $0 == .cancelled(code: "m.timeout", byUs: true) }
        let codes = sent.withLock { bodies in
            bodies.compactMap { body -> String? in
                guard case .object(let top) = body, case .object(let messages)? = top["messages"],
                    case .object(let toBob)? = messages[bob.userID.rawValue], case .object(let content)? = toBob["BOB"],
                    case .string(let code)? = content["code"]
                else { return nil }
                return code
            }
        }
        #expect(codes == ["m.timeout"])
        #expect(sent.withLock { $0.count } == 2)  // the request, then the cancel
    }
}
