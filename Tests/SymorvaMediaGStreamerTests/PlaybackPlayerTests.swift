#if os(Linux)
    import Foundation
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime
    import Testing

    @testable import SymorvaMediaGStreamer

    /// A listener's player over a stream that hands it one MPEG-TS segment of AAC audio (a
    /// GStreamer test tone, encoded here with `gst-launch-1.0`): the real pipeline, no device.
    @Suite("GStreamer playback player", .timeLimit(.minutes(1)))
    struct PlaybackPlayerTests {
        /// A stream that has `segments` fetched and never fetches more.
        final class FixedStream: PlaybackStream {
            private let queue: Lock<[PlaybackSegment]>
            private let statePublisher = ObservableValue<PlaybackState>.Publisher(.playing)
            private let buffered = ObservableValue<Duration>.Publisher(.zero)
            private let latency = ObservableValue<Duration?>.Publisher(nil)
            init(_ segments: [PlaybackSegment]) { queue = Lock(segments) }
            var state: ObservableValue<PlaybackState> { statePublisher.observable }
            var bufferedDuration: ObservableValue<Duration> { buffered.observable }
            var liveLatency: ObservableValue<Duration?> { latency.observable }
            func play() {}
            func pause() {}
            func stop() {}
            func nextSegment() -> PlaybackSegment? {
                queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            }
            var left: Int { queue.withLock { $0.count } }
        }

        static let launcher = "/usr/bin/gst-launch-1.0"

        /// Two seconds of a 440 Hz tone as AAC in MPEG-TS, or `nil` where GStreamer cannot make it.
        static func toneSegment() throws -> [UInt8]? {
            guard FileManager.default.isExecutableFile(atPath: launcher) else { return nil }
            let path = NSTemporaryDirectory() + "symorva-tone-\(UUID().uuidString).ts"
            defer { try? FileManager.default.removeItem(atPath: path) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: launcher)
            process.arguments = [
                "-q", "audiotestsrc", "num-buffers=94", "wave=sine", "freq=440", "volume=0.4", "!", "audioconvert",
                "!", "audio/x-raw,rate=48000,channels=1", "!", "voaacenc", "!", "aacparse", "!", "mpegtsmux", "!",
                "filesink", "location=\(path)",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0, let data = FileManager.default.contents(atPath: path), !data.isEmpty
            else { return nil }
            return Array(data)
        }

        @Test("A segment of the stream is demuxed, decoded and heard by the meter; stop is idempotent")
        func playsASegment() async throws {
            guard await GStreamerSupport.missing(forPlayback: true) == nil, let bytes = try Self.toneSegment() else {
                return  // no AAC encoder here (voaacenc, plugins-bad): nothing to play
            }
            let stream = FixedStream([PlaybackSegment(sequence: 1, duration: .seconds(2), data: bytes)])
            let player = GStreamerPlaybackPlayer(stream: stream, output: .meterOnly)
            try await player.start()
            let heard = await player.levels.first { levels in levels.incoming.isSpeaking ? levels.incoming : nil }
            #expect((heard?.decibels ?? -100) > -20)
            #expect(player.audioMeter.incomingSampleCount > 0)
            #expect(stream.left == 0)
            await player.stop()
            #expect(player.levels.value.incoming == .silence)
            await player.stop()
        }

        @Test("Stopping a player that never started does nothing")
        func stopUnstarted() async {
            let player = GStreamerPlaybackPlayer(stream: FixedStream([]), output: .meterOnly)
            await player.stop()
            #expect(player.levels.value == MediaAudioLevels())
        }
    }
#endif
