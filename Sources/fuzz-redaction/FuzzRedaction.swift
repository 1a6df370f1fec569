// Fuzz target: raw-JSON redaction (`RawJSON.redactedContent`). The first byte picks the event
// type, the rest is the content. Besides not crashing: only the keys the Matrix redaction
// algorithm (room version 11) keeps survive, `m.room.create` is kept whole, other types end up
// `{}`; for content that is a JSON object the result is a JSON object too, and redacting it
// again changes nothing.
import Foundation
import SymorvaChatStore

/// The keys each type keeps, as the spec lists them (client-server API, "Redactions", v11).
let keptKeys: [String: Set<String>] = [
    "m.room.member": ["membership", "join_authorised_via_users_server", "third_party_invite"],
    "m.room.join_rules": ["join_rule", "allow"],
    "m.room.power_levels": [
        "ban", "events", "events_default", "invite", "kick", "redact", "state_default", "users", "users_default",
    ],
    "m.room.history_visibility": ["history_visibility"],
    "m.room.redaction": ["redacts"],
]
let types = [
    "m.room.member", "m.room.create", "m.room.join_rules", "m.room.power_levels", "m.room.history_visibility",
    "m.room.redaction", "m.room.message", "m.reaction",
]

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let type = types[Int(first) % types.count]
    let content = Array(bytes.dropFirst())
    let output = content.withUnsafeBytes { RawJSON.redactedContent(type: type, content: $0) }
    guard let kept = keptKeys[type] else {
        precondition(type != "m.room.create" || output == content, "m.room.create content changed")
        precondition(type == "m.room.create" || output == Array("{}".utf8), "\(type) kept content")
        return
    }
    output.withUnsafeBytes { json in
        RawJSON.forEachMember(in: json) { key, range in
            precondition(kept.contains(key), "\(type) kept \(key)")
            if type == "m.room.member" && key == "third_party_invite" {
                RawJSON.forEachMember(in: UnsafeRawBufferPointer(rebasing: json[range])) { inner, _ in
                    precondition(inner == "signed", "third_party_invite kept \(inner)")
                }
            }
        }
    }
    let isObject = { (bytes: [UInt8]) -> Bool in
        (try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])) is [String: Any]
    }
    guard isObject(content) else { return }
    precondition(isObject(output), "the redacted content of an object is not a JSON object")
    let twice = output.withUnsafeBytes { RawJSON.redactedContent(type: type, content: $0) }
    precondition(twice == output, "redacting twice changed the content")
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
    @_cdecl("fuzz_redaction_main")
    public func fuzzerMain(
        _ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
    ) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: replays every file of the corpus (`Fuzz/Corpus/redaction`, or the directories
    /// and files given as arguments) through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            let roots = arguments.isEmpty ? ["Fuzz/Corpus/redaction"] : arguments
            var count = 0
            for root in roots {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: root, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("fuzz-redaction: no such corpus: \(root)\n".utf8))
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
            print("fuzz-redaction: replayed \(count) inputs")
        }
    }
#endif
