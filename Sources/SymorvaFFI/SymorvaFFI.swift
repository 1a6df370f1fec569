// The C library (`include/symorva.h`): the contract's engine behind a handful of C functions
// that move JSON text. No Swift type crosses the boundary: clients are integer ids, text is
// UTF-8 that the caller owns (arguments) or frees with `symorva_free` (results).
import Dispatch
import SymorvaContract
import SymorvaKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The clients of the process by id, and the next id (never reused).
private let clients = Lock<(byID: [Int32: ContractClient], next: Int32)>(([:], 1))

/// The host's log callback and its context pointer.
///
/// `@unchecked Sendable`: a C function pointer and an opaque pointer the host gave us; we never
/// dereference the context, only hand it back to the host's callback, and the host's header
/// contract says the callback may run on any thread.
private struct LogCallback: @unchecked Sendable {
    let function: @convention(c) (Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void
    let context: UnsafeMutableRawPointer?
}

private let logSettings = Lock<(level: LogLevel?, callback: LogCallback?)>((.warning, nil))

/// Forwards every client's log lines to the host's callback (read at each line, so that a
/// change of callback applies at once).
private struct CallbackLogSink: LogSink {
    func write(_ record: LogRecord) {
        let (level, callback) = logSettings.withLock { ($0.level, $0.callback) }
        guard let callback, let level, record.level >= level else { return }
        let line = "\(record.category): \(record.message)"
        line.withCString { callback.function(Int32(record.level.rawValue), $0, callback.context) }
    }
}

/// A `char *` the caller owns: `bytes` and a terminating NUL, from `malloc`.
private func cString(_ bytes: [UInt8]) -> UnsafeMutablePointer<CChar>? {
    guard let memory = malloc(bytes.count + 1)?.assumingMemoryBound(to: CChar.self) else { return nil }
    bytes.withUnsafeBytes { buffer in
        if let base = buffer.baseAddress { memcpy(memory, base, bytes.count) }
    }
    memory[bytes.count] = 0
    return memory
}

/// The bytes of a C string, `nil` for NULL.
private func bytes(_ text: UnsafePointer<CChar>?) -> UnsafeBufferPointer<UInt8>? {
    guard let text else { return nil }
    return UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: strlen(text))
}

/// Runs `body` to completion on a task and blocks the calling (host) thread until it is done.
private func blocking<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Lock<T?>(nil)
    Task {
        let value = await body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0 }!
}

/// `symorva_client_create`: a client from a manifest path and a data folder; its id (> 0) or a
/// negative `SYMORVA_ERROR_…` (include/symorva.h). Blocks while the community launches.
@_cdecl("symorva_client_create")
public func symorva_client_create(_ manifestPath: UnsafePointer<CChar>?, _ dataDirectory: UnsafePointer<CChar>?)
    -> Int32
{
    guard let manifestPath, let dataDirectory else { return -3 }
    let manifest = String(cString: manifestPath)
    let data = String(cString: dataDirectory)
    let level = logSettings.withLock { $0.level }
    let logCenter = LogCenter(threshold: level ?? .error, sinks: [CallbackLogSink()])
    let opened: ContractClient? = blocking {
        try? await ContractClient.open(manifestPath: manifest, dataDirectory: data, logCenter: logCenter)
    }
    guard let opened else { return -2 }
    return clients.withLock { clients in
        let id = clients.next
        clients.next += 1
        clients.byID[id] = opened
        return id
    }
}

/// `symorva_client_send`: hands one JSON request to the client; its answer comes through
/// `symorva_client_receive`. `SYMORVA_ERROR_NO_CLIENT` after destroy.
@_cdecl("symorva_client_send")
public func symorva_client_send(_ clientID: Int32, _ request: UnsafePointer<CChar>?) -> Int32 {
    guard let request = bytes(request) else { return -3 }
    guard let client = clients.withLock({ $0.byID[clientID] }) else { return -1 }
    client.engine.send(request)
    return 0
}

/// `symorva_client_receive`: the client's next message within `timeout` seconds (the caller frees
/// it with `symorva_free`), or `NULL`. Safe from several threads at once.
@_cdecl("symorva_client_receive")
public func symorva_client_receive(_ clientID: Int32, _ timeout: Double) -> UnsafeMutablePointer<CChar>? {
    // The client stays alive while this thread holds it, even if another destroys it meanwhile:
    // destroy closes the outbox, which wakes this wait.
    guard let client = clients.withLock({ $0.byID[clientID] }) else { return nil }
    let seconds = timeout.isFinite ? min(max(timeout, 0), 86_400) : 0
    guard let message = client.engine.outbox.receive(timeout: .milliseconds(Int64(seconds * 1000))) else { return nil }
    return cString(message)
}

/// The engine `execute` runs on: the synchronous rules, no client.
private let rules = ContractEngine(methods: .synchronousRules)

/// `symorva_execute`: runs a synchronous request (`message.split`, `amount.parse`) at once and
/// returns its answer (the caller frees it with `symorva_free`).
@_cdecl("symorva_execute")
public func symorva_execute(_ request: UnsafePointer<CChar>?) -> UnsafeMutablePointer<CChar>? {
    guard let request = bytes(request) else {
        return cString(rules.execute(Array(#"{"method": null}"#.utf8)))
    }
    return cString(rules.execute(request))
}

/// `symorva_client_destroy`: closes the client (`{"closed": true}` last), stops every session,
/// wakes waiting receivers. Blocks until done; harmless twice.
@_cdecl("symorva_client_destroy")
public func symorva_client_destroy(_ clientID: Int32) {
    guard let client = clients.withLock({ $0.byID.removeValue(forKey: clientID) }) else { return }
    blocking { await client.close() }
}

/// `symorva_free`: releases a string this library returned.
@_cdecl("symorva_free")
public func symorva_free(_ text: UnsafeMutablePointer<CChar>?) {
    free(text)
}

/// `symorva_set_log_level`: the level below which log lines are dropped (0 trace … 5 error,
/// 6 none), for every client.
@_cdecl("symorva_set_log_level")
public func symorva_set_log_level(_ level: Int32) {
    // SYMORVA_LOG_NONE (6), or anything out of range, is no level: nothing is forwarded.
    let threshold = LogLevel(rawValue: Int(level))
    logSettings.withLock { $0.level = threshold }
    let open = clients.withLock { Array($0.byID.values) }
    for client in open { client.logCenter.threshold = threshold ?? .error }
}

/// `symorva_set_log_callback`: the function that receives every client's log lines (`NULL`
/// removes it).
@_cdecl("symorva_set_log_callback")
public func symorva_set_log_callback(
    _ callback: (@convention(c) (Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void)?,
    _ context: UnsafeMutableRawPointer?
) {
    logSettings.withLock { $0.callback = callback.map { LogCallback(function: $0, context: context) } }
}
