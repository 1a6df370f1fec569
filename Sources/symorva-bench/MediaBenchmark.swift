#if os(Linux)
    import Foundation
    import Glibc
    import SymorvaHTTP
    import SymorvaKit
    import SymorvaMachines
    import SymorvaMeetings
    import SymorvaRuntime
    import SymorvaServices
    import SymorvaTesting
    import SymorvaTransport

    /// `symorva-bench media [--rounds N]`: stage audio over GStreamer's webrtcbin and the dev Janus
    /// (`Scripts/dev-server start --test`), through ``GStreamerMediaEngine`` with test-tone sources
    /// and meter-only outputs. Each round puts two fresh members on stage in a fresh meeting and a
    /// third in as a listener, and prints p50/p99/max of:
    /// - join → first audio: Bob connected, Alice's `connect()` with her microphone on, until Bob's
    ///   decoded mix carries her 440 Hz (a Goertzel filter over 20 ms blocks);
    /// - mouth-to-ear: Alice's microphone turned on (after a second of silence) until the first
    ///   20 ms block of Bob's mix with the tone, five times a round (the block adds up to 20 ms);
    /// - CPU per stage member: this process's user + system time over 5 s with both connected and
    ///   Alice sending, per member, as a share of one core;
    /// - listener live latency: the age of the newest HLS segment when the listener's playback
    ///   stream fetched it;
    /// - listener mouth-to-ear: Alice's microphone on until her tone comes out of the listener's
    ///   ``GStreamerPlaybackPlayer`` (segments of 1 s, the playlist polled once a segment).
    struct MediaBenchmark: DevServerBenchmark {
        /// The mode's word on the command line.
        let name = "media"
        /// The mode's arguments for the usage text.
        let argumentsSynopsis = "[--rounds N]"
        /// What the mode measures.
        let summary = "stage audio over webrtcbin and Janus: join to first audio, mouth-to-ear, CPU (SYMORVA_* env)"

        let optionNames: Set<String> = ["rounds"]

        func settings(from options: inout Options) -> Int { options.integer("rounds", default: 3) }

        private struct Member {
            let userID: UserID
            let token: Secret<String>
            let meetings: AccountMeetings
        }

        private func member(
            _ prefix: String, tone: Int, homeserver: URL, services: URL, transport: CurlTransport
        ) async throws -> Member {
            let account = try await BenchAccount.register(
                prefix, homeserver: homeserver, services: services, transport: transport)
            let engine = GStreamerMediaEngine(
                transport: transport, source: .testTone(frequency: tone), output: .meterOnly, tracer: Tracer())
            let meetings = AccountMeetings(
                member: account.userID, services: account.services,
                scope: AccountScope(label: account.userID.rawValue), engine: engine, feedWait: .seconds(10),
                tracer: Tracer())
            _ = try await account.services.send(.get, "/_symorva/v1/whoami")
            return Member(userID: account.userID, token: account.token, meetings: meetings)
        }

        func measure(_ rounds: Int, homeserver: URL, services: URL) async throws {
            let transport = CurlTransport()
            let clock = ContinuousClock()
            var firstAudio: [Duration] = []
            var mouthToEar: [Duration] = []
            var cpu: [Double] = []
            var listenerLatency: [Duration] = []
            var playerLatency: [Duration] = []
            for _ in 0..<rounds {
                let alice = try await member(
                    "bench-ma", tone: 440, homeserver: homeserver, services: services, transport: transport)
                let bob = try await member(
                    "bench-mb", tone: 660, homeserver: homeserver, services: services, transport: transport)
                let carol = try await member(
                    "bench-mc", tone: 550, homeserver: homeserver, services: services, transport: transport)
                let roomID = try await createRoom(transport, homeserver, alice.token)
                for joiner in [bob, carol] { try await joinRoom(transport, homeserver, joiner.token, roomID) }
                let aliceRoom = try await alice.meetings.join(roomID: roomID)
                let bobRoom = try await bob.meetings.join(roomID: roomID)
                let carolRoom = try await carol.meetings.join(roomID: roomID)
                guard case .stage(let aliceMedia) = aliceRoom.role.value,
                    case .stage(let bobMedia) = bobRoom.role.value,
                    let aliceSession = aliceMedia as? JanusMediaSession,
                    let bobSession = bobMedia as? JanusMediaSession,
                    case .listener(let playback) = carolRoom.role.value
                else { throw BenchFailure("roles: expected two stage members and a listener") }
                playback.play()

                let onset = ToneOnset(frequency: 440)
                let stop = bobSession.audioMeter.listenToIncomingSamples { samples, rate in
                    onset.take(samples, rate: rate)
                }
                defer { stop() }
                try await bobSession.connect()
                try await aliceSession.setMicrophoneEnabled(true)
                onset.arm()
                var start = clock.now
                try await aliceSession.connect()
                firstAudio.append(try await onset.heard(timeout: .seconds(15)) - start)

                let usageBefore = Self.cpuSeconds()
                let wallBefore = clock.now
                try await Task.sleep(for: .seconds(5))
                let seconds = Double((clock.now - wallBefore) / .milliseconds(1)) / 1000
                cpu.append((Self.cpuSeconds() - usageBefore) / seconds / 2)

                for _ in 0..<5 {
                    try await aliceSession.setMicrophoneEnabled(false)
                    try await Task.sleep(for: .seconds(1))
                    onset.arm()
                    start = clock.now
                    try await aliceSession.setMicrophoneEnabled(true)
                    mouthToEar.append(try await onset.heard(timeout: .seconds(5)) - start)
                }

                if let latency = await playback.liveLatency.first(until: { $0 }) { listenerLatency.append(latency) }

                // Through the listener's GStreamer player: Alice's tone onset until it is decoded.
                let player = GStreamerPlaybackPlayer(stream: playback, output: .meterOnly)
                let heard = ToneOnset(frequency: 440)
                let stopPlayer = player.audioMeter.listenToIncomingSamples { samples, rate in
                    heard.take(samples, rate: rate)
                }
                try await player.start()
                try await aliceSession.setMicrophoneEnabled(false)
                try await Task.sleep(for: .seconds(4))
                heard.arm()
                start = clock.now
                try await aliceSession.setMicrophoneEnabled(true)
                if let at = try? await heard.heard(timeout: .seconds(15)) { playerLatency.append(at - start) }
                stopPlayer()
                await player.stop()
                await aliceSession.disconnect()
                await bobSession.disconnect()
                try await aliceRoom.end()
            }
            print("media: \(rounds) rounds (two stage members over webrtcbin + Janus AudioBridge, one listener)")
            print("                                           p50        p99        max")
            report("join → first audio (connect to tone heard)", firstAudio)
            report("mouth-to-ear (microphone on → tone heard)", mouthToEar)
            report("listener live latency (newest segment age)", listenerLatency)
            report("listener mouth-to-ear (through the player)", playerLatency)
            let cpuSorted = cpu.sorted()
            if let median = cpuSorted.isEmpty ? nil : cpuSorted[cpuSorted.count / 2] {
                print(
                    "  CPU per stage member (one core = 100 %)     \(String(format: "%.1f", median * 100)) % (median)")
            }
        }

        /// This process's user + system CPU time in seconds.
        static func cpuSeconds() -> Double {
            var usage = rusage()
            getrusage(RUSAGE_SELF.rawValue, &usage)
            let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
            return user + system
        }

        private func report(_ label: String, _ samples: [Duration]) {
            let sorted = samples.sorted()
            guard !sorted.isEmpty else {
                print("  \(label.padding(toLength: 42, withPad: " ", startingAt: 0))  no samples")
                return
            }
            let columns = [0.50, 0.99, 1.0].map {
                WalletBenchmark.milliseconds(WalletBenchmark.percentile(sorted, $0))
            }
            print("  \(label.padding(toLength: 42, withPad: " ", startingAt: 0)) \(columns.joined(separator: " ")) ms")
        }

        private func createRoom(_ transport: CurlTransport, _ homeserver: URL, _ token: Secret<String>) async throws
            -> RoomID
        {
            let answer = try await matrix(
                transport, homeserver, token, "/_matrix/client/v3/createRoom", ["preset": "public_chat"])
            guard let id = answer["room_id"] as? String else { throw BenchFailure("createRoom gave no room") }
            return RoomID(rawValue: id)
        }

        private func joinRoom(
            _ transport: CurlTransport, _ homeserver: URL, _ token: Secret<String>, _ roomID: RoomID
        ) async throws {
            let escaped = roomID.rawValue.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            _ = try await matrix(transport, homeserver, token, "/_matrix/client/v3/join/\(escaped)", [:])
        }

        private func matrix(
            _ transport: CurlTransport, _ homeserver: URL, _ token: Secret<String>, _ path: String,
            _ body: [String: Any]
        ) async throws -> [String: Any] {
            var components = URLComponents(url: homeserver, resolvingAgainstBaseURL: false)!
            components.percentEncodedPath = path
            let response = try await transport.send(
                .json(
                    .post, url: components.url!, body: Array(try JSONSerialization.data(withJSONObject: body)),
                    bearerToken: token))
            guard response.isSuccess else { throw BenchFailure("\(path) answered \(response.status)") }
            return (try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]) ?? [:]
        }
    }

    /// When a tone first shows in received samples after being armed: a Goertzel filter over
    /// 20 ms blocks, a block with more than half its energy in the tone's bin.
    final class ToneOnset: Sendable {
        private struct Progress {
            var pending: [Int16] = []
            var armed = false
            var heardAt: ContinuousClock.Instant?
        }
        private let frequency: Double
        private let progress = Lock(Progress())

        init(frequency: Double) { self.frequency = frequency }

        /// Forgets the last onset and waits for the next.
        func arm() {
            progress.withLock {
                $0.armed = true
                $0.heardAt = nil
                $0.pending = []
            }
        }

        /// Takes received samples.
        func take(_ samples: [Int16], rate: Int) {
            let now = ContinuousClock.now
            let block = rate / 50
            let blocks: [[Int16]] = progress.withLock { progress in
                guard progress.armed, progress.heardAt == nil else { return [] }
                progress.pending += samples
                var out: [[Int16]] = []
                while progress.pending.count >= block {
                    out.append(Array(progress.pending.prefix(block)))
                    progress.pending.removeFirst(block)
                }
                return out
            }
            guard blocks.contains(where: { ToneEnergy.share(of: frequency, in: $0, rate: Double(rate)) > 0.5 }) else {
                return
            }
            progress.withLock { if $0.heardAt == nil { $0.heardAt = now } }
        }

        /// Waits for the onset; its instant.
        func heard(timeout: Duration) async throws -> ContinuousClock.Instant {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let at = progress.withLock({ $0.heardAt }) { return at }
                try await Task.sleep(for: .milliseconds(5))
            }
            throw BenchFailure("the tone was not heard within \(timeout)")
        }
    }
#endif
