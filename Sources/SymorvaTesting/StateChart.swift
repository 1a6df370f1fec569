import Foundation
import SymorvaRuntime

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// A machine's chart, read from `StateCharts/<Machine>.scxml` in the SCXML subset described
/// in `StateCharts/README.md`.
///
/// The subset is flat: one `<scxml name="…" initial="…">` root, `<state id="…">` children,
/// and `<transition event="…" target="…" cond="…"/>` inside states. A transition without
/// `target` keeps the state (an internal transition, the code's `.stay`). An event that a
/// state does not list is ignored in that state. Several transitions for one event in one
/// state are alternatives chosen by the event's or the state's data; `cond` says which, in
/// words, and the checker requires each alternative to be produced by some sample.
public struct StateChart: Sendable, Equatable {
    /// One arrow of the chart.
    public struct Transition: Sendable, Equatable, CustomStringConvertible {
        /// The state the arrow leaves.
        public var source: String
        /// The event that triggers it.
        public var event: String
        /// The state it enters; `nil` keeps the source state.
        public var target: String?
        /// The guard, in words; informational.
        public var condition: String?

        /// Creates an arrow.
        public init(source: String, event: String, target: String?, condition: String? = nil) {
            self.source = source
            self.event = event
            self.target = target
            self.condition = condition
        }

        /// The state after the arrow: ``target``, or ``source`` for an internal transition.
        public var resolvedTarget: String { target ?? source }

        /// `source --event--> target [cond]`.
        public var description: String {
            let guardText = condition.map { " [\($0)]" } ?? ""
            return "\(source) --\(event)--> \(resolvedTarget)\(guardText)"
        }
    }

    /// The machine's name (`scxml/@name`), which must equal `StateMachine.name`.
    public var name: String
    /// The initial state id (`scxml/@initial`).
    public var initial: String
    /// Every state id, in document order.
    public var stateIDs: [String]
    /// Every transition, in document order.
    public var transitions: [Transition]

    /// Creates a chart from parts (tests of the checker build charts this way).
    public init(name: String, initial: String, stateIDs: [String], transitions: [Transition]) {
        self.name = name
        self.initial = initial
        self.stateIDs = stateIDs
        self.transitions = transitions
    }

    /// Every event name the chart mentions, in order of first appearance.
    public var eventNames: [String] {
        var seen = Set<String>()
        return transitions.map(\.event).filter { seen.insert($0).inserted }
    }

    /// The alternatives for `event` in `state`; empty when the chart ignores the event there.
    public func transitions(from state: String, on event: String) -> [Transition] {
        transitions.filter { $0.source == state && $0.event == event }
    }

    /// Reads and validates the chart at `url`.
    public init(contentsOf url: URL) throws(ChartError) {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw .fileNotFound(url.path)
        }
        try self.init(data: data, source: url.lastPathComponent)
    }

    /// Parses and validates a chart document; `source` names it in errors.
    public init(data: Data, source: String = "chart") throws(ChartError) {
        // Charts are UTF-8. FoundationXML on Linux traps on a comment that is not valid UTF-8
        // (found by `Scripts/fuzz scxml`), so such a file is rejected before it is parsed.
        guard String(validating: data, as: UTF8.self) != nil else {
            throw .malformedXML("\(source): not valid UTF-8")
        }
        // FoundationXML on Linux crashes (strlen of a null pointer) on a processing instruction
        // without data, such as `<?xml?>` (found by `Scripts/fuzz scxml`). The subset has none
        // but the XML declaration, so any other `<?` is rejected before parsing.
        if let problem = Self.processingInstructionProblem(in: data) {
            throw .malformedXML("\(source): \(problem)")
        }
        let reader = SCXMLReader(source: source)
        let parser = XMLParser(data: data)
        parser.delegate = reader
        let parsed = parser.parse()
        if let error = reader.error { throw error }
        guard parsed, let root = reader.root else {
            let reason = parser.parserError.map { String(describing: $0) } ?? "no <scxml> root"
            throw .malformedXML("\(source): \(reason)")
        }
        self.init(name: root.name, initial: root.initial, stateIDs: reader.stateIDs, transitions: reader.transitions)
        try validate(source: source)
    }

    private func validate(source: String) throws(ChartError) {
        var ids = Set<String>()
        for id in stateIDs where !ids.insert(id).inserted {
            throw .invalid("\(source): state id \(id) appears twice")
        }
        guard ids.contains(initial) else {
            throw .invalid("\(source): initial state \(initial) is not a state of the chart")
        }
        var arrows = Set<String>()
        for transition in transitions {
            if let target = transition.target, !ids.contains(target) {
                throw .invalid("\(source): \(transition) targets unknown state \(target)")
            }
            let key = "\(transition.source)|\(transition.event)|\(transition.resolvedTarget)"
            if !arrows.insert(key).inserted {
                throw .invalid("\(source): \(transition) appears twice")
            }
        }
    }
}

