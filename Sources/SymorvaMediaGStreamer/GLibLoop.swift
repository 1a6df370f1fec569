#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import SymorvaRuntime
    import Synchronization

    /// The GLib main loop of the media engine, on a thread of its own.
    ///
    /// Every GStreamer call of the engine (building and starting pipelines, webrtcbin's action
    /// signals, bus watches) runs here, never on a caller's thread, a cooperative-pool thread or
    /// inside a host. The loop runs a private `GMainContext` (not GLib's global default one, which
    /// an app may run itself) for the whole process: started on first use, never stopped.
    final class GLibLoop: Sendable {
        /// The process's loop.
        static let shared = GLibLoop()

        /// The loop's context. `nonisolated(unsafe)`: a `GMainContext` is thread-safe (GLib
        /// documents `g_main_context_invoke` as callable from any thread); the pointer itself is
        /// written once, before `shared` is published.
        nonisolated(unsafe) let context: OpaquePointer
        private let threadID = Atomic<UInt>(0)

        private init() {
            context = g_main_context_new()
            let handle = ContextHandle(pointer: context)
            DedicatedThread.start { [self] in
                g_main_context_push_thread_default(handle.pointer)
                let loop = g_main_loop_new(handle.pointer, 0)
                threadID.store(DedicatedThread.currentID(), ordering: .releasing)
                g_main_loop_run(loop)
            }
        }

        /// Whether the caller is on the loop's thread.
        var isCurrent: Bool { DedicatedThread.currentID() == threadID.load(ordering: .acquiring) }

        /// Runs `body` on the loop's thread, soon.
        func post(_ body: @escaping @Sendable () -> Void) {
            let box = Unmanaged.passRetained(Job(body)).toOpaque()
            symorva_glib_invoke(
                context,
                { raw in
                    let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
                    job.body()
                }, box)
        }

        /// Runs `body` on the loop's thread and returns its result to the caller's task.
        func run<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
            await withCheckedContinuation { continuation in
                post { continuation.resume(returning: body()) }
            }
        }

        /// The context pointer handed to the loop's thread. `@unchecked Sendable`: a
        /// `GMainContext` may be used from any thread (GLib locks it internally).
        private struct ContextHandle: @unchecked Sendable {
            let pointer: OpaquePointer
        }

        private final class Job: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
    }
#endif
