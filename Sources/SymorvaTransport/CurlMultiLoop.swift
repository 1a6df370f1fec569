import CCurl
import CCurlShim
import SymorvaRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Counters the multi loop keeps for ``CurlTransport/metrics``.
final class CurlCounters: Sendable {
    let started = Atomic<Int>(0)
    let completed = Atomic<Int>(0)
    let connectionsOpened = Atomic<Int>(0)
    let connectionsReused = Atomic<Int>(0)
}

/// One libcurl multi handle driven by one dedicated thread.
///
/// Callers never block: they queue commands (add a transfer, cancel a transfer, shut down)
/// under a mutex and wake the thread with `curl_multi_wakeup`. The thread waits in
/// `curl_multi_poll`, drives every transfer with `curl_multi_perform`, and resumes each caller
/// exactly once when its transfer completes or is cancelled. Because every easy handle runs
/// in the same multi handle, connections (and HTTP/2 streams) are reused across requests.
///
/// Safety of `@unchecked Sendable` (a C boundary object): the multi handle and `active` are
/// touched only by the loop thread, except `curl_multi_wakeup`, which libcurl documents as
/// callable from any thread. Commands cross threads only through `inbox`, a mutex.
final class CurlMultiLoop: @unchecked Sendable {
    private struct Inbox {
        var added: [CurlTransfer] = []
        var cancelled: [CurlTransfer] = []
        var shutdownRequested = false
    }

    let counters = CurlCounters()
    private let multi: UnsafeMutableRawPointer
    private let inbox = Mutex(Inbox())
    private let logger: Logger
    /// Loop thread only.
    private var active: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(maximumConnectionsPerHost: Int, logger: Logger) {
        CurlGlobal.ensureInitialized()
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        self.multi = multi
        self.logger = logger
        symorva_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        symorva_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maximumConnectionsPerHost)
        DedicatedThread.start { [self] in run() }
    }

    /// Queues `transfer` for the loop; its continuation must already be set.
    func submit(_ transfer: CurlTransfer) {
        inbox.withLock { $0.added.append(transfer) }
        curl_multi_wakeup(multi)
    }

    /// Aborts `transfer` if it is running, or makes it finish as cancelled when it arrives.
    func cancel(_ transfer: CurlTransfer) {
        transfer.cancelRequested.store(true, ordering: .sequentiallyConsistent)
        inbox.withLock { $0.cancelled.append(transfer) }
        curl_multi_wakeup(multi)
    }

    /// Stops the thread after cancelling what is left; the multi handle is cleaned up there.
    func shutdown() {
        inbox.withLock { $0.shutdownRequested = true }
        curl_multi_wakeup(multi)
    }

    // MARK: Loop thread

    private func run() {
        while true {
            let commands = inbox.withLock { inbox in
                defer { inbox = Inbox(shutdownRequested: inbox.shutdownRequested) }
                return inbox
            }
            for transfer in commands.added { attach(transfer) }
            for transfer in commands.cancelled { abort(transfer) }
            if commands.shutdownRequested { break }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectCompletions()
            var ready: Int32 = 0
            curl_multi_poll(multi, nil, 0, 1000, &ready)
        }
        for transfer in Array(active.values) { abort(transfer) }
        curl_multi_cleanup(multi)
    }

    private func attach(_ transfer: CurlTransfer) {
        guard !transfer.cancelRequested.load(ordering: .sequentiallyConsistent) else {
            transfer.finish(.failure(.cancelled))
            return
        }
        let code = curl_multi_add_handle(multi, transfer.easy)
        guard code == CURLM_OK else {
            let message = curl_multi_strerror(code).map { String(cString: $0) } ?? "unknown"
            transfer.finish(.failure(.other(code: Int(code.rawValue), message: message)))
            return
        }
        active[transfer.easy] = transfer
        counters.started.add(1, ordering: .relaxed)
    }

    private func abort(_ transfer: CurlTransfer) {
        guard active.removeValue(forKey: transfer.easy) != nil else { return }
        // Removing an unfinished transfer closes its connection: the server sees it go away.
        curl_multi_remove_handle(multi, transfer.easy)
        logger.debug("transfer cancelled")
        transfer.finish(.failure(.cancelled))
    }

    private func collectCompletions() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = message.pointee.data.result
            guard let transfer = active.removeValue(forKey: easy) else { continue }
            curl_multi_remove_handle(multi, easy)
            complete(transfer, code: code)
        }
    }

    private func complete(_ transfer: CurlTransfer, code: CURLcode) {
        counters.completed.add(1, ordering: .relaxed)
        let newConnections = transfer.newConnectionCount()
        if newConnections > 0 {
            counters.connectionsOpened.add(newConnections, ordering: .relaxed)
        } else if code == CURLE_OK {
            counters.connectionsReused.add(1, ordering: .relaxed)
        }
        if transfer.cancelRequested.load(ordering: .sequentiallyConsistent) {
            transfer.finish(.failure(.cancelled))
        } else if code == CURLE_OK {
            let response = transfer.response()
            logger.debug("transfer completed status=\(response.status) bytes=\(response.body.count)")
            transfer.finish(.success(response))
        } else {
            let error = CurlTransfer.map(code, limit: transfer.limit, exceededLimit: transfer.exceededLimit)
            logger.debug("transfer failed error=\(error)")
            transfer.finish(.failure(error))
        }
    }
}

/// `curl_global_init`, once per process.
enum CurlGlobal {
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func ensureInitialized() {
        precondition(initialized, "curl_global_init failed")
    }
}

/// Starts a detached POSIX thread that runs `body` once.
enum DedicatedThread {
    private final class Box: Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func start(_ body: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Box(body)).toOpaque()
        #if canImport(Darwin)
            var thread: pthread_t?
        #else
            var thread = pthread_t()
        #endif
        let result = pthread_create(
            &thread, nil,
            { context in
                let box = Unmanaged<Box>.fromOpaque(context!).takeRetainedValue()
                box.body()
                return nil
            }, context)
        precondition(result == 0, "pthread_create failed: \(result)")
        #if canImport(Darwin)
            pthread_detach(thread!)
        #else
            pthread_detach(thread)
        #endif
    }
}
