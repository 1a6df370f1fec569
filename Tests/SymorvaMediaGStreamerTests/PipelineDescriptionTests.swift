#if os(Linux)
    import SymorvaMeetings
    import Testing

    @testable import SymorvaMediaGStreamer

    /// The stage pipeline a peer asks GStreamer for, by source, output and microphone state:
    /// pure strings, no GStreamer needed.
    @Suite("GStreamer pipeline descriptions")
    struct PipelineDescriptionTests {
        static func peer(_ source: AudioSource, _ output: AudioOutput) -> GStreamerPeer {
            GStreamerPeer(source: source, output: output, meter: AudioMeter())
        }

        @Test("A test tone is a live sine at its frequency; the capture device is autoaudiosrc")
        func sources() {
            let tone = Self.peer(.testTone(frequency: 523), .meterOnly).pipelineDescription(sending: true)
            #expect(tone.contains("audiotestsrc is-live=true wave=sine freq=523 volume=0.4 ! audioconvert"))
            #expect(!tone.contains("autoaudiosrc"))
            let device = Self.peer(.systemDefault, .meterOnly).pipelineDescription(sending: true)
            #expect(device.contains("autoaudiosrc ! audioconvert"))
            #expect(!device.contains("audiotestsrc"))
        }

        @Test("The room's mix goes to the system sink, or only to the meter")
        func outputs() {
            let played = Self.peer(.testTone(frequency: 440), .systemDefault).pipelineDescription(sending: false)
            #expect(played.contains("room. ! queue ! autoaudiosink sync=false"))
            let metered = Self.peer(.testTone(frequency: 440), .meterOnly).pipelineDescription(sending: false)
            #expect(!metered.contains("autoaudiosink"))
            for description in [played, metered] {
                #expect(description.contains("room. ! queue ! fakesink name=roommeter sync=false async=false"))
                #expect(description.contains("mic. ! queue ! fakesink name=micmeter sync=false async=false"))
            }
        }

        @Test("With the microphone off the gate is muted and the valve drops; on, both let through")
        func microphoneState() {
            let peer = Self.peer(.testTone(frequency: 440), .meterOnly)
            let off = peer.pipelineDescription(sending: false)
            #expect(off.contains("volume name=gate mute=true"))
            #expect(off.contains("valve name=valve drop-mode=forward-sticky-events drop=true"))
            let on = peer.pipelineDescription(sending: true)
            #expect(on.contains("volume name=gate mute=false"))
            #expect(on.contains("valve name=valve drop-mode=forward-sticky-events drop=false"))
        }

        @Test("Opus at 48 kHz mono, payload 111, into one bundled webrtcbin and back out of its depayloader")
        func codecAndTransport() {
            let description = Self.peer(.testTone(frequency: 440), .meterOnly).pipelineDescription(sending: true)
            #expect(description.hasPrefix("webrtcbin name=webrtc bundle-policy=max-bundle "))
            #expect(description.contains("opusenc bitrate=32000 frame-size=20 ! rtpopuspay pt=111"))
            #expect(
                description.contains(
                    "application/x-rtp,media=audio,encoding-name=OPUS,payload=111,clock-rate=48000 ! webrtc."))
            #expect(description.contains("rtpopusdepay name=depay ! opusdec plc=true"))
            #expect(description.components(separatedBy: "audio/x-raw,format=S16LE,rate=48000,channels=1").count == 3)
        }

        @Test("The elements checked before a start are the peer's own source and sink")
        func elementsChecked() {
            #expect(Self.peer(.testTone(frequency: 440), .meterOnly).pipelineElements == ["audiotestsrc"])
            #expect(Self.peer(.systemDefault, .systemDefault).pipelineElements == ["autoaudiosrc", "autoaudiosink"])
            #expect(
                Self.peer(.testTone(frequency: 440), .systemDefault).pipelineElements == [
                    "audiotestsrc", "autoaudiosink",
                ])
        }
    }
#endif
