// Fuzz target: the contract's request reader and engine (`ContractEngine.send` and `execute`,
// what `symorva_client_send`, `symorva_execute` and `symorva serve --stdio` hand every request
// to), with the synchronous rules and the built-in methods. Besides not crashing: every request
// is answered exactly once, the answer is one JSON object with `id` and either `result` or a
// typed `error`, and `execute` answers the same way.
import SymorvaContract
import SymorvaFuzzing
import SymorvaMatrix

let engine = ContractEngine(methods: .synchronousRules)

/// Checks one answer message; traps on a broken invariant.
func checkAnswer(_ bytes: [UInt8]) {
    precondition(!bytes.contains(UInt8(ascii: "\n")), "a message with a raw newline breaks JSON lines")
    guard let message = try? JSONValue(parsing: bytes), case .object(let members) = message else {
        preconditionFailure("an answer that is not a JSON object")
    }
    precondition(members["id"] != nil, "an answer without id")
    switch (members["result"], members["error"]) {
    case (_?, nil): break
    case (nil, .object(let error)?):
        guard case .string? = error["domain"], case .string? = error["code"], case .string? = error["message"] else {
            preconditionFailure("an error without domain, code and message")
        }
    default: preconditionFailure("an answer needs exactly one of result and error")
    }
}

/// Checks one input; traps on a broken invariant.
func fuzzOne(_ bytes: [UInt8]) {
    engine.send(bytes)
    guard let answer = engine.outbox.receive(timeout: .seconds(5)) else {
        preconditionFailure("a request without an answer")
    }
    // Built-ins and synchronous rules answer on the caller's thread: nothing else may follow.
    precondition(engine.outbox.count == 0, "two answers to one request")
    checkAnswer(answer)
    checkAnswer(engine.execute(bytes))
}

#if SYMORVA_FUZZING
    /// libFuzzer's entry: one input per call.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        fuzzOne(FuzzDriver.bytes(data, size))
        return 0
    }

    /// The program's entry (SwiftPM links `main` to `<module>_main`): libFuzzer's driver.
    @_cdecl("fuzz_contract_main")
    public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        FuzzDriver.run(argc, argv, fuzzerTestOneInput)
    }
#else
    /// Without libFuzzer: the corpus replayed through the same function, as a smoke check.
    @main
    enum CorpusReplay {
        static func main() { FuzzDriver.replayCorpus(of: "contract", fuzzOne) }
    }
#endif
