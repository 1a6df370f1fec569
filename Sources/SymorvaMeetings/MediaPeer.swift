import SymorvaMachines
import SymorvaRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One WebRTC connection of the platform's media engine to the media server: its pipeline
/// (audio source, Opus encoder, the received mix's decoder) and its ICE agent.
///
/// The Janus signalling (``JanusMediaSession``) drives it; a peer lives for one connection
/// (a reconnection makes a new one). Everything it reports after ``start(sending:events:)``
/// arrives through `events`, on the engine's own threads.
package protocol MediaPeer: AnyObject, Sendable {
    /// Builds and starts the pipeline (sending audio when `sending`).
    func start(sending: Bool, events: @escaping @Sendable (MediaPeerEvent) -> Void) async throws(MediaSessionError)
    /// Creates the offer and sets it as the local description (gathering starts).
    func createOffer() async throws(MediaSessionError) -> SessionDescription
    /// Applies the media server's answer.
    func applyAnswer(_ answer: SessionDescription) async throws(MediaSessionError)
    /// Starts or stops sending the member's audio.
    func setSending(_ enabled: Bool) async
    /// Stops the pipeline and releases it. Idempotent.
    func close() async
}

/// What a peer reports while it runs.
package enum MediaPeerEvent: Sendable, Hashable {
    /// A local ICE candidate to trickle.
    case localCandidate(IceCandidate)
    /// Gathering finished.
    case candidatesGathered
    /// The ICE connection state changed.
    case iceState(IceConnectionState)
    /// The pipeline stopped with an error.
    case failed(MediaEngineFailure)
}

/// Makes a peer per connection; the platform's engine.
package protocol MediaPeerFactory: Sendable {
    /// A new peer whose audio levels (and received samples) go to `meter`.
    func makePeer(meter: AudioMeter) -> any MediaPeer
}

/// The loudness of one direction of a media session.
public struct AudioLevel: Sendable, Hashable {
    /// The RMS level of the last 100 ms in dBFS (−100 for silence, 0 for full scale).
    public var decibels: Double
    /// Whether someone is speaking in this direction (the level is above −45 dBFS).
    public var isSpeaking: Bool

    /// A level.
    public init(decibels: Double, isSpeaking: Bool) {
        self.decibels = decibels
        self.isSpeaking = isSpeaking
    }

    /// Nothing heard.
    public static let silence = AudioLevel(decibels: -100, isSpeaking: false)
}

/// The audio levels of a stage member's media session, per direction.
public struct MediaAudioLevels: Sendable, Hashable {
    /// What the member hears: the room's mix as received.
    public var incoming: AudioLevel
    /// What the member's microphone sends (silence while it is off).
    public var outgoing: AudioLevel

    /// Levels.
    public init(incoming: AudioLevel = .silence, outgoing: AudioLevel = .silence) {
        self.incoming = incoming
        self.outgoing = outgoing
    }
}

/// A direction of the audio.
package enum AudioDirection: Sendable, Hashable {
    /// Received from the room.
    case incoming
    /// Sent by the member.
    case outgoing
}

