/// One REPL command: its name, how to call it, what it does, how its arguments are read and
/// what it runs.
///
/// Features add commands by building values of this type and registering them with
/// ``REPLSession/register(_:)-(REPLCommand)``. A command either runs a handler or, built with
/// ``group(_:summary:details:subcommands:)``, dispatches to subcommands by its next word
/// (`wallet send <member> <amount> <asset>`).
///
/// ```swift
/// let send = REPLCommand(
///     "send", usage: "wallet send <member> <amount> <asset>", summary: "send money to a member",
///     parse: { arguments throws(REPLError) in
///         (member: try arguments.next(), amount: try arguments.next(), asset: try arguments.next())
///     },
///     run: { transfer, context async throws(REPLError) in
///         let pin = try await context.readSecret(prompt: "PIN: ")
///         context.output.print("sent \(transfer.amount) \(transfer.asset)")
///     })
/// session.register(.group("wallet", summary: "wallet commands", subcommands: [send]))
/// ```
package struct REPLCommand: Sendable {
    /// The word that selects the command (`trace`), or the subcommand word inside a group (`send`).
    package let name: String
    /// Other words that select the same command (`exit` for `quit`).
    package let aliases: [String]
    /// The full usage line shown by `help` and in usage errors (`trace on|off`).
    package let usage: String
    /// One line that says what the command is for.
    package let summary: String
    /// More help shown by `help <command>`, or `nil`.
    package let details: String?
    /// The subcommands of a group; empty for a command that runs a handler.
    package let subcommands: [REPLCommand]

    let body: (@Sendable (inout REPLArguments, REPLContext) async throws(REPLError) -> Void)?

    /// A command whose arguments are read by `parse` and then handed to `run`.
    ///
    /// `parse` reads words from the ``REPLArguments`` cursor; any word it leaves unread makes
    /// the line a usage error, so a parser never has to check for extra words itself. Parsing
    /// finishes before anything runs: a bad line has no effects.
    package init<Arguments: Sendable>(
        _ name: String,
        aliases: [String] = [],
        usage: String,
        summary: String,
        details: String? = nil,
        parse: @escaping @Sendable (inout REPLArguments) throws(REPLError) -> Arguments,
        run: @escaping @Sendable (Arguments, REPLContext) async throws(REPLError) -> Void
    ) {
        self.name = name
        self.aliases = aliases
        self.usage = usage
        self.summary = summary
        self.details = details
        self.subcommands = []
        self.body = { arguments, context async throws(REPLError) in
            let parsed = try parse(&arguments)
            try arguments.finish()
            try await run(parsed, context)
        }
    }

    /// A command that takes no arguments.
    package init(
        _ name: String,
        aliases: [String] = [],
        usage: String? = nil,
        summary: String,
        details: String? = nil,
        run: @escaping @Sendable (REPLContext) async throws(REPLError) -> Void
    ) {
        self.init(
            name, aliases: aliases, usage: usage ?? name, summary: summary, details: details,
            parse: { _ throws(REPLError) in () },
            run: { _, context async throws(REPLError) in try await run(context) })
    }

    private init(name: String, summary: String, details: String?, subcommands: [REPLCommand]) {
        self.name = name
        self.aliases = []
        self.usage = "\(name) \(subcommands.map(\.name).joined(separator: "|")) …"
        self.summary = summary
        self.details = details
        self.subcommands = subcommands
        self.body = nil
    }

    /// A command that selects one of `subcommands` by its next word.
    ///
    /// Each subcommand's `name` is the word after the group's name, and its `usage` should be
    /// the full line (`wallet send <member> <amount> <asset>`). Groups may nest.
    package static func group(
        _ name: String, summary: String, details: String? = nil, subcommands: [REPLCommand]
    ) -> REPLCommand {
        precondition(!subcommands.isEmpty, "REPL command group '\(name)' has no subcommands")
        return REPLCommand(name: name, summary: summary, details: details, subcommands: subcommands)
    }

    /// Whether this command only dispatches to subcommands.
    package var isGroup: Bool { body == nil }

    /// Whether `word` selects this command.
    package func answers(to word: String) -> Bool { name == word || aliases.contains(word) }

    /// The subcommand selected by `word`, if any.
    package func subcommand(named word: String) -> REPLCommand? {
        subcommands.first { $0.answers(to: word) }
    }

    /// This command and every command below it that runs a handler, in registration order.
    package var leaves: [REPLCommand] {
        isGroup ? subcommands.flatMap(\.leaves) : [self]
    }
}

