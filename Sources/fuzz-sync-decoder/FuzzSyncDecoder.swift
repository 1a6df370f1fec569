// Fuzz target: the `/sync` decoder, the `/messages` page decoder and the JSON scanner under
// them (through `RawJSON`). Besides not crashing, a document that decodes must decode to the
// same summary when surrounded by whitespace (every range moves, nothing else changes), every
// range must lie inside the document, and an error's offset must lie inside the input.
import Foundation
import SymorvaChatStore
import SymorvaFuzzing

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    let padded = [UInt8(ascii: " ")] + bytes + [UInt8(ascii: "\n")]
    switch (Result { () throws(SyncDecodingError) in try SyncResponseDecoder.decode(bytes) }) {
    case .success(let body):
        let summary = summarize(body, count: bytes.count)
        guard let again = try? SyncResponseDecoder.decode(padded) else {
            fatalError("decodes, but not with whitespace around it")
        }
        precondition(summarize(again, count: padded.count) == summary, "summary changed with whitespace around")
    case .failure(let error):
        checkOffset(error, count: bytes.count)
    }
    switch (Result { () throws(SyncDecodingError) in try SyncResponseDecoder.decodeMessages(bytes) }) {
    case .success(let page):
        let summary = summarize(page, count: bytes.count)
        guard let again = try? SyncResponseDecoder.decodeMessages(padded) else {
            fatalError("page decodes, but not with whitespace around it")
        }
        precondition(summarize(again, count: padded.count) == summary, "page summary changed with whitespace around")
    case .failure(let error):
        checkOffset(error, count: bytes.count)
    }
    bytes.withUnsafeBytes { json in
        RawJSON.forEachMember(in: json) { _, range in checkRange(range, count: json.count) }
        RawJSON.forEachElement(in: json) { range in checkRange(range, count: json.count) }
        _ = RawJSON.string("body", in: json)
        _ = RawJSON.integer("origin_server_ts", in: json)
        if let range = RawJSON.value("content", in: json) { checkRange(range, count: json.count) }
    }
}

func checkOffset(_ error: SyncDecodingError, count: Int) {
    switch error {
    case .syntax(let offset), .tooDeep(let offset), .unexpectedStructure(let offset):
        precondition(offset >= 0 && offset <= count, "error offset \(offset) outside an input of \(count) bytes")
    case .missingNextBatch, .missingChunk: break
    }
}

func checkRange(_ range: Range<Int>, count: Int) {
    precondition(range.lowerBound >= 0 && range.upperBound <= count, "range \(range) outside \(count) bytes")
}

/// Everything decoded but the byte offsets, and each event's bytes (so ranges are compared by
/// what they cover).
func summarize(_ body: SyncResponseBody, count: Int) -> [String] {
    var lines = ["next_batch \(body.nextBatch)", "changed \(body.head.deviceListsChanged)"]
    lines.append("left \(body.head.deviceListsLeft) keys \(body.head.oneTimeKeyCounts.sorted { $0.key < $1.key })")
    let text = { (range: Range<Int>) -> String in body.text(range) }
    for event in body.head.accountData + body.head.toDevice { lines.append(describe(event, count: count, text)) }
    for room in body.rooms {
        lines.append(
            "room \(room.roomID) \(room.membership) \(room.isLimited) \(room.previousBatch ?? "-") "
                + "\(room.heroes ?? []) \(String(describing: room.joinedMemberCount)) "
                + "\(String(describing: room.invitedMemberCount)) \(String(describing: room.notificationCount)) "
                + "\(String(describing: room.highlightCount))")
        for event in room.state + room.timeline + room.ephemeral + room.accountData {
            lines.append(describe(event, count: count, text))
        }
    }
    for malformed in body.malformedEvents {
        checkRange(malformed.range, count: count)
        lines.append(
            "malformed \(malformed.section) \(malformed.roomID ?? "-") \(malformed.reason) \(text(malformed.range))")
    }
    return lines
}

func summarize(_ page: MessagesPage, count: Int) -> [String] {
    var lines = ["start \(page.start ?? "-") end \(page.end ?? "-")"]
    let text = { (range: Range<Int>) -> String in page.text(range) }
    for event in page.chunk + page.state { lines.append(describe(event, count: count, text)) }
    for malformed in page.malformedEvents {
        checkRange(malformed.range, count: count)
        lines.append("malformed \(malformed.section) \(malformed.reason) \(text(malformed.range))")
    }
    return lines
}

func describe(_ event: SyncEvent, count: Int, _ text: (Range<Int>) -> String) -> String {
    checkRange(event.range, count: count)
    precondition(
        event.content.lowerBound >= event.range.lowerBound && event.content.upperBound <= event.range.upperBound,
        "content \(event.content) outside its event \(event.range)")
    return "event \(event.eventID ?? "-") \(event.type) \(event.sender ?? "-") \(event.originServerTS) "
        + "\(event.stateKey ?? "-") \(event.transactionID ?? "-") \(String(describing: event.relation)) "
        + "\(event.redacts ?? "-") \(text(event.range)) \(text(event.content))"
}

#if SYMORVA_FUZZING
    /// libFuzzer's entry: one input per call.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(FuzzDriver.bytes(data, size))
        return 0
    }

    /// The program's entry (SwiftPM links `main` to `<module>_main`): libFuzzer's driver.
    @_cdecl("fuzz_sync_decoder_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "sync-decoder", fuzzOne) }
    }
#endif