/// Why a chart could not be found or read.
public enum ChartError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No directory containing `Package.swift` above the given file.
    case packageRootNotFound(startingAt: String)
    /// The chart file does not exist or cannot be read.
    case fileNotFound(String)
    /// The file is not well-formed XML.
    case malformedXML(String)
    /// The file uses SCXML outside the supported subset (nested states, `<parallel>`, …).
    case unsupported(String)
    /// The file is in the subset but inconsistent (unknown target, duplicate id, missing attribute).
    case invalid(String)

    /// A one-line explanation.
    public var description: String {
        switch self {
        case .packageRootNotFound(let path): "no Package.swift in any directory above \(path)"
        case .fileNotFound(let path): "chart not found: \(path)"
        case .malformedXML(let reason): "malformed chart: \(reason)"
        case .unsupported(let reason): "unsupported SCXML: \(reason)"
        case .invalid(let reason): "invalid chart: \(reason)"
        }
    }
}

/// The XMLParser delegate that reads the subset; used synchronously during one parse.
private final class SCXMLReader: NSObject, XMLParserDelegate {
    struct Root {
        var name: String
        var initial: String
    }

    let source: String
    var root: Root?
    var stateIDs: [String] = []
    var transitions: [StateChart.Transition] = []
    var error: ChartError?
    private var path: [String] = []

    init(source: String) { self.source = source }

    func parser(
        _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
        qualifiedName: String?, attributes: [String: String] = [:]
    ) {
        guard error == nil else { return }
        let parent = path.last
        path.append(elementName)
        switch (parent, elementName) {
        case (nil, "scxml"):
            guard let name = attributes["name"], let initial = attributes["initial"] else {
                return fail(.invalid("\(source): <scxml> needs name and initial attributes"), parser)
            }
            root = Root(name: name, initial: initial)
        case ("scxml", "state"):
            guard let id = attributes["id"], !id.isEmpty else {
                return fail(.invalid("\(source): <state> without id"), parser)
            }
            stateIDs.append(id)
        case ("state", "transition"):
            readTransition(attributes, parser)
        default:
            let place = parent.map { "<\($0)>" } ?? "the document root"
            fail(.unsupported("\(source): <\(elementName)> inside \(place)"), parser)
        }
    }

    private func readTransition(_ attributes: [String: String], _ parser: XMLParser) {
        let events = (attributes["event"] ?? "").split(separator: " ").map(String.init)
        guard let state = stateIDs.last, !events.isEmpty else {
            return fail(.invalid("\(source): <transition> without event"), parser)
        }
        if let type = attributes["type"], type != "internal", type != "external" {
            return fail(.unsupported("\(source): transition type \(type)"), parser)
        }
        let target = attributes["target"].flatMap { $0.isEmpty ? nil : $0 }
        if let target, target.contains(" ") {
            return fail(.unsupported("\(source): several targets in \(state) on \(events[0])"), parser)
        }
        for event in events {
            if event.contains("*") || event.hasSuffix(".") {
                return fail(.unsupported("\(source): event descriptor \(event)"), parser)
            }
            transitions.append(
                StateChart.Transition(source: state, event: event, target: target, condition: attributes["cond"]))
        }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        _ = path.popLast()
    }

    private func fail(_ chartError: ChartError, _ parser: XMLParser) {
        error = chartError
        parser.abortParsing()
    }
}

extension StateChart {
    /// Why the document's processing instructions are outside the subset, or `nil`: only an XML
    /// declaration with a version, at the very start, is allowed.
    static func processingInstructionProblem(in data: Data) -> String? {
        let bytes = [UInt8](data)
        let starts = bytes.indices.dropLast().filter {
            bytes[$0] == UInt8(ascii: "<") && bytes[$0 + 1] == UInt8(ascii: "?")
        }
        guard let first = starts.first else { return nil }
        guard starts == [0] else { return "processing instructions are not part of the chart subset" }
        // `<?xml version="…" …?>`: nothing but the declaration's own text up to its `?>`.
        guard
            let end = bytes.indices.dropFirst(2).dropLast().first(where: {
                bytes[$0] == UInt8(ascii: "?") && bytes[$0 + 1] == UInt8(ascii: ">")
            })
        else { return "the XML declaration is not closed" }
        let declaration = bytes[(first + 2)..<end]
        guard declaration.starts(with: Array("xml version=".utf8)),
            !declaration.contains(UInt8(ascii: "<")), !declaration.contains(UInt8(ascii: ">"))
        else { return "the XML declaration must name its version" }
        return nil
    }
}