/// A cursor over a command's argument words, handed to a command's parser.
///
/// Every reading method throws the command's usage error when the words do not fit, so a
/// parser reads what it expects and the REPL reports `error: usage: …` for everything else.
package struct REPLArguments: Sendable {
    /// Every argument word, after the command's name (and subcommand names).
    package let words: [String]
    /// The usage line of the command being parsed.
    package let usage: String
    /// The index of the next unread word.
    package private(set) var position = 0

    /// A cursor at the first of `words`.
    package init(_ words: [String], usage: String) {
        self.words = words
        self.usage = usage
    }

    /// Whether every word has been read.
    package var isAtEnd: Bool { position >= words.count }

    /// The words not read yet.
    package var remaining: ArraySlice<String> { words[min(position, words.count)...] }

    /// The usage error of this command, for parsers that find a problem themselves.
    package var usageError: REPLError { .usage(usage) }

    /// Reads the next word; a usage error when there is none.
    package mutating func next() throws(REPLError) -> String {
        guard let word = optional() else { throw usageError }
        return word
    }

    /// Reads the next word if there is one.
    package mutating func optional() -> String? {
        guard !isAtEnd else { return nil }
        defer { position += 1 }
        return words[position]
    }

    /// Reads the next word, which must be one of `choices`.
    package mutating func next(oneOf choices: [String]) throws(REPLError) -> String {
        let word = try next()
        guard choices.contains(word) else { throw usageError }
        return word
    }

    /// Reads the next word as an integer within `range`.
    package mutating func nextInteger(in range: ClosedRange<Int> = Int.min...Int.max) throws(REPLError) -> Int {
        let word = try next()
        guard let value = Int(word), range.contains(value) else {
            throw .invalidArgument(
                "'\(word)' is not a whole number in \(range.lowerBound)...\(range.upperBound) — usage: \(usage)")
        }
        return value
    }

    /// Reads every remaining word; a usage error when fewer than `minimum` remain.
    package mutating func rest(minimum: Int = 0) throws(REPLError) -> [String] {
        guard words.count - position >= minimum else { throw usageError }
        defer { position = words.count }
        return Array(remaining)
    }

    /// Fails with the usage error when words are left unread. The REPL calls this after a parser.
    package func finish() throws(REPLError) {
        guard isAtEnd else { throw usageError }
    }
}

/// The commands a session knows, by name.
package struct REPLCommandRegistry: Sendable {
    /// Every registered command, sorted by name.
    package private(set) var commands: [REPLCommand] = []

    /// An empty registry.
    package init() {}

    /// Adds a command. Registering a name or alias twice is a programming error and traps,
    /// naming the word, because two features would otherwise silently fight over it.
    package mutating func register(_ command: REPLCommand) {
        for word in [command.name] + command.aliases {
            precondition(self.command(named: word) == nil, "REPL command '\(word)' is registered twice")
        }
        commands.append(command)
        commands.sort { $0.name < $1.name }
    }

    /// The command that answers to `word`, if any.
    package func command(named word: String) -> REPLCommand? {
        commands.first { $0.answers(to: word) }
    }

    /// Every word that selects a command.
    package var words: [String] { commands.flatMap { [$0.name] + $0.aliases } }

    /// Resolves the words of a line to the command that runs and its argument words.
    ///
    /// Walks down groups one word at a time; fails with `unknownCommand` or
    /// `unknownSubcommand` (with a suggestion), or with a group's usage when a group ends the line.
    package func resolve(_ words: [String]) throws(REPLError) -> (command: REPLCommand, arguments: [String]) {
        guard let first = words.first else { throw .usage("help") }
        guard var command = command(named: first) else {
            throw .unknownCommand(first, suggestion: REPLSuggestion.closest(to: first, among: self.words))
        }
        var index = 1
        var path = command.name
        while command.isGroup {
            guard index < words.count else { throw .usage(command.usage) }
            let word = words[index]
            guard let subcommand = command.subcommand(named: word) else {
                let names = command.subcommands.flatMap { [$0.name] + $0.aliases }
                throw .unknownSubcommand(
                    command: path, name: word, suggestion: REPLSuggestion.closest(to: word, among: names))
            }
            command = subcommand
            path += " " + subcommand.name
            index += 1
        }
        return (command, Array(words[index...]))
    }
}
