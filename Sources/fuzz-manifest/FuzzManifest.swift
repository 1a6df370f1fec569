// Fuzz target: the community manifest parser (`SymorvaConfiguration(jsonData:)` and its
// `ManifestReader`). There is no manifest writer, so besides not crashing: reading is
// deterministic, a JSON error's line and column point inside the input, and a field error
// names a field path.
import Foundation
import SymorvaFeatureKit

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
    @_cdecl("fuzz_manifest_main")
    public func fuzzerMain(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
    ) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: replays every file of the corpus (`Fuzz/Corpus/manifest`, or the directories
    /// and files given as arguments) through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            let roots = arguments.isEmpty ? ["Fuzz/Corpus/manifest"] : arguments
            var count = 0
            for root in roots {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("fuzz-manifest: no such corpus: \(root)\n".utf8))
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
            print("fuzz-manifest: replayed \(count) inputs")
        }
    }
#endif
