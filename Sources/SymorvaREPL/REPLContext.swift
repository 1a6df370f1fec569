import SymorvaRuntime

/// What the REPL was started with: the community manifest and the development environment.
///
/// Feature commands read it to build their clients (`login` needs the homeserver URL). Nothing
/// here is required: a REPL started without a manifest or an environment file still runs its
/// built-in commands, and a feature command that needs a value says which one is missing.
package struct REPLConfiguration: Sendable {
    /// The manifest (`symorva.config.json`) given with `--config`, else `SYMORVA_MANIFEST`.
    package var manifestPath: String?
    /// The environment file that was read (`--env-file`, else `SYMORVA_ENV_FILE`), if any.
    package var environmentFilePath: String?
    /// Variables from the process and the environment file.
    package var environment: REPLEnvironment

    /// A configuration; the manifest path falls back to `SYMORVA_MANIFEST` in `environment`.
    package init(
        manifestPath: String? = nil, environmentFilePath: String? = nil,
        environment: REPLEnvironment = REPLEnvironment()
    ) {
        self.manifestPath = manifestPath ?? environment[REPLEnvironment.manifestKey]
        self.environmentFilePath = environmentFilePath
        self.environment = environment
    }
}

/// Variables for the REPL's commands: the process environment over an environment file.
///
/// The development servers write `KEY=VALUE` lines (`SYMORVA_HOMESERVER_URL`,
/// `SYMORVA_ADMIN_PASSWORD`, …); a variable set in the process wins over the file, so a
/// caller can override one value without editing the file.
package struct REPLEnvironment: Sendable, Equatable {
    /// The homeserver's base URL.
    package static let homeserverURLKey = "SYMORVA_HOMESERVER_URL"
    /// The community services' base URL.
    package static let servicesURLKey = "SYMORVA_SERVICES_URL"
    /// The path of the community manifest.
    package static let manifestKey = "SYMORVA_MANIFEST"
    /// The path of the environment file itself.
    package static let environmentFileKey = "SYMORVA_ENV_FILE"

    /// Values read from the process environment.
    package var processValues: [String: String]
    /// Values read from the environment file.
    package var fileValues: [String: String]

    /// An environment from both sources.
    package init(processValues: [String: String] = [:], fileValues: [String: String] = [:]) {
        self.processValues = processValues
        self.fileValues = fileValues
    }

    /// The value of `key`: the process's, else the file's.
    package subscript(key: String) -> String? { processValues[key] ?? fileValues[key] }

    /// Every `SYMORVA_` variable from either source, the process's value winning.
    package var symorvaValues: [String: String] {
        fileValues.merging(processValues) { _, process in process }.filter { $0.key.hasPrefix("SYMORVA_") }
    }

    /// Whether a variable holds a secret and must be shown as `<redacted>`: its last word is
    /// `PASSWORD`, `TOKEN`, `SECRET`, `PIN`, `KEY` or `PASSPHRASE`, or any word is `PASSWORD` or
    /// `SECRET` (`SYMORVA_ADMIN_PASSWORD`, `SYMORVA_REGISTRATION_SHARED_SECRET`; not
    /// `SYMORVA_ACCESS_TOKEN_LIFETIME`).
    package static func isSecret(_ key: String) -> Bool {
        let words = key.uppercased().split(separator: "_")
        guard let last = words.last else { return false }
        if ["PASSWORD", "TOKEN", "SECRET", "PIN", "KEY", "PASSPHRASE"].contains(last) { return true }
        return words.contains { $0 == "PASSWORD" || $0 == "SECRET" || $0 == "PASSPHRASE" }
    }

    /// Parses an environment file: `KEY=VALUE` lines, optionally prefixed with `export `, with
    /// `#` comments and blank lines. A value may be wrapped in single or double quotes; double
    /// quotes understand `\"`, `\\` and `\n`. Lines that are not assignments are skipped, so a
    /// newer file with lines this version does not understand still loads.
    package static func parseFile(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            var line = rawLine.drop { $0 == " " || $0 == "\t" }
            if line.isEmpty || line.first == "#" { continue }
            if line.hasPrefix("export ") { line = line.dropFirst("export ".count).drop { $0 == " " } }
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = line[..<equals].trimmingSpaces()
            guard isValidName(key) else { continue }
            values[String(key)] = unquote(line[line.index(after: equals)...].trimmingSpaces())
        }
        return values
    }

    private static func isValidName(_ name: Substring) -> Bool {
        guard let first = name.first, first == "_" || first.isLetter else { return false }
        return name.allSatisfy { $0 == "_" || $0.isLetter || $0.isNumber }
    }

    private static func unquote(_ value: Substring) -> String {
        if value.count >= 2, value.first == "'", value.last == "'" {
            return String(value.dropFirst().dropLast())
        }
        guard value.count >= 2, value.first == "\"", value.last == "\"" else {
            // An unquoted value ends at an inline comment.
            return String(value.droppingInlineComment())
        }
        var result = ""
        var iterator = value.dropFirst().dropLast().makeIterator()
        while let character = iterator.next() {
            guard character == "\\", let escaped = iterator.next() else {
                result.append(character)
                continue
            }
            result.append(escaped == "n" ? "\n" : escaped)
        }
        return result
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        var trimmed = self
        while let first = trimmed.first, isSpace(first) { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, isSpace(last) { trimmed = trimmed.dropLast() }
        return trimmed
    }

    /// The text before an inline ` #` comment.
    fileprivate func droppingInlineComment() -> Substring {
        var previous: Character?
        for index in indices {
            if self[index] == "#", previous == " " || previous == "\t" { return self[..<index].trimmingSpaces() }
            previous = self[index]
        }
        return self
    }
}

