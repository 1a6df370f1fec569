#if os(Linux)
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime
    import Testing

    @testable import SymorvaMediaGStreamer

    /// A stage peer whose voice is GStreamer's test tone and whose mix goes to the meter only:
    /// the real pipeline, webrtcbin's negotiation and the meter taps, with no device and no
    /// network (the offer is made, never sent).
    @Suite(
        "GStreamer tone peer", .enabled { await GStreamerSupport.missing(elements: ["audiotestsrc"]) == nil },
        .timeLimit(.minutes(1)))
    struct TonePeerTests {
        @Test("A tone peer starts, offers Opus at 48 kHz, and its gate decides what the meter hears")
        func toneThroughTheGate() async throws {
            let meter = AudioMeter()
            let peer = GStreamerPeer(source: .testTone(frequency: 440), output: .meterOnly, meter: meter)
            let failures = Lock<[MediaEngineFailure]>([])
            try await peer.start(sending: false) { event in
                if case .failed(let failure) = event { failures.withLock { $0.append(failure) } }
            }
            let offer = try await peer.createOffer()
            #expect(offer.sdp.contains("m=audio"))
            #expect(offer.sdp.lowercased().contains("opus/48000"))
            #expect(offer.sdp.contains("a=group:BUNDLE"))

            // The gate is muted: the tone's samples reach the meter as silence.
            let silent = await meter.levels.first { $0.outgoing == .silence ? true : nil }
            #expect(silent == true)
            // The microphone on: the tone (at 0.4 of full scale, about -11 dBFS) is heard.
            await peer.setSending(true)
            let heard = await meter.levels.first { levels in levels.outgoing.isSpeaking ? levels.outgoing : nil }
            #expect((heard?.decibels ?? -100) > -20)
            // Off again: back to silence.
            await peer.setSending(false)
            let quiet = await meter.levels.first { $0.outgoing.isSpeaking ? nil : $0.outgoing }
            #expect((quiet?.decibels ?? 0) < -45)

            await peer.close()
            #expect(failures.withLock { $0 }.isEmpty)
        }

        @Test("A closed peer offers nothing and refuses an answer")
        func closedPeer() async {
            let peer = GStreamerPeer(source: .testTone(frequency: 440), output: .meterOnly, meter: AudioMeter())
            await #expect(throws: MediaSessionError.engine(.offerFailed)) { try await peer.createOffer() }
            await #expect(throws: MediaSessionError.engine(.answerRejected)) {
                try await peer.applyAnswer(SessionDescription(sdp: "v=0"))
            }
            await peer.close()
        }
    }

    @Suite("ICE connection states from GStreamer")
    struct IceStateTests {
        @Test("GstWebRTCICEConnectionState values map to the machine's states; unknown ones are new")
        func mapping() {
            let expected: [(Int32, IceConnectionState)] = [
                (0, .new), (1, .checking), (2, .connected), (3, .completed), (4, .failed), (5, .disconnected),
                (6, .closed), (42, .new),
            ]
            for (value, state) in expected { #expect(IceConnectionState(gstreamer: value) == state) }
        }
    }
#endif
