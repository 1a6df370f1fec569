import Synchronization

/// Wall-clock seconds taken by `body`.
func seconds(_ body: () async -> Void) async -> Double {
    let start = ContinuousClock.now
    await body()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) * 1e-18
    }
    /// The duration in nanoseconds, as a `Double`.
    var nanoseconds: Double { seconds * 1e9 }
}

/// Several runs of one measurement, summarised by their median.
struct Repeated {
    /// One value per run, in run order.
    var values: [Double]

    /// The median of the runs.
    var median: Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
    /// The smallest run.
    var min: Double { values.min() ?? .nan }
    /// The largest run.
    var max: Double { values.max() ?? .nan }
}

/// The `fraction` percentile (0…1) of sorted values, nearest-rank.
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return .nan }
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
}

/// `1234567.8` → `1,234,568`.
func grouped(_ value: Double) -> String {
    guard value.isFinite else { return "n/a" }
    let integer = Int(value.rounded())
    let digits = String(integer.magnitude)
    var result = ""
    for (index, character) in digits.enumerated() {
        if index > 0 && (digits.count - index) % 3 == 0 { result += "," }
        result.append(character)
    }
    return integer < 0 ? "-" + result : result
}

/// `value` with `places` decimals.
func fixed(_ value: Double, _ places: Int) -> String {
    guard value.isFinite else { return "n/a" }
    var scale = 1.0
    for _ in 0..<places { scale *= 10 }
    let scaled = Int((value * scale).rounded())
    let whole = scaled / Int(scale)
    let fraction = String(abs(scaled) % Int(scale))
    if places == 0 { return String(whole) }
    let sign = scaled < 0 && whole == 0 ? "-" : ""
    return sign + String(whole) + "." + String(repeating: "0", count: places - fraction.count) + fraction
}

/// Pads `text` on the left (`right: false`) or the right to `width` characters.
func padded(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? text + padding : padding + text
}

/// A value the optimizer must assume is observed: keeps measured work from being deleted.
final class Sink: Sendable {
    private let storage = Atomic<Int>(0)
    /// Mixes `value` into the sink.
    func consume(_ value: Int) { storage.wrappingAdd(value, ordering: .relaxed) }
    /// Everything consumed so far, mixed.
    var checksum: Int { storage.load(ordering: .relaxed) }
}

/// `--name VALUE` options of a benchmark mode.
struct Options {
    private var values: [String: String] = [:]
    /// Names that the mode did not recognise, or flags missing their value.
    private(set) var problems: [String] = []

    /// Parses `arguments` as `--name value` pairs, accepting only `known` names.
    init(_ arguments: [String], known: Set<String>) {
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--"), known.contains(String(argument.dropFirst(2))) else {
                problems.append("unknown argument '\(argument)'")
                index += 1
                continue
            }
            guard index + 1 < arguments.count else {
                problems.append("missing value for '\(argument)'")
                break
            }
            values[String(argument.dropFirst(2))] = arguments[index + 1]
            index += 2
        }
    }

    /// The option's value as an integer of at least `minimum` (1: positive), or `fallback`; a
    /// bad value is a problem.
    mutating func integer(_ name: String, default fallback: Int, minimum: Int = 1) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text.replacing("_", with: "")), value >= minimum else {
            problems.append("'--\(name)' needs an integer of at least \(minimum), got '\(text)'")
            return fallback
        }
        return value
    }

    /// The option's value as a string, or `fallback`.
    func string(_ name: String, default fallback: String) -> String { values[name] ?? fallback }
}
