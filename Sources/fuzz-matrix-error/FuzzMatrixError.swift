// Fuzz target: the Matrix error decoder (`MatrixError.decode`). The first two bytes pick the
// status, the next line is a `Retry-After` header (when the input has one), the rest is the
// body. Besides not crashing: an error exists exactly for statuses of 400 and more, keeps the
// status, carries the body's `errcode` when the body is an error object, and never a negative
// delay.
import Foundation
import SymorvaFuzzing
import SymorvaHTTP
import SymorvaMatrix

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    guard bytes.count >= 2 else { return }
    let status = 100 + (Int(bytes[0]) << 8 | Int(bytes[1])) % 500
    var rest = Array(bytes.dropFirst(2))
    var headers = HTTPHeaders()
    if let newline = rest.firstIndex(of: UInt8(ascii: "\n")) {
        headers = HTTPHeaders([("Retry-After", String(decoding: rest[..<newline], as: UTF8.self))])
        rest = Array(rest[(newline + 1)...])
    }
    let error = MatrixError.decode(from: HTTPResponse(status: status, headers: headers, body: rest))
    guard status >= 400 else {
        precondition(error == nil, "an error for status \(status)")
        return
    }
    guard let error else { fatalError("no error for status \(status)") }
    precondition(error.status == status, "status \(status) became \(error.status)")
    if case .delay(let delay) = error.retryAfter { precondition(delay >= .zero, "negative delay \(delay)") }
    _ = error.description
    // The oracle for `errcode` is a strict parse: a body with duplicate keys has no single
    // `errcode` (JSONSerialization keeps the last, the decoder the first), so it is not checked.
    let strict = (try? JSONValue(parsing: rest)) != nil
    let object = try? JSONSerialization.jsonObject(with: Data(rest)) as? [String: Any]
    if strict, let errcode = object?["errcode"] as? String, error.code != .malformedBody {
        precondition(error.code.errcode == errcode, "errcode \(errcode) became \(error.code.errcode)")
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
    @_cdecl("fuzz_matrix_error_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "matrix-error", fuzzOne) }
    }
#endif