/// Measures a session's audio as the engine hands its samples over: 100 ms windows of 16-bit
/// PCM become ``MediaAudioLevels``, published when they change. Tests (and benchmarks) may
/// also listen to the received samples themselves.
package final class AudioMeter: Sendable {
    /// Above this RMS level a direction counts as speaking.
    package static let speakingThreshold = -45.0

    private struct Window {
        var sumOfSquares: Double = 0
        var count = 0
    }

    private let publisher = ObservableValue<MediaAudioLevels>.Publisher(MediaAudioLevels())
    private let windows = Lock<[AudioDirection: Window]>([:])
    private let listeners = Lock<[UInt64: @Sendable ([Int16], Int) -> Void]>([:])
    private let nextListener = Atomic<UInt64>(0)
    private let incomingSamples = Atomic<UInt64>(0)
    /// Whether received samples arrived since the last ``takeIncomingArrival()``.
    private let incomingArrived = Atomic<Bool>(false)
    /// The one wait for the next received samples (``incomingArrival()``), if any.
    private let arrivalWaiter = Lock<CheckedContinuation<Void, Never>?>(nil)

    /// How many received samples the meter has taken so far (whether the room's audio arrives).
    package var incomingSampleCount: UInt64 { incomingSamples.load(ordering: .relaxed) }

    /// A meter at silence.
    package init() {}

    /// The levels, per direction.
    package var levels: ObservableValue<MediaAudioLevels> { publisher.observable }

    /// Takes samples (interleaved, `channels` per frame, at `rate` Hz) of one direction.
    package func record(_ samples: UnsafeBufferPointer<Int16>, direction: AudioDirection, rate: Int, channels: Int) {
        var sum = 0.0
        for sample in samples {
            let value = Double(sample) / 32768
            sum += value * value
        }
        let windowSize = rate * max(channels, 1) / 10
        let finished: Double? = windows.withLock { windows in
            var window = windows[direction] ?? Window()
            window.sumOfSquares += sum
            window.count += samples.count
            defer { windows[direction] = window.count >= windowSize ? Window() : window }
            guard window.count >= windowSize else { return nil }
            return window.sumOfSquares / Double(window.count)
        }
        if direction == .incoming {
            incomingSamples.wrappingAdd(UInt64(samples.count), ordering: .relaxed)
            if !incomingArrived.exchange(true, ordering: .acquiringAndReleasing) {
                arrivalWaiter.withLock { waiter in
                    defer { waiter = nil }
                    return waiter
                }?.resume()
            }
            let handlers = listeners.withLock { Array($0.values) }
            if !handlers.isEmpty {
                let copy = Array(samples)
                for handler in handlers { handler(copy, rate) }
            }
        }
        guard let meanSquare = finished else { return }
        let decibels = meanSquare > 1e-10 ? max(-100, 10 * log10(meanSquare)) : -100
        let level = AudioLevel(decibels: decibels, isSpeaking: decibels > Self.speakingThreshold)
        publish(level, direction)
    }

    /// Whether received samples arrived since the last call (and starts counting anew).
    package func takeIncomingArrival() -> Bool {
        incomingArrived.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Returns once received samples arrive (at once if some did since the last
    /// ``takeIncomingArrival()``), taking the arrival; or once the calling task is cancelled. A wait
    /// on the engine's next buffer, not a sleep; one waiter at a time.
    package func incomingArrival() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // The check and the registration are one step under the lock that `record` takes
                // after raising the flag, so an arrival in between is never missed.
                let ready = arrivalWaiter.withLock { waiter -> Bool in
                    if incomingArrived.load(ordering: .acquiring) || Task.isCancelled { return true }
                    waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            arrivalWaiter.withLock { waiter in
                defer { waiter = nil }
                return waiter
            }?.resume()
        }
        _ = takeIncomingArrival()
    }

    /// Sets a direction to silence (a stopped microphone, a closed connection).
    package func reset(_ direction: AudioDirection) {
        windows.withLock { $0[direction] = Window() }
        publish(.silence, direction)
    }

    /// Calls `handler` with every buffer of received samples (mono or interleaved) and its rate,
    /// on the engine's streaming thread, until the returned function is called.
    package func listenToIncomingSamples(_ handler: @escaping @Sendable ([Int16], Int) -> Void) -> @Sendable () -> Void
    {
        let id = nextListener.wrappingAdd(1, ordering: .relaxed).newValue
        listeners.withLock { $0[id] = handler }
        return { self.listeners.withLock { _ = $0.removeValue(forKey: id) } }
    }

    private func publish(_ level: AudioLevel, _ direction: AudioDirection) {
        _ = publisher.publish { current in
            var next = current
            switch direction {
            case .incoming: next.incoming = level
            case .outgoing: next.outgoing = level
            }
            return next == current ? nil : next
        }
    }
}
