import Foundation

/// What every fuzz target (`Sources/fuzz-<target>/`) shares around its one test function.
///
/// Built with `-DSYMORVA_FUZZING` and libFuzzer (`Scripts/fuzz`), a target's `main` starts
/// libFuzzer's driver with `run(_:_:_:)`; built normally, it replays its corpus through the same
/// function with ``replayCorpus(of:_:)``, which is what `Scripts/test` runs as a smoke check.
public enum FuzzDriver {
    /// The input libFuzzer hands to `LLVMFuzzerTestOneInput`, as bytes.
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    }

    #if SYMORVA_FUZZING
        /// Starts libFuzzer's driver over `testOneInput` with the program's arguments. A target's
        /// `main` calls it: SwiftPM links an executable's `main` to `<module>_main`, which replaces
        /// libFuzzer's own `main`.
        public static func run(
            _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
            _ testOneInput: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
        ) -> CInt {
            var count = argc
            var arguments = argv
            return runFuzzerDriver(&count, &arguments, testOneInput)
        }
    #endif

    /// Replays every file of `Fuzz/Corpus/<target>` (or of the files and folders given as the
    /// program's arguments) through `body`, then prints how many; exits with status 2 when a
    /// corpus is missing.
    public static func replayCorpus(of target: String, _ body: ([UInt8]) -> Void) {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let roots = arguments.isEmpty ? ["Fuzz/Corpus/\(target)"] : arguments
        var count = 0
        for root in roots {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
                FileHandle.standardError.write(Data("fuzz-\(target): no such corpus: \(root)\n".utf8))
                exit(2)
            }
            let files =
                isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted().map { root + "/" + $0 }
                : [root]
            for file in files {
                guard let data = FileManager.default.contents(atPath: file) else { continue }
                body(Array(data))
                count += 1
            }
        }
        print("fuzz-\(target): replayed \(count) inputs")
    }
}

#if SYMORVA_FUZZING
    /// libFuzzer's driver (`FuzzerInterface.h`).
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ body: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt
#endif
