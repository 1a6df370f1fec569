import SymorvaMachines
import SymorvaRuntime

/// The SDK's playback stream on every platform: a live HLS client over the SDK's transport.
///
/// While playing it fetches the meeting's live playlist (through the account's community
/// services client: only the meeting's participants may read it), fetches each segment it has
/// not fetched yet, and polls again after the target duration. Fetched segments wait in a
/// bounded buffer (``maximumBuffered``; the oldest go first) for the platform's player
/// (``nextSegment()``). ``liveLatency`` is the age of the newest segment when it was fetched:
/// the wall clock's now minus the end of the segment (its `#EXT-X-PROGRAM-DATE-TIME` plus its
/// duration). A failed fetch stalls the stream and it tries again after a second.
public final class HLSPlaybackStream: PlaybackStream {
    /// The playlist this stream follows.
    public let descriptor: PlaybackDescriptor
    /// The most audio kept for the player; older segments are dropped.
    public let maximumBuffered: Duration

    private let service: MeetingsService
    private let clock: any RuntimeClock
    private let wallClock: any WallClock
    private let statePublisher = ObservableValue<PlaybackState>.Publisher(.idle)
    private let bufferedPublisher = ObservableValue<Duration>.Publisher(.zero)
    private let latencyPublisher = ObservableValue<Duration?>.Publisher(nil)
    private let shared = Lock(Shared())

    private struct Shared {
        var task: Task<Void, Never>?
        var buffer: [PlaybackSegment] = []
        var lastSequence: Int?
        var stopped = false
        var fetchedSegments = 0
    }

    init(
        descriptor: PlaybackDescriptor, service: MeetingsService, clock: any RuntimeClock, wallClock: any WallClock,
        maximumBuffered: Duration = .seconds(10)
    ) {
        self.descriptor = descriptor
        self.service = service
        self.clock = clock
        self.wallClock = wallClock
        self.maximumBuffered = maximumBuffered
    }

    public var state: ObservableValue<PlaybackState> { statePublisher.observable }
    public var bufferedDuration: ObservableValue<Duration> { bufferedPublisher.observable }
    public var liveLatency: ObservableValue<Duration?> { latencyPublisher.observable }

    /// How many segments were fetched so far.
    public var fetchedSegments: Int { shared.withLock { $0.fetchedSegments } }

    public func play() {
        let started = shared.withLock { shared -> Bool in
            guard !shared.stopped, shared.task == nil else { return false }
            shared.task = Task { [weak self] in await self?.run() }
            return true
        }
        if started { statePublisher.publish(.buffering) }
    }

    public func pause() {
        let task = shared.withLock { shared -> Task<Void, Never>? in
            defer { shared.task = nil }
            return shared.stopped ? nil : shared.task
        }
        guard let task else { return }
        task.cancel()
        statePublisher.publish(.paused)
    }

    public func stop() {
        let task = shared.withLock { shared -> Task<Void, Never>? in
            shared.stopped = true
            shared.buffer = []
            defer { shared.task = nil }
            return shared.task
        }
        task?.cancel()
        bufferedPublisher.publish(.zero)
        statePublisher.publish(.stopped)
    }

    public func nextSegment() -> PlaybackSegment? {
        let (segment, buffered) = shared.withLock { shared -> (PlaybackSegment?, Duration) in
            guard !shared.buffer.isEmpty else { return (nil, .zero) }
            let first = shared.buffer.removeFirst()
            return (first, shared.buffer.reduce(.zero) { $0 + $1.duration })
        }
        if segment != nil { bufferedPublisher.publish(buffered) }
        return segment
    }

    private func run() async {
        while !Task.isCancelled {
            let wait: Duration
            do throws(MeetingError) {
                wait = try await fetchOnce()
            } catch {
                if Task.isCancelled { return }
                statePublisher.publish(.stalled(error))
                wait = .seconds(1)
            }
            do { try await clock.sleep(for: wait) } catch { return }
        }
    }

    /// One round: the playlist, then every segment not fetched yet. Returns the wait before the next.
    private func fetchOnce() async throws(MeetingError) -> Duration {
        let bytes = try await service.playbackFile(descriptor.playlistPath)
        guard let playlist = HLSPlaylist.parse(String(decoding: bytes, as: UTF8.self)) else {
            throw .invalidResponse
        }
        let last = shared.withLock { $0.lastSequence }
        // A listener joins at the live edge: the newest segment only, then everything after it.
        let fresh = playlist.segments.filter { segment in last.map { segment.sequence > $0 } ?? true }
        for segment in last == nil ? Array(fresh.suffix(1)) : fresh {
            if Task.isCancelled { break }
            let data = try await service.playbackFile(
                HLSPlaylist.resolve(segment.uri, relativeTo: descriptor.playlistPath))
            let now = wallClock.now
            let buffered = shared.withLock { shared -> Duration in
                shared.lastSequence = segment.sequence
                shared.fetchedSegments += 1
                shared.buffer.append(
                    PlaybackSegment(sequence: segment.sequence, duration: segment.duration, data: data))
                var total = shared.buffer.reduce(Duration.zero) { $0 + $1.duration }
                while total > maximumBuffered, shared.buffer.count > 1 {
                    total -= shared.buffer.removeFirst().duration
                }
                return total
            }
            bufferedPublisher.publish(buffered)
            if let start = segment.programDate {
                latencyPublisher.publish(max(.zero, now.duration(since: start.advanced(by: segment.duration))))
            }
            statePublisher.publish(.playing)
        }
        if playlist.ended {
            stop()
            return .seconds(3600)
        }
        return playlist.targetDuration
    }
}
