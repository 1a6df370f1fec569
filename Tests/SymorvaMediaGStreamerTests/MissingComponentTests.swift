#if os(Linux)
    internal import CGStreamerShim
    import SymorvaMachines
    import SymorvaMeetings
    import Testing

    @testable import SymorvaMediaGStreamer

    /// What the engine says when GStreamer (or the machine) lacks something: the element by
    /// name, the capture device; never a bare `pipelineFailed`.
    @Suite("GStreamer missing components")
    struct MissingComponentTests {
        static let absent = "symorvanosuchelement"

        /// The first of `elements` this machine's GStreamer lacks, asked of GStreamer directly.
        static func firstAbsent(_ elements: [String]) async -> String? {
            await GLibLoop.shared.run {
                _ = symorva_gst_initialize()
                return elements.first { symorva_gst_has_element($0) == 0 }
            }
        }

        @Test("An element that is not installed is named, after the session's own in their order")
        func namesTheElement() async {
            let expected = await Self.firstAbsent(GStreamerSupport.sessionElements + ["audiotestsrc", Self.absent])
            #expect(
                await GStreamerSupport.missing(elements: ["audiotestsrc", Self.absent]) == expected.map { .element($0) }
            )
            #expect(expected != nil)
        }

        @Test("Nothing is missing exactly when GStreamer has every session (and player) element")
        func reportsWhatGStreamerLacks() async {
            let session = await Self.firstAbsent(GStreamerSupport.sessionElements)
            #expect(await GStreamerSupport.missing() == session.map { .element($0) })
            let player = await Self.firstAbsent(GStreamerSupport.sessionElements + GStreamerSupport.playbackElements)
            #expect(await GStreamerSupport.missing(forPlayback: true) == player.map { .element($0) })
        }

        @Test(
            "A capture-device peer on a machine without an audio server fails with captureDevice",
            .enabled(if: !GStreamerSupport.hasCaptureDevice))
        func noCaptureDevice() async {
            let peer = GStreamerPeer(source: .systemDefault, output: .meterOnly, meter: AudioMeter())
            let missing = await GStreamerSupport.missing(elements: peer.pipelineElements)
            await #expect(throws: MediaSessionError.engine(.missingComponent(missing ?? .captureDevice))) {
                try await peer.start(sending: true) { _ in }
            }
            await peer.close()
        }
    }
#endif
