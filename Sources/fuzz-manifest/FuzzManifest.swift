// Fuzz target: the community manifest parser (`SymorvaConfiguration(jsonData:)` and its
// `ManifestReader`). There is no manifest writer, so besides not crashing: reading is
// deterministic, a JSON error's line and column point inside the input, and a field error
// names a field path.
import Foundation
import SymorvaFeatureKit
import SymorvaFuzzing

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    let data = Data(bytes)
    let first = Result { () throws(ConfigurationError) in try SymorvaConfiguration(jsonData: data) }
    let second = Result { () throws(ConfigurationError) in try SymorvaConfiguration(jsonData: data) }
    precondition(first == second, "reading the same manifest twice gave different results")
    guard case .failure(let error) = first else { return }
    switch error {
    case .malformedJSON(let line, let column, _):
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        precondition(line >= 1 && line <= lines.count, "line \(line) outside \(lines.count) lines")
        precondition(
            column >= 1 && column <= lines[line - 1].count + 1,
            "column \(column) outside line \(line) of \(lines[line - 1].count) bytes")
    case .missingField(let path), .invalidField(let path, _), .insecureURL(let path):
        precondition(!path.isEmpty, "a field error without a path")
    case .unsupportedVersion: break
    case .unreadable: fatalError("bytes cannot be unreadable")
    }
}

#if SYMORVA_FUZZING
    /// libFuzzer's entry: one input per call.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(FuzzDriver.bytes(data, size))
        return 0
    }

    /// The program's entry (SwiftPM links `main` to `<module>_main`): libFuzzer's driver.
    @_cdecl("fuzz_manifest_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "manifest", fuzzOne) }
    }
#endif
