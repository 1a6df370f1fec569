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

    /// A QR flow where this side scans: ready, the scan, the shower's done.
    static let scannerFlow: [VerificationMachine.Event] = [
        .verifyAsked(F.anyDeviceFlow),
        .readyReceived(VerificationReady(fromDevice: F.bob.deviceID, methods: KeyVerificationMethod.ours)),
        .qrScanned(.proven(F.keys)), .doneReceived,
    ]

    /// A QR flow where this side shows: ready, the peer's reciprocate, the person's yes, done.
    static let showerFlow: [VerificationMachine.Event] = [
        .verifyAsked(F.anyDeviceFlow),
        .readyReceived(VerificationReady(fromDevice: F.bob.deviceID, methods: KeyVerificationMethod.ours)),
        .reciprocateReceived(.proven(F.keys)), .codeCompared(matches: true), .doneReceived,
    ]

    /// `events` with a few random swaps, duplicates, mismatches and stray events.
    static func perturbed(
        _ events: [VerificationMachine.Event], using random: inout some RandomNumberGenerator
    ) -> [VerificationMachine.Event] {
        var events = events
        let mismatches: [VerificationMachine.Event] = [
            .keyReceived(F.otherKey), .macReceived(.mismatch), .codeCompared(matches: false),
            .qrScanned(.mismatch(.keyMismatch)), .reciprocateReceived(.mismatch(.keyMismatch)),
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

    @Test(
        "Random orders, duplicates and mismatches never end verified without the checks (both SAS checks, a matching scan, or a good reciprocate and the person's yes), nor after a mismatch",
        arguments: [("SAS", 3000), ("QR scanner", 1000), ("QR shower", 1000)])
    func neverVerifiedWrongly(walk: String, seeds: UInt64) {
        let base =
            switch walk {
            case "QR scanner": Self.scannerFlow
            case "QR shower": Self.showerFlow
            default: Self.requesterFlow
            }
        let machine = VerificationMachine()
        var verifiedWalks = 0
        for seed in UInt64(1)...seeds {
            var random = SplitMix(state: seed)
            var state = VerificationMachine.State.idle
            var confirmed = false
            var macValid = false
            var scannedMatch = false
            var reciprocated = false
            var mismatch = false
            var signed = 0
            for event in Self.perturbed(base, using: &random) {
                let transition = machine.transition(from: state, on: event)
                if !transition.isIgnored {
                    switch event {
                    case .codeCompared(let matches): if matches { confirmed = true } else { mismatch = true }
                    case .macReceived(.valid): macValid = true
                    case .qrScanned(.proven): scannedMatch = true
                    case .reciprocateReceived(.proven): reciprocated = true
                    case .macReceived(.mismatch), .qrScanned(.mismatch), .reciprocateReceived(.mismatch):
                        mismatch = true
                    default: break
                    }
                }
                // What may be signed: both SAS checks, or a scan whose keys matched, or the
                // peer's good reciprocate confirmed by the person; never after a mismatch.
                let proven = !mismatch && ((confirmed && macValid) || scannedMatch || (reciprocated && confirmed))
                for effect in transition.effects {
                    guard case .crossSign = effect else { continue }
                    signed += 1
                    #expect(proven, "\(walk) seed \(seed): signed without the checks")
                }
                state = transition.nextState(after: state)
                if case .verified = state {
                    #expect(proven, "\(walk) seed \(seed): verified wrongly")
                }
            }
            #expect(signed <= 1, "\(walk) seed \(seed): signed \(signed) times")
            if case .verified = state { verifiedWalks += 1 }
        }
        // The walks reach verified at all (else the property above says nothing).
        #expect(verifiedWalks > 0)
    }
}
