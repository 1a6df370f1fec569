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
        /// fails with ``/SymorvaMachines/MediaEngineFailure/missingComponent(_:)``
        /// (``/SymorvaMachines/MissingMediaComponent/captureDevice``).
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

        /// A test tone of `frequency` hertz as the member's voice, for a machine without a
        /// microphone: the room's mix plays on the default sink when an audio server is
        /// reachable, else it only feeds the meter.
        public static func toneEngine(frequency: Int, transport: any HTTPTransport, tracer: Tracer = .shared)
            -> GStreamerMediaEngine
        {
            GStreamerMediaEngine(
                transport: transport, source: .testTone(frequency: frequency),
                output: GStreamerSupport.hasCaptureDevice ? .systemDefault : .meterOnly, tracer: tracer)
        }

        public func makeSession(_ context: MediaSessionContext) -> any MediaSession {
            engine.makeSession(context)
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
    package enum GStreamerSupport {
        /// The elements a stage session's pipeline needs (webrtcbin, its ICE agent, Opus and its
        /// RTP payloaders), in the order they are reported missing.
        static let sessionElements = ["webrtcbin", "nicesrc", "opusenc", "opusdec", "rtpopuspay", "rtpopusdepay"]
        /// What a listener's player needs besides: the TS demuxer, the AAC decoder, the source.
        static let playbackElements = ["tsdemux", "faad", "appsrc"]

        /// The first thing GStreamer lacks for a stage session (or, for the player, its
        /// `tsdemux`, `faad` and `appsrc` too; and any of `elements`, the pipeline's own source
        /// and sink), or `nil` when everything is there; checked on the GLib loop's thread.
        package static func missing(forPlayback playback: Bool = false, elements: [String] = []) async
            -> MissingMediaComponent?
        {
            await GLibLoop.shared.run {
                // Initialises GStreamer (once) and checks the session's elements.
                let ready = symorva_gst_initialize() != 0
                if ready, !playback, elements.isEmpty { return nil }
                let wanted = sessionElements + (playback ? playbackElements : []) + elements
                if let element = wanted.first(where: { symorva_gst_has_element($0) == 0 }) {
                    return .element(element)
                }
                return ready ? nil : .framework("GStreamer")
            }
        }

        /// Whether a capture device is likely there: a PulseAudio (or PipeWire-Pulse) server.
        package static var hasCaptureDevice: Bool {
            if let server = getenv("PULSE_SERVER"), server.pointee != 0 { return true }
            guard let runtime = getenv("XDG_RUNTIME_DIR") else { return false }
            return access(String(cString: runtime) + "/pulse/native", F_OK) == 0
        }
    }
#endif
