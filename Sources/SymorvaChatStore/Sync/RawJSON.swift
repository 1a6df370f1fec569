import SymorvaMatrix

/// Reads single fields out of stored raw JSON (an event's content), without decoding the rest.
///
/// The store keeps content as the server's bytes and decodes a field only when something needs
/// it: a room's name when its `m.room.name` event arrives, a message body for the conversation
/// list preview, a member's display name for the heroes. Every function is lenient: JSON that
/// is not an object, or a field of the wrong type, reads as `nil`.
package enum RawJSON {
    /// The string member `key` of the object `json`.
    package static func string(_ key: StaticString, in json: UnsafeRawBufferPointer) -> String? {
        var scanner = JSONScanner(json)
        guard (try? seek(key, in: &scanner)) == true else { return nil }
        return try? scanner.readStringOrSkip()
    }

    /// The integer member `key` of the object `json`.
    package static func integer(_ key: StaticString, in json: UnsafeRawBufferPointer) -> Int64? {
        var scanner = JSONScanner(json)
        guard (try? seek(key, in: &scanner)) == true else { return nil }
        return (try? scanner.readIntegerOrSkip()) ?? nil
    }

    /// The byte range (within `json`) of member `key`'s value, whatever its type.
    package static func value(_ key: StaticString, in json: UnsafeRawBufferPointer) -> Range<Int>? {
        var scanner = JSONScanner(json)
        guard (try? seek(key, in: &scanner)) == true else { return nil }
        return try? scanner.readRawValue()
    }

    /// The string member `key` of the object `json` (bytes).
    package static func string(_ key: StaticString, in json: [UInt8]) -> String? {
        json.withUnsafeBytes { string(key, in: $0) }
    }

    /// Calls `body` with each member of the object `json`: its key and its value's byte range.
    /// Stops quietly at the first syntax error.
    package static func forEachMember(
        in json: UnsafeRawBufferPointer, _ body: (String, Range<Int>) -> Void
    ) {
        var scanner = JSONScanner(json)
        guard scanner.peek() == UInt8(ascii: "{"), var cursor = try? scanner.beginObject() else { return }
        while let key = try? scanner.nextKey(&cursor) {
            guard let range = try? scanner.readRawValue() else { return }
            body(scanner.string(of: key), range)
        }
    }

    /// Calls `body` with the byte range of each element of the array `json`.
    package static func forEachElement(in json: UnsafeRawBufferPointer, _ body: (Range<Int>) -> Void) {
        var scanner = JSONScanner(json)
        guard scanner.peek() == UInt8(ascii: "["), var cursor = try? scanner.beginArray() else { return }
        while (try? scanner.nextElement(&cursor)) == true {
            guard let range = try? scanner.readRawValue() else { return }
            body(range)
        }
    }

    /// Moves `scanner` to the value of member `key` of the object it is at.
    private static func seek(_ key: StaticString, in scanner: inout JSONScanner) throws(JSONScanError) -> Bool {
        guard scanner.peek() == UInt8(ascii: "{") else { return false }
        var cursor = try scanner.beginObject()
        while let candidate = try scanner.nextKey(&cursor) {
            if scanner.key(candidate, is: key) { return true }
            try scanner.skipValue()
        }
        return false
    }

    // MARK: Redaction

    /// The content left after redacting an event of `type` (Matrix room version 11 rules):
    /// only the keys that room authorisation needs survive; everything else, message bodies
    /// included, is removed.
    package static func redactedContent(type: String, content: UnsafeRawBufferPointer) -> [UInt8] {
        let kept: Set<String>
        switch type {
        case "m.room.member": kept = ["membership", "join_authorised_via_users_server", "third_party_invite"]
        case "m.room.create": return Array(content)
        case "m.room.join_rules": kept = ["join_rule", "allow"]
        case "m.room.power_levels":
            kept = [
                "ban", "events", "events_default", "invite", "kick", "redact", "state_default", "users",
                "users_default",
            ]
        case "m.room.history_visibility": kept = ["history_visibility"]
        case "m.room.redaction": kept = ["redacts"]
        default: return Array("{}".utf8)
        }
        var output: [UInt8] = [UInt8(ascii: "{")]
        forEachMember(in: content) { key, range in
            guard kept.contains(key) else { return }
            if output.count > 1 { output.append(UInt8(ascii: ",")) }
            JSONObjectWriter.appendQuoted(key, to: &output)
            output.append(UInt8(ascii: ":"))
            if type == "m.room.member" && key == "third_party_invite" {
                // Only `signed` survives inside a third-party invite.
                output += Array("{".utf8)
                let inner = UnsafeRawBufferPointer(rebasing: content[range])
                if let signed = value("signed", in: inner) {
                    output += Array("\"signed\":".utf8)
                    output += inner[signed]
                }
                output.append(UInt8(ascii: "}"))
            } else {
                output += content[range]
            }
        }
        output.append(UInt8(ascii: "}"))
        return output
    }
}
