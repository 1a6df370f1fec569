// Fuzz target: raw-JSON redaction (`RawJSON.redactedContent`). The first byte picks the event
// type, the rest is the content. Besides not crashing: only the keys the Matrix redaction
// algorithm (room version 11) keeps survive, `m.room.create` is kept whole, other types end up
// `{}`; for content that is a JSON object the result is a JSON object too, and redacting it
// again changes nothing.
import Foundation
import SymorvaChatStore
import SymorvaFuzzing

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
        fuzzOne(FuzzDriver.bytes(data, size))
        return 0
    }

    /// The program's entry (SwiftPM links `main` to `<module>_main`): libFuzzer's driver.
    @_cdecl("fuzz_redaction_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "redaction", fuzzOne) }
    }
#endif
