#if os(Linux)
    internal import CGStreamer
    internal import CGStreamerShim
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime

    /// One WebRTC connection to the media server over GStreamer's `webrtcbin`.
    ///
    /// The pipeline: the chosen source, 48 kHz mono 16-bit, a gate (silent while the microphone
    /// is off), a meter tap, Opus, RTP, a valve (no packet leaves while the microphone is off),
    /// `webrtcbin` (max-bundle); the received RTP goes through
    /// the Opus decoder to a meter tap and the chosen output. Built, changed and torn down on the
    /// engine's GLib loop thread only (``GLibLoop``); webrtcbin's promises and signals call back
    /// on its own threads, and those callbacks only hand values over.
    final class GStreamerPeer: MediaPeer, @unchecked Sendable {
        // @unchecked Sendable: the GStreamer pointers below are read and written only on the
        // GLib loop's thread (every use is inside `loop.run`/`loop.post`), and the callback
        // boxes are immutable after creation; the remaining state is behind `lock`.
        private let loop = GLibLoop.shared
        private let source: AudioSource
        private let output: AudioOutput
        private let meter: AudioMeter
        private let lock = Lock<Pending>(Pending())

        private var pipeline: UnsafeMutablePointer<GstElement>?
        private var webrtc: UnsafeMutablePointer<GstElement>?
        private var valve: UnsafeMutablePointer<GstElement>?
        private var gate: UnsafeMutablePointer<GstElement>?
        private var busWatch: UInt32 = 0
        /// The boxes whose unretained pointers the C callbacks hold: kept until the pipeline is gone.
        private var retained: [AnyObject] = []

        private struct Pending {
            var negotiationNeeded: CheckedContinuation<Bool, Never>?
            var negotiationSeen = false
            var closed = false
        }

        init(source: AudioSource, output: AudioOutput, meter: AudioMeter) {
            self.source = source
            self.output = output
            self.meter = meter
        }

        func start(sending: Bool, events: @escaping @Sendable (MediaPeerEvent) -> Void) async throws(MediaSessionError)
        {
            if let missing = await GStreamerSupport.missing(elements: pipelineElements) {
                throw .engine(.missingComponent(missing))
            }
            if case .systemDefault = source, !GStreamerSupport.hasCaptureDevice {
                throw .engine(.missingComponent(.captureDevice))
            }
            let description = pipelineDescription(sending: sending)
            let started: Bool = await loop.run { self.build(description, events: events) }
            guard started else { throw .engine(.pipelineFailed) }
            // webrtcbin asks for negotiation once its transceiver has caps: offer only then.
            let ready = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now: Bool? = lock.withLock { pending in
                    if pending.negotiationSeen { return true }
                    if pending.closed { return false }
                    pending.negotiationNeeded = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
                Task {
                    try? await Task.sleep(for: .seconds(10))
                    self.lock.withLock { $0.negotiationNeeded.take() }?.resume(returning: false)
                }
            }
            guard ready else { throw .engine(.pipelineFailed) }
        }

        func createOffer() async throws(MediaSessionError) -> SessionDescription {
            let sdp: String? = await withCheckedContinuation { continuation in
                let callback = TextCallback { continuation.resume(returning: $0) }
                loop.post {
                    guard let webrtc = self.webrtc else {
                        callback.body(nil)
                        return
                    }
                    symorva_webrtc_create_offer(webrtc, Unmanaged.passRetained(callback).toOpaque()) { context, text in
                        let callback = Unmanaged<TextCallback>.fromOpaque(context!).takeRetainedValue()
                        callback.body(text.map { String(cString: $0) })
                    }
                }
            }
            guard let sdp else { throw .engine(.offerFailed) }
            return SessionDescription(sdp: sdp)
        }

        func applyAnswer(_ answer: SessionDescription) async throws(MediaSessionError) {
            let failure: String? = await withCheckedContinuation { continuation in
                let callback = TextCallback { continuation.resume(returning: $0) }
                let sdp = answer.sdp
                loop.post {
                    guard let webrtc = self.webrtc else {
                        callback.body("closed")
                        return
                    }
                    symorva_webrtc_set_remote_answer(webrtc, sdp, Unmanaged.passRetained(callback).toOpaque()) {
                        context, text in
                        let callback = Unmanaged<TextCallback>.fromOpaque(context!).takeRetainedValue()
                        callback.body(text.map { String(cString: $0) })
                    }
                }
            }
            if failure != nil { throw .engine(.answerRejected) }
        }

        func setSending(_ enabled: Bool) async {
            await loop.run {
                // The gate silences the source (the encoder keeps running, so the pads keep their
                // caps); the valve drops the RTP packets: nothing is sent while off.
                guard let valve = self.valve, let gate = self.gate else { return }
                gate.withMemoryRebound(to: GObject.self, capacity: 1) {
                    gst_util_set_object_arg($0, "mute", enabled ? "false" : "true")
                }
                valve.withMemoryRebound(to: GObject.self, capacity: 1) {
                    gst_util_set_object_arg($0, "drop", enabled ? "false" : "true")
                }
            }
        }

        func close() async {
            lock.withLock { pending in
                pending.closed = true
                return pending.negotiationNeeded.take()
            }?.resume(returning: false)
            await loop.run { self.tearDown() }
        }

        // MARK: - On the loop's thread

        /// The source and sink elements this peer's pipeline adds to the session's own: the
        /// tone's `audiotestsrc` or the capture device's `autoaudiosrc`, and `autoaudiosink`.
        var pipelineElements: [String] {
            let input =
                switch source {
                case .systemDefault: "autoaudiosrc"
                case .testTone: "audiotestsrc"
                }
            let output: [String] =
                switch self.output {
                case .systemDefault: ["autoaudiosink"]
                case .meterOnly: []
                }
            return [input] + output
        }

        func pipelineDescription(sending: Bool) -> String {
            let raw = "audio/x-raw,format=S16LE,rate=48000,channels=1"
            let input: String
            switch source {
            case .systemDefault: input = "autoaudiosrc"
            case .testTone(let frequency): input = "audiotestsrc is-live=true wave=sine freq=\(frequency) volume=0.4"
            }
            let sink: String
            switch output {
            case .systemDefault: sink = "room. ! queue ! autoaudiosink sync=false"
            case .meterOnly: sink = ""
            }
            return """
                webrtcbin name=webrtc bundle-policy=max-bundle \
                \(input) ! audioconvert ! audioresample ! \(raw) ! volume name=gate mute=\(sending ? "false" : "true") ! \
                tee name=mic \
                mic. ! queue ! fakesink name=micmeter sync=false async=false \
                mic. ! queue ! opusenc bitrate=32000 frame-size=20 ! rtpopuspay pt=111 ! \
                valve name=valve drop-mode=forward-sticky-events drop=\(sending ? "false" : "true") ! \
                application/x-rtp,media=audio,encoding-name=OPUS,payload=111,clock-rate=48000 ! webrtc. \
                rtpopusdepay name=depay ! opusdec plc=true ! audioconvert ! audioresample ! \(raw) ! tee name=room \
                room. ! queue ! fakesink name=roommeter sync=false async=false \
                \(sink)
                """
        }

        private func element(_ name: String) -> UnsafeMutablePointer<GstElement>? {
            guard let pipeline else { return nil }
            return pipeline.withMemoryRebound(to: GstBin.self, capacity: 1) { gst_bin_get_by_name($0, name) }
        }

        private func build(_ description: String, events: @escaping @Sendable (MediaPeerEvent) -> Void) -> Bool {
            var error: UnsafeMutablePointer<GError>?
            guard let built = gst_parse_launch(description, &error), error == nil else {
                if let error { g_error_free(error) }
                return false
            }
            pipeline = built
            guard let webrtc = element("webrtc"), let depay = element("depay"), let valve = element("valve"),
                let gate = element("gate"), let micMeter = element("micmeter"), let roomMeter = element("roommeter")
            else {
                tearDown()
                return false
            }
            self.webrtc = webrtc
            self.valve = valve
            self.gate = gate
            let box = SignalBox(events: events, peer: self)
            retained.append(box)
            let signals = Unmanaged.passUnretained(box)
            symorva_webrtc_connect(
                webrtc, depay, signals.toOpaque(),
                { context in SignalBox.from(context).negotiationNeeded() },
                { context, mline, candidate in
                    guard let candidate else { return }
                    SignalBox.from(context).events(
                        .localCandidate(IceCandidate(mlineIndex: UInt32(mline), candidate: String(cString: candidate))))
                },
                { context, state in SignalBox.from(context).events(.iceState(IceConnectionState(gstreamer: state))) },
                { context, state in if state == 2 { SignalBox.from(context).events(.candidatesGathered) } })
            for (meterElement, direction) in [(micMeter, AudioDirection.outgoing), (roomMeter, .incoming)] {
                let tapBox = TapBox(meter: meter, direction: direction)
                retained.append(tapBox)
                symorva_pcm_tap(meterElement, Unmanaged.passUnretained(tapBox).toOpaque()) {
                    context, samples, count, _ in
                    guard let samples else { return }
                    let tap = Unmanaged<TapBox>.fromOpaque(context!).takeUnretainedValue()
                    tap.meter.record(
                        UnsafeBufferPointer(start: samples, count: count), direction: tap.direction, rate: 48_000,
                        channels: 1)
                }
                gst_object_unref(meterElement)
            }
            gst_object_unref(depay)
            busWatch = symorva_bus_watch(built, loop.context, signals.toOpaque()) { context, kind, _ in
                if kind == 1 { SignalBox.from(context).events(.failed(.streamFailed)) }
            }
            return gst_element_set_state(built, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE
        }

        fileprivate func negotiationNeeded() {
            lock.withLock { pending in
                pending.negotiationSeen = true
                return pending.negotiationNeeded.take()
            }?.resume(returning: true)
        }

        private func tearDown() {
            if busWatch != 0, let source = g_main_context_find_source_by_id(loop.context, busWatch) {
                g_source_destroy(source)
            }
            busWatch = 0
            if let pipeline {
                gst_element_set_state(pipeline, GST_STATE_NULL)
            }
            if let webrtc { gst_object_unref(webrtc) }
            if let valve { gst_object_unref(valve) }
            if let gate { gst_object_unref(gate) }
            if let pipeline { gst_object_unref(pipeline) }
            pipeline = nil
            webrtc = nil
            valve = nil
            gate = nil
            retained = []
        }
    }

    /// A one-shot text callback handed through a C context pointer.
    private final class TextCallback: Sendable {
        let body: @Sendable (String?) -> Void
        init(_ body: @escaping @Sendable (String?) -> Void) { self.body = body }
    }

    /// What webrtcbin's signals and the bus call back into.
    private final class SignalBox: Sendable {
        let events: @Sendable (MediaPeerEvent) -> Void
        weak let peer: GStreamerPeer?

        init(events: @escaping @Sendable (MediaPeerEvent) -> Void, peer: GStreamerPeer) {
            self.events = events
            self.peer = peer
        }

        func negotiationNeeded() { peer?.negotiationNeeded() }

        static func from(_ context: UnsafeMutableRawPointer?) -> SignalBox {
            Unmanaged<SignalBox>.fromOpaque(context!).takeUnretainedValue()
        }
    }

    /// What a meter tap calls back into.
    private final class TapBox: Sendable {
        let meter: AudioMeter
        let direction: AudioDirection
        init(meter: AudioMeter, direction: AudioDirection) {
            self.meter = meter
            self.direction = direction
        }
    }

    extension IceConnectionState {
        /// From `GstWebRTCICEConnectionState`.
        init(gstreamer state: Int32) {
            switch state {
            case 1: self = .checking
            case 2: self = .connected
            case 3: self = .completed
            case 4: self = .failed
            case 5: self = .disconnected
            case 6: self = .closed
            default: self = .new
            }
        }
    }
#endif
