import SymorvaMachines
import SymorvaRuntime
import Testing

/// A small deterministic generator (SplitMix64) so that a failing walk can be replayed by seed.
private struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Verification message-order fuzz")
struct VerificationOrderFuzzTests {
    typealias F = VerificationFixture

    /// The requester's messages and answers in order, as a good flow has them.
    static let requesterFlow: [VerificationMachine.Event] = [
        .verifyAsked(F.anyDeviceFlow),
        .readyReceived(VerificationReady(fromDevice: F.bob.deviceID, methods: [KeyVerificationMethod.sas])),
        .sasAsked, .acceptReceived(F.goodAccept), .keyReceived(F.matchingKey), .macReceived(.valid(F.keys)),
        .codeCompared(matches: true), .doneReceived,
    ]

    /// `events` with a few random swaps, duplicates, mismatches and stray events.
    static func perturbed(
        _ events: [VerificationMachine.Event], using random: inout some RandomNumberGenerator
    ) -> [VerificationMachine.Event] {
        var events = events
        let mismatches: [VerificationMachine.Event] = [
            .keyReceived(F.otherKey), .macReceived(.mismatch), .codeCompared(matches: false),
        ]
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            let index = Int.random(in: 0..<events.count, using: &random)
            switch Int.random(in: 0..<5, using: &random) {
            case 0 where index + 1 < events.count: events.swapAt(index, index + 1)
            case 1: events.insert(events[index], at: Int.random(in: index...events.count, using: &random))
            case 2: events[index] = mismatches.randomElement(using: &random)!
            case 3: events.insert(F.sampleEvents.randomElement(using: &random)!, at: index)
            default: events.remove(at: index)
            }
        }
        return events
    }

    @Test("Random orders, duplicates and mismatches never end verified without both checks, nor after a mismatch")
    func neverVerifiedWrongly() {
        let machine = VerificationMachine()
        var verifiedWalks = 0
        for seed in UInt64(1)...3000 {
            var random = SplitMix(state: seed)
            var state = VerificationMachine.State.idle
            var confirmed = false
            var macValid = false
            var mismatch = false
            var signed = 0
            for event in Self.perturbed(Self.requesterFlow, using: &random) {
                let transition = machine.transition(from: state, on: event)
                if !transition.isIgnored {
                    switch event {
                    case .codeCompared(let matches): if matches { confirmed = true } else { mismatch = true }
                    case .macReceived(.valid): macValid = true
                    case .macReceived(.mismatch): mismatch = true
                    default: break
                    }
                }
                for effect in transition.effects {
                    guard case .crossSign = effect else { continue }
                    signed += 1
                    #expect(confirmed && macValid && !mismatch, "seed \(seed): signed without both checks")
                }
                state = transition.nextState(after: state)
                if case .verified = state {
                    #expect(confirmed && macValid && !mismatch, "seed \(seed): verified wrongly")
                }
            }
            #expect(signed <= 1, "seed \(seed): signed \(signed) times")
            if case .verified = state { verifiedWalks += 1 }
        }
        // The walks reach verified at all (else the property above says nothing).
        #expect(verifiedWalks > 0)
    }
}
