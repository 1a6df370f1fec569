// Helpers shared by the chat store benchmark modes (ingest, generate-sync, coldstart,
// timeline, store). Everything is namespaced under `ChatBench` so that it sits beside the
// runtime benchmark's helpers without clashing.

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

enum ChatBench {
    /// Whether `SYMORVA_BENCH_SYNCHRONOUS=FULL` asks for every commit to be durable
    /// (`synchronous=FULL` on the whole connection), to compare with the shipped `NORMAL`.
    static let synchronousFull = getenv("SYMORVA_BENCH_SYNCHRONOUS").map { String(cString: $0) == "FULL" } ?? false

    /// A failure that ends a benchmark mode with a message.
    struct Failure: Error {
        var message: String
    }

    /// Reads a whole file with POSIX calls (no Foundation: its buffers would count in memory).
    static func readFile(_ path: String) throws(Failure) -> [UInt8] {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw Failure(message: "cannot open \(path) (errno \(errno))") }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Failure(message: "cannot stat \(path)") }
        let size = Int(info.st_size)
        var failed = false
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var offset = 0
            while offset < size {
                let got = read(descriptor, buffer.baseAddress! + offset, size - offset)
                if got <= 0 {
                    failed = true
                    break
                }
                offset += got
            }
            count = offset
        }
        if failed { throw Failure(message: "cannot read \(path)") }
        return bytes
    }

    /// Writes `bytes` to `path`, replacing it.
    static func writeFile(_ path: String, _ bytes: [UInt8]) throws(Failure) {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard descriptor >= 0 else { throw Failure(message: "cannot create \(path) (errno \(errno))") }
        defer { close(descriptor) }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw Failure(message: "cannot write \(path)") }
    }

    /// A new empty folder under `/tmp`.
    static func temporaryDirectory() throws(Failure) -> String {
        var template = Array("/tmp/symorva-bench-XXXXXX".utf8CString)
        guard let path = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw Failure(message: "mkdtemp failed")
        }
        return String(cString: path)
    }

    /// Deletes a database file and its WAL and shared-memory companions.
    static func removeDatabase(_ path: String) {
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
    }

    /// Deletes an empty folder.
    static func removeDirectory(_ path: String) { rmdir(path) }

    /// A `kB` field of `/proc/self/status` (`VmHWM`, `VmRSS`), in bytes; 0 where unavailable.
    static func processStatus(_ field: String) -> Int {
        // procfs files report a size of 0: read until the end instead.
        let descriptor = open("/proc/self/status", O_RDONLY)
        guard descriptor >= 0 else { return 0 }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let got = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if got <= 0 { break }
            bytes += chunk[0..<got]
        }
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix(field + ":") {
            let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
            return (Int(String(digits)) ?? 0) * 1024
        }
        return 0
    }

    /// Resets the peak resident set size (`VmHWM`) to the current one (Linux `clear_refs` 5).
    static func resetPeakMemory() {
        let descriptor = open("/proc/self/clear_refs", O_WRONLY)
        guard descriptor >= 0 else { return }
        _ = write(descriptor, "5", 1)
        close(descriptor)
    }

    /// Seconds since an arbitrary point.
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// CPU seconds (user + system) used by the whole process so far: steadier than wall time
    /// when other work shares the cores.
    static func cpuTime() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// The median of `values`.
    static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// `value` with `places` decimals.
    static func format(_ value: Double, _ places: Int = 3) -> String {
        guard value.isFinite else { return "n/a" }
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = (value * scale).rounded()
        let whole = Int(scaled / scale)
        let fraction = Int(abs(scaled).truncatingRemainder(dividingBy: scale))
        let text = String(fraction)
        let sign = value < 0 && whole == 0 ? "-" : ""
        return places == 0
            ? String(whole) : sign + String(whole) + "." + String(repeating: "0", count: places - text.count) + text
    }

    /// Bytes as MB (10^6).
    static func megabytes(_ bytes: Int) -> String { format(Double(bytes) / 1e6, 1) + " MB" }

    /// Parses `--name value` options among `arguments`; positional arguments are returned apart.
    static func options(_ arguments: [String], known: Set<String>, flags: Set<String> = []) throws(Failure) -> (
        positional: [String], values: [String: String]
    ) {
        var positional: [String] = []
        var values: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            if argument.hasPrefix("--") {
                let name = String(argument.dropFirst(2))
                if flags.contains(name) {
                    values[name] = "1"
                    index += 1
                    continue
                }
                guard known.contains(name), index + 1 < arguments.count else {
                    throw Failure(message: "unknown or incomplete option \(argument)")
                }
                values[name] = arguments[index + 1]
                index += 2
            } else {
                positional.append(argument)
                index += 1
            }
        }
        return (positional, values)
    }

    /// A positive integer option, or `fallback`.
    static func integer(_ values: [String: String], _ name: String, _ fallback: Int) throws(Failure) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(String(text.filter { $0 != "_" })), value > 0 else {
            throw Failure(message: "--\(name) needs a positive integer")
        }
        return value
    }
}
