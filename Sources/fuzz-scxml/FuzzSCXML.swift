// Fuzz target: the SCXML chart loader (`StateChart(data:)` in SymorvaTesting). Besides not
// crashing: a chart that loads is valid (unique state ids, a known initial state, known
// targets, no duplicate arrow), and written back as SCXML it loads to an equal chart.
import Foundation
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
        fuzzOne(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }

    /// libFuzzer's driver (`FuzzerInterface.h`), called from the entry SwiftPM links as `main`.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ body: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// The program's entry: SwiftPM links an executable's `main` to `<module>_main`, which
    /// replaces libFuzzer's own `main`, so this one starts libFuzzer's driver.
    @_cdecl("fuzz_scxml_main")
    public func fuzzerMain(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
    ) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: replays every file of the corpus (`Fuzz/Corpus/scxml`, or the directories
    /// and files given as arguments) through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            let roots = arguments.isEmpty ? ["Fuzz/Corpus/scxml"] : arguments
            var count = 0
            for root in roots {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("fuzz-scxml: no such corpus: \(root)\n".utf8))
                    exit(2)
                }
                let files =
                    isDirectory.boolValue
                    ? ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted().map {
                        root + "/" + $0
                    }
                    : [root]
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file) else { continue }
                    fuzzOne(Array(data))
                    count += 1
                }
            }
            print("fuzz-scxml: replayed \(count) inputs")
        }
    }
#endif
