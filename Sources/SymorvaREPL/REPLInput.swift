import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One line of REPL input and where it came from.
public struct REPLLine: Sendable, Equatable {
    /// The line's number in its source, from 1.
    public var number: Int
    /// The text, without its newline.
    public var text: String

    /// A numbered line.
    public init(number: Int, text: String) {
        self.number = number
        self.text = text
    }
}

/// Where a session reads command lines and secrets from.
///
/// The session asks for one line at a time and only after the previous command has finished,
/// so an input may print a prompt before reading.
public protocol REPLInput: Sendable {
    /// The next command line, or `nil` at the end of the input.
    func nextLine() async -> REPLLine?

    /// Reads a secret (password, PIN) for a running command, without echoing it where the
    /// input is a terminal. `nil` when the input has ended.
    func readSecret(prompt: String) async -> String?
}

/// Lines held in memory: tests, transcripts, `--script` files.
///
/// A secret is read from `secrets` when one is given, else it is the next line: a transcript
/// writes the secret as an input line right after the command that asks for it.
public final class REPLLinesInput: REPLInput {
    private let state: Mutex<(lines: [String], next: Int)>
    private let secrets: (any REPLInput)?

    /// Reads `lines` in order, numbering them from 1; secrets come from `secrets` or the lines.
    public init(_ lines: [String], secrets: (any REPLInput)? = nil) {
        self.state = Mutex((lines, 0))
        self.secrets = secrets
    }

    /// Splits `text` into lines (a final newline does not make an extra empty line).
    public convenience init(text: String, secrets: (any REPLInput)? = nil) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            $0.hasSuffix("\r") ? String($0.dropLast()) : String($0)
        }
        if lines.last == "" { lines.removeLast() }
        self.init(lines, secrets: secrets)
    }

    public func nextLine() async -> REPLLine? { take() }

    public func readSecret(prompt: String) async -> String? {
        if let secrets { return await secrets.readSecret(prompt: prompt) }
        return take()?.text
    }

    private func take() -> REPLLine? {
        state.withLock { state in
            guard state.next < state.lines.count else { return nil }
            defer { state.next += 1 }
            return REPLLine(number: state.next + 1, text: state.lines[state.next])
        }
    }
}

/// The process's standard input.
///
/// On a terminal it prints `prompt` before each line and reads secrets with echo off
/// (termios). On a pipe or a file it prints no prompt and a secret is simply the next line,
/// so `printf 'login alice\nhunter2\n' | symorva` works. Reads happen on one serial queue,
/// never on the concurrency pool, so a waiting REPL does not hold up the hosts.
public final class StandardREPLInput: REPLInput {
    /// Whether standard input is a terminal.
    public let isTerminal: Bool
    /// What is printed before each command line on a terminal.
    public let prompt: String

    private let queue = DispatchQueue(label: "symorva.repl.stdin")
    private let lineCount = Mutex(0)

    /// Standard input, with `prompt` shown on a terminal.
    public init(prompt: String = "symorva> ") {
        self.isTerminal = Terminal.isStandardInputTerminal
        self.prompt = prompt
    }

    public func nextLine() async -> REPLLine? {
        let prompt = isTerminal ? self.prompt : nil
        guard let text = await read(prompt: prompt, hidden: false) else { return nil }
        let number = lineCount.withLock { count in
            count += 1
            return count
        }
        return REPLLine(number: number, text: text)
    }

    public func readSecret(prompt: String) async -> String? {
        guard isTerminal else {
            let line = await read(prompt: nil, hidden: false)
            if line != nil { lineCount.withLock { $0 += 1 } }
            return line
        }
        return await read(prompt: prompt, hidden: true)
    }

    private func read(prompt: String?, hidden: Bool) async -> String? {
        await withCheckedContinuation { continuation in
            queue.async {
                if let prompt { Terminal.write(prompt, to: 1) }
                let line: String?
                if hidden {
                    line = Terminal.withEchoDisabled { readLine(strippingNewline: true) }
                    // The user's Return was not echoed: end the prompt's line ourselves.
                    Terminal.write("\n", to: 1)
                } else {
                    line = readLine(strippingNewline: true)
                    if line == nil, prompt != nil { Terminal.write("\n", to: 1) }
                }
                continuation.resume(returning: line)
            }
        }
    }
}

/// Reads a whole text file, for `--script` and environment files.
enum TextFile {
    /// The file's contents as UTF-8 (invalid bytes are repaired), or why it could not be read.
    static func read(path: String) throws(REPLError) -> String {
        guard let file = fopen(path, "rb") else {
            throw .unreadableFile(path: path, reason: String(cString: strerror(errno)))
        }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, file) }
            bytes.append(contentsOf: buffer[0..<count])
            if count < buffer.count {
                if ferror(file) != 0 { throw .unreadableFile(path: path, reason: "read error") }
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Whether a regular file or a directory exists at `path`.
    static func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
