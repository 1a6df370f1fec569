#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime

    /// Plays a listener's ``/SymorvaMeetings/PlaybackStream`` (the meeting's HLS mix) through
    /// GStreamer: the stream's MPEG-TS segments go into an `appsrc`, then `tsdemux`, `aacparse`,
    /// `faad`, and the system's audio sink or (``AudioOutput/meterOnly``, no audio device) the
    /// level meter alone. The stream keeps fetching; the player takes its segments as they come.
    ///
    /// ```swift
    /// if case .listener(let playback) = room.role.value {
    ///     playback.play()
    ///     let player = GStreamerPlaybackPlayer(stream: playback)
    ///     try await player.start()
    /// }
    /// ```
    public final class GStreamerPlaybackPlayer: @unchecked Sendable {
        // @unchecked Sendable: `pipeline` and `appsrc` are used on the GLib loop's thread only
        // (inside `loop.run`); the feeding task is behind `feeder`.
        private let loop = GLibLoop.shared
        private let stream: any PlaybackStream
        private let output: AudioOutput
        private let meter = AudioMeter()
        private let feeder = Lock<Task<Void, Never>?>(nil)
        private var pipeline: UnsafeMutablePointer<GstElement>?
        private var appsrc: UnsafeMutablePointer<GstElement>?
        private var tap: TapContext?

        /// A player for `stream`, not started.
        public init(stream: any PlaybackStream, output: AudioOutput = .systemDefault) {
            self.stream = stream
            self.output = output
        }

        /// The decoded audio's level (the ``/SymorvaMeetings/MediaAudioLevels/incoming`` direction).
        public var levels: ObservableValue<MediaAudioLevels> { meter.levels }

        /// The decoded samples, for tests and benchmarks.
        package var audioMeter: AudioMeter { meter }

        /// Builds the pipeline and starts taking the stream's segments.
        ///
        /// - Throws: ``/SymorvaMachines/MediaSessionError/engine(_:)`` with
        ///   ``/SymorvaMachines/MediaEngineFailure/missingComponent(_:)`` naming the element
        ///   when GStreamer lacks one (its TS demuxer, AAC decoder, …), ``/SymorvaMachines/MediaEngineFailure/pipelineFailed``
        ///   when the pipeline does not start.
        public func start() async throws(MediaSessionError) {
            if let missing = await GStreamerSupport.missing(forPlayback: true) {
                throw .engine(.missingComponent(missing))
            }
            let sink =
                switch output {
                case .systemDefault: "out. ! queue ! autoaudiosink sync=false"
                case .meterOnly: ""
                }
            let description = """
                appsrc name=src format=bytes is-live=true caps=video/mpegts,systemstream=true,packetsize=188 ! \
                tsdemux ! aacparse ! faad ! audioconvert ! audioresample ! \
                audio/x-raw,format=S16LE,rate=48000,channels=1 ! tee name=out \
                out. ! queue ! fakesink name=meter sync=false async=false \(sink)
                """
            let started = await loop.run { self.build(description) }
            guard started else { throw .engine(.pipelineFailed) }
            let task = Task { [weak self] in
                while !Task.isCancelled {
                    guard let self else { return }
                    if let segment = self.stream.nextSegment() {
                        await self.push(segment.data)
                    } else {
                        try? await Task.sleep(for: .milliseconds(100))
                    }
                }
            }
            feeder.withLock { $0 = task }
        }

        /// Stops the player (the stream itself is the caller's). Idempotent.
        public func stop() async {
            feeder.withLock { $0.take() }?.cancel()
            await loop.run { self.tearDown() }
            meter.reset(.incoming)
        }

        private func push(_ bytes: [UInt8]) async {
            await loop.run {
                guard let appsrc = self.appsrc else { return }
                _ = bytes.withUnsafeBufferPointer { symorva_appsrc_push(appsrc, $0.baseAddress, $0.count) }
            }
        }

        private func build(_ description: String) -> Bool {
            var error: UnsafeMutablePointer<GError>?
            guard let built = gst_parse_launch(description, &error), error == nil else {
                if let error { g_error_free(error) }
                return false
            }
            pipeline = built
            let bin = UnsafeMutableRawPointer(built).assumingMemoryBound(to: GstBin.self)
            guard let source = gst_bin_get_by_name(bin, "src"), let meterSink = gst_bin_get_by_name(bin, "meter") else {
                tearDown()
                return false
            }
            appsrc = source
            let context = TapContext(meter: meter)
            tap = context
            symorva_pcm_tap(meterSink, Unmanaged.passUnretained(context).toOpaque()) { context, samples, count, _ in
                guard let samples else { return }
                Unmanaged<TapContext>.fromOpaque(context!).takeUnretainedValue().meter.record(
                    UnsafeBufferPointer(start: samples, count: count), direction: .incoming, rate: 48_000, channels: 1)
            }
            gst_object_unref(meterSink)
            return gst_element_set_state(built, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE
        }

        private func tearDown() {
            if let appsrc { symorva_appsrc_end(appsrc) }
            if let pipeline { gst_element_set_state(pipeline, GST_STATE_NULL) }
            if let appsrc { gst_object_unref(appsrc) }
            if let pipeline { gst_object_unref(pipeline) }
            appsrc = nil
            pipeline = nil
            tap = nil
        }

        deinit {
            feeder.withLock { $0.take() }?.cancel()
            // A player dropped without stop(): its pipeline is torn down on the loop's thread.
            guard let pipeline else { return }
            let leftover = Leftover(pipeline: pipeline, appsrc: appsrc, tap: tap)
            loop.post {
                if let appsrc = leftover.appsrc { symorva_appsrc_end(appsrc) }
                gst_element_set_state(leftover.pipeline, GST_STATE_NULL)
                if let appsrc = leftover.appsrc { gst_object_unref(appsrc) }
                gst_object_unref(leftover.pipeline)
                _ = leftover.tap
            }
        }
    }

    /// A dropped player's pipeline on its way to the loop's thread. `@unchecked Sendable`: the
    /// pointers are used there only, once, after the player is gone.
    private struct Leftover: @unchecked Sendable {
        let pipeline: UnsafeMutablePointer<GstElement>
        let appsrc: UnsafeMutablePointer<GstElement>?
        let tap: TapContext?
    }

    /// What the player's meter tap calls back into.
    private final class TapContext: Sendable {
        let meter: AudioMeter
        init(meter: AudioMeter) { self.meter = meter }
    }
#endif
