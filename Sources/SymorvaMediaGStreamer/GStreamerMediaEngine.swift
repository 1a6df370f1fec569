#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import SymorvaHTTP
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime

    #if canImport(Glibc)
        import Glibc
    #endif

    /// Where a stage member's voice comes from.
    public enum AudioSource: Sendable, Hashable {
        /// The system's default capture device (`autoaudiosrc`). A session whose machine has none
        /// fails with ``/SymorvaMachines/MediaEngineFailure/missingComponent``.
        case systemDefault
        /// A sine tone at this frequency in hertz: tests, benchmarks and headless machines.
        case testTone(frequency: Int)
    }

    /// Where the room's mix goes.
    public enum AudioOutput: Sendable, Hashable {
        /// The system's default audio sink (`autoaudiosink`).
        case systemDefault
        /// Nowhere but the level meter (no audio device).
        case meterOnly
    }

    /// The Linux media engine: Janus signalling over the SDK's transport, audio over GStreamer's
    /// `webrtcbin` (Opus), the GLib main loop on a thread of its own.
    ///
    /// ```swift
    /// let engine = GStreamerMediaEngine(transport: transport, source: .testTone(frequency: 440), output: .meterOnly)
    /// ```
    public struct GStreamerMediaEngine: MediaEngine {
        private let engine: JanusMediaEngine

        /// An engine.
        ///
        /// - Parameters:
        ///   - transport: the HTTP transport Janus is reached over (the SDK's).
        ///   - source: the member's voice; ``AudioSource/systemDefault`` unless a test tone is wanted.
        ///   - output: the room's mix; ``AudioOutput/systemDefault`` where the machine has a sink.
        public init(
            transport: any HTTPTransport, source: AudioSource = .systemDefault, output: AudioOutput = .systemDefault,
            tracer: Tracer = .shared
        ) {
            engine = JanusMediaEngine(
                transport: transport, peers: GStreamerPeerFactory(source: source, output: output), tracer: tracer)
        }

        /// The default for this machine: the capture device and sink when an audio server is
        /// reachable, else the default source (whose sessions then fail with a typed error) and
        /// the meter only.
        public static func automatic(transport: any HTTPTransport, tracer: Tracer = .shared) -> GStreamerMediaEngine {
            let device = GStreamerSupport.hasCaptureDevice
            return GStreamerMediaEngine(
                transport: transport, source: .systemDefault, output: device ? .systemDefault : .meterOnly,
                tracer: tracer)
        }

        public func makeSession(for descriptor: MediaSessionDescriptor) -> any MediaSession {
            engine.makeSession(for: descriptor)
        }
    }

    /// Makes a ``GStreamerPeer`` per connection.
    struct GStreamerPeerFactory: MediaPeerFactory {
        let source: AudioSource
        let output: AudioOutput

        func makePeer(meter: AudioMeter) -> any MediaPeer {
            GStreamerPeer(source: source, output: output, meter: meter)
        }
    }

    /// What this machine's GStreamer installation offers.
    enum GStreamerSupport {
        /// Whether GStreamer initialised with webrtcbin, nice and Opus (and, for the player,
        /// `tsdemux`, `faad` and `appsrc`), checked once on the GLib loop's thread.
        static func available(forPlayback playback: Bool = false) async -> Bool {
            await GLibLoop.shared.run {
                guard symorva_gst_initialize() != 0 else { return false }
                guard playback else { return true }
                let elements: [String] = ["tsdemux", "faad", "appsrc"]
                return elements.allSatisfy { symorva_gst_has_element($0) != 0 }
            }
        }

        /// Whether a capture device is likely there: a PulseAudio (or PipeWire-Pulse) server.
        static var hasCaptureDevice: Bool {
            if let server = getenv("PULSE_SERVER"), server.pointee != 0 { return true }
            guard let runtime = getenv("XDG_RUNTIME_DIR") else { return false }
            return access(String(cString: runtime) + "/pulse/native", F_OK) == 0
        }
    }
#endif
