// Fuzz target: the SCXML chart loader (`StateChart(data:)` in SymorvaTesting). Besides not
// crashing: a chart that loads is valid (unique state ids, a known initial state, known
// targets, no duplicate arrow), and written back as SCXML it loads to an equal chart.
import Foundation
import SymorvaFuzzing
import SymorvaTesting

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    guard let chart = try? StateChart(data: Data(bytes), source: "fuzz") else { return }
    let ids = Set(chart.stateIDs)
    precondition(ids.count == chart.stateIDs.count, "duplicate state ids in a loaded chart")
    precondition(ids.contains(chart.initial), "unknown initial state in a loaded chart")
    for transition in chart.transitions {
        precondition(ids.contains(transition.source), "transition from an unknown state: \(transition)")
        precondition(ids.contains(transition.resolvedTarget), "transition to an unknown state: \(transition)")
    }
    let written = write(chart)
    let reloaded: StateChart
    do {
        reloaded = try StateChart(data: Data(written.utf8), source: "rewritten")
    } catch {
        fatalError("a loaded chart does not load once written back: \(error)\n\(written)")
    }
    precondition(reloaded == chart, "a chart written back loads differently:\n\(written)")
}

/// The chart as SCXML in the loader's subset.
func write(_ chart: StateChart) -> String {
    var text = #"<scxml xmlns="http://www.w3.org/2005/07/scxml" version="1.0""#
    text += #" name="\#(escape(chart.name))" initial="\#(escape(chart.initial))">"#
    for id in chart.stateIDs {
        text += #"<state id="\#(escape(id))">"#
        for transition in chart.transitions where transition.source == id {
            text += #"<transition event="\#(escape(transition.event))""#
            if let target = transition.target { text += #" target="\#(escape(target))""# }
            if let condition = transition.condition { text += #" cond="\#(escape(condition))""# }
            text += "/>"
        }
        text += "</state>"
    }
    return text + "</scxml>\n"
}

/// An attribute value with every character that XML would change or reject as a reference.
func escape(_ value: String) -> String {
    var result = ""
    for scalar in value.unicodeScalars {
        switch scalar {
        case "&": result += "&amp;"
        case "<": result += "&lt;"
        case ">": result += "&gt;"
        case "\"": result += "&quot;"
        case "\t", "\n", "\r": result += "&#\(scalar.value);"
        default: result.unicodeScalars.append(scalar)
        }
    }
    return result
}

#if SYMORVA_FUZZING
    /// libFuzzer's entry: one input per call.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(FuzzDriver.bytes(data, size))
        return 0
    }

    /// The program's entry (SwiftPM links `main` to `<module>_main`): libFuzzer's driver.
    @_cdecl("fuzz_scxml_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "scxml", fuzzOne) }
    }
#endif