/// A slot in which a feature keeps its state between commands (`login` keeps the signed-in
/// community for `rooms`). The key type is the slot's identity; `Value` is what it holds.
///
/// ```swift
/// enum CommunityKey: REPLStateKey { typealias Value = SymorvaCommunity }
/// context[CommunityKey.self] = community
/// ```
package protocol REPLStateKey {
    /// What the slot holds.
    associatedtype Value: Sendable
}

/// Everything a command can reach: output, configuration, secrets, the runtime's tracer and
/// log center, the registered commands and the features' state slots.
///
/// One context lives as long as its ``REPLSession``. It is safe to use from any task: the
/// mutable parts sit behind a lock that is never held across an `await`.
package final class REPLContext: Sendable {
    /// Where commands write.
    package let output: any REPLOutput
    /// The manifest and environment the REPL was started with.
    package let configuration: REPLConfiguration
    /// The tracer whose records `trace on` prints; hosts made by feature commands must use it.
    package let tracer: Tracer
    /// The log center whose threshold `log level` sets.
    package let logCenter: LogCenter

    private struct State: ~Copyable {
        var registry = REPLCommandRegistry()
        var input: (any REPLInput)?
        var isExitRequested = false
        var stopTracing: (@Sendable () -> Void)?
        var values: [ObjectIdentifier: any Sendable] = [:]
    }

    private let state = Lock(State())

    /// A context writing to `output`. Tests pass their own tracer and log center so that
    /// parallel tests do not see each other's traces.
    package init(
        output: any REPLOutput = StandardREPLOutput(),
        configuration: REPLConfiguration = REPLConfiguration(),
        tracer: Tracer = .shared,
        logCenter: LogCenter = .shared
    ) {
        self.output = output
        self.configuration = configuration
        self.tracer = tracer
        self.logCenter = logCenter
    }

    /// The commands registered so far.
    package var commands: REPLCommandRegistry { state.withLock { $0.registry } }

    func register(_ command: REPLCommand) { state.withLock { $0.registry.register(command) } }

    // MARK: Input

    func setInput(_ input: (any REPLInput)?) { state.withLock { $0.input = input } }

    /// Reads a secret from the session's input: without echo on a terminal, else the next line.
    ///
    /// The value comes back wrapped in ``/SymorvaRuntime/Secret`` so it cannot reach output or logs by accident.
    /// Fails with ``REPLError/inputEnded`` when the input has no more lines.
    package func readSecret(prompt: String) async throws(REPLError) -> Secret<String> {
        guard let input = state.withLock({ $0.input }), let value = await input.readSecret(prompt: prompt) else {
            throw .inputEnded
        }
        return Secret(value)
    }

    // MARK: Exit

    /// Asks the session to stop reading after the current command (`quit`).
    package func requestExit() { state.withLock { $0.isExitRequested = true } }

    /// Whether a command asked the session to stop.
    package var isExitRequested: Bool { state.withLock { $0.isExitRequested } }

    // MARK: Tracing

    /// Whether `trace on` is in effect.
    package var isTracing: Bool { state.withLock { $0.stopTracing != nil } }

    /// Starts printing every trace record as `trace: <record>`; does nothing when already tracing.
    package func startTracing() {
        let output = self.output
        state.withLock { state in
            guard state.stopTracing == nil else { return }
            state.stopTracing = tracer.addSink(ClosureTraceSink { record in output.print("trace: \(record)") })
        }
    }

    /// Stops printing trace records.
    package func stopTracing() {
        let stop = state.withLock { state -> (@Sendable () -> Void)? in
            defer { state.stopTracing = nil }
            return state.stopTracing
        }
        stop?()
    }

    // MARK: Feature state

    /// The value a feature keeps under `key`, or `nil`.
    package subscript<Key: REPLStateKey>(key: Key.Type) -> Key.Value? {
        get { state.withLock { $0.values[ObjectIdentifier(key)] } as? Key.Value }
        set { state.withLock { $0.values[ObjectIdentifier(key)] = newValue } }
    }
}
