import Foundation
import SymorvaChat
import SymorvaMachines
import SymorvaRuntime
import Testing

@Suite("Media cache: LRU eviction under the cap, one download per key")
struct MediaCacheTests {
    static func directory() -> String {
        FileManager.default.temporaryDirectory.appending(path: "symorva-cache-\(UUID().uuidString)").path
    }

    /// A fetch writing `count` bytes and counting its calls.
    static func writer(_ count: Int, calls: Lock<[String]>) -> @Sendable (String) async throws(MediaError) -> Void {
        { (path: String) async throws(MediaError) in
            calls.withLock { $0.append(String(path.split(separator: "/").last!)) }
            guard (try? Data(repeating: 7, count: count).write(to: URL(fileURLWithPath: path))) != nil else {
                throw MediaError.fileNotWritable
            }
        }
    }

    @Test("A hit does not download again; over the cap the least recently used file goes first")
    func leastRecentlyUsedGoes() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = MediaCache(directory: directory, capacity: 250)
        let calls = Lock<[String]>([])
        let a = try await cache.file(for: "a", fetch: Self.writer(100, calls: calls))
        _ = try await cache.file(for: "b", fetch: Self.writer(100, calls: calls))
        #expect(try await cache.file(for: "a", fetch: Self.writer(100, calls: calls)) == a)  // a is used again
        _ = try await cache.file(for: "c", fetch: Self.writer(100, calls: calls))
        #expect(calls.withLock { $0 } == ["a", "b", "c"])
        let kept = try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
        #expect(kept == ["a", "c"])
        #expect(cache.size() == 200)
        _ = try await cache.file(for: "b", fetch: Self.writer(100, calls: calls))
        #expect(calls.withLock { $0 } == ["a", "b", "c", "b"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["b", "c"])
    }

    @Test("Concurrent requests for one key share one download")
    func oneDownloadPerKey() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = MediaCache(directory: directory, capacity: 1 << 20)
        let calls = Lock<[String]>([])
        let gate = ObservableValue<Bool>.Publisher(false)
        let fetch: @Sendable (String) async throws(MediaError) -> Void = { (path: String) async throws(MediaError) in
            calls.withLock { $0.append(path) }
            _ = try? await gate.observable.wait { $0 }
            try? Data([1, 2, 3]).write(to: URL(fileURLWithPath: path))
        }
        async let first = cache.file(for: "k", fetch: fetch)
        async let second = cache.file(for: "k", fetch: fetch)
        // Both callers reach the download before it may finish: the second has joined the first.
        _ = try await cache.joinsForTesting.wait { $0 >= 1 }
        gate.publish(true)
        let paths = try await [first, second]
        #expect(paths[0] == paths[1])
        #expect(calls.withLock { $0.count } == 1)
    }

    @Test("A failed download leaves nothing; clear empties the folder; leftovers of a crash go at open")
    func failuresAndClear() async throws {
        let directory = Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = MediaCache(directory: directory, capacity: 1 << 20)
        await #expect(throws: MediaError.network) {
            try await cache.file(for: "x") { (_: String) async throws(MediaError) in throw .network }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        let calls = Lock<[String]>([])
        _ = try await cache.file(for: "y", fetch: Self.writer(10, calls: calls))
        try Data([1]).write(to: URL(fileURLWithPath: directory + "/y.part-crashed"))
        _ = MediaCache(directory: directory, capacity: 1 << 20)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["y"])
        cache.clear()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
    }

    @Test("Keys: one file per media, per thumbnail size and method")
    func keys() throws {
        let uri = try #require(MediaURI("mxc://localhost:8448/AbC"))
        #expect(MediaCache.key(for: uri) == "localhost_8448_AbC")
        #expect(
            MediaCache.thumbnailKey(for: uri, width: 96, height: 64, cropped: true) == "localhost_8448_AbC.thumb-96x64c"
        )
    }
}
