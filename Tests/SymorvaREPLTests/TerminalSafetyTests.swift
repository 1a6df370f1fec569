import Foundation
import SymorvaMachines
import SymorvaTesting
import Testing

@testable import SymorvaChat
@testable import SymorvaREPL

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@Suite("Remote text on the terminal")
struct TerminalTextTests {
    @Test("Control sequences in remote text are shown, never performed")
    func escapesControls() {
        #expect(TerminalText.escaped("\u{1B}]0;pwned\u{07}hi") == #"\u{1B}]0;pwned\u{7}hi"#)
        #expect(TerminalText.escaped("line\nPIN: ") == #"line\nPIN: "#)
        #expect(TerminalText.escaped("a\tb\rc\u{7F}d\u{9B}2J") == #"a\tb\rc\u{7F}d\u{9B}2J"#)
        #expect(TerminalText.escaped("evil\u{202E}gnp.exe") == #"evil\u{202E}gnp.exe"#)
        #expect(TerminalText.escaped("plain text, émoji 👍 and ünïcode") == "plain text, émoji 👍 and ünïcode")
    }

    @Test("Every printed line is sanitised, keeping the REPL's own line breaks")
    func outputSanitises() {
        let output = CapturingREPLOutput()
        output.print("one\u{1B}[2Jtwo\nthree")
        output.printError("\u{07}bell")
        output.printColumns([("ORB\nPIN:", "1.00")])
        #expect(output.texts == [#"one\u{1B}[2Jtwo"#, "three", #"\u{7}bell"#, #"  ORB\nPIN:  1.00"#])
    }

    @Test("A message whose body draws a fake PIN prompt stays on its own line")
    func timelineRowsAreOneLine() {
        let item = TimelineItem(
            id: .event(EventID("$e")), eventID: EventID("$e"), transactionID: nil, sender: "@mallory:evil.org",
            senderProfile: SenderProfile(displayName: "Mal\u{1B}]0;title\u{07}lory"), isOwn: false, timestamp: nil,
            content: .message(.text, body: "hello\nPIN: "), isEdited: false, reactions: [], inReplyTo: nil,
            readBy: [], sendState: nil)
        #expect(TimelinePrinter.render(item) == #"Mal\u{1B}]0;title\u{7}lory: hello\nPIN: "#)
    }
}

@Suite("Secret prompts on a terminal")
struct SecretPromptTerminalTests {
    /// Runs the REPL on a pseudo-terminal (Python's `pty`, the only portable way to give a child
    /// a controlling terminal from a test), types `login alice` and part of a password, and
    /// sends SIGINT as Ctrl-C would. Prints the echo flag at the prompt and after the exit.
    static let driver = #"""
        import os, pty, select, signal, sys, termios, time
        binary, manifest, data = sys.argv[1:4]
        pid, fd = pty.fork()
        if pid == 0:
            os.environ["SYMORVA_DATA_DIR"] = data
            os.execv(binary, [binary, "--config", manifest])
        seen = b""
        def wait_for(text):
            global seen
            deadline = time.time() + 20
            while text not in seen:
                if time.time() > deadline:
                    print("timeout waiting for %r; saw %r" % (text, seen)); sys.exit(3)
                ready, _, _ = select.select([fd], [], [], 0.1)
                if ready:
                    try: seen += os.read(fd, 4096)
                    except OSError: break
            seen = seen.split(text, 1)[1]
        wait_for(b"symorva> ")
        os.write(fd, b"login alice\n")
        wait_for(b"Password: ")
        time.sleep(0.2)
        echo = lambda: "on" if termios.tcgetattr(fd)[3] & termios.ECHO else "off"
        print("prompt echo", echo())
        os.write(fd, b"hunt")
        time.sleep(0.1)
        os.kill(pid, signal.SIGINT)
        _, status = os.waitpid(pid, 0)
        print("signal", os.WTERMSIG(status) if os.WIFSIGNALED(status) else "none")
        print("exit echo", echo())
        """#

    @Test("Ctrl-C at the password prompt ends the REPL with echo back on")
    func interruptRestoresEcho() async throws {
        let binary = try #require(BuiltExecutable.url(named: "symorva"), "the symorva binary is not built")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-tty-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A homeserver nobody listens on: launching and prompting need no network.
        let manifest = directory.appendingPathComponent("symorva.config.json")
        let json = """
            {"version": 1, "community": {"name": "tty"}, "homeserver": {"url": "http://127.0.0.1:9", "serverName": "localhost"},
             "services": {"url": "http://127.0.0.1:9"}, "modules": {}}
            """
        try json.write(to: manifest, atomically: true, encoding: .utf8)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "python3", "-c", Self.driver, binary.path, manifest.path, directory.appendingPathComponent("data").path,
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()

        #expect(process.terminationStatus == 0, "\(text)")
        #expect(
            text.split(separator: "\n") == ["prompt echo off", "signal \(SIGINT)", "exit echo on"], "\(text)")
    }
}

@Suite("State events on the timeline")
struct StateEventRowTests {
    func row(sender: UserID = "@alice:hs", name: String? = "alice", _ content: TimelineItemContent) -> String {
        let item = TimelineItem(
            id: .event(EventID("$e")), eventID: EventID("$e"), transactionID: nil, sender: sender,
            senderProfile: SenderProfile(displayName: name), isOwn: false, timestamp: nil, content: content,
            isEdited: false, reactions: [], inReplyTo: nil, readBy: [], sendState: nil)
        return TimelinePrinter.render(item)
    }

    @Test("State events read as sentences, not as their types")
    func sentences() {
        #expect(row(.stateChange(.created)) == "— alice created the room")
        #expect(row(.stateChange(.name("lounge"))) == #"— alice set the room name to "lounge""#)
        #expect(row(.stateChange(.topic("seeds and soil"))) == #"— alice set the topic to "seeds and soil""#)
        #expect(row(.stateChange(.encryptionEnabled)) == "— alice enabled encryption")
        #expect(row(.stateChange(.powerLevels)) == "— alice changed the power levels")
        #expect(row(.stateChange(.joinRule("public"))) == "— alice made the room public: anyone can join")
        #expect(row(.stateChange(.historyVisibility("shared"))) == "— alice made the history readable by all members")
        #expect(row(.stateChange(.avatar(isSet: true))) == "— alice changed the room picture")
        #expect(row(name: nil, .stateChange(.created)) == "— @alice:hs created the room")
    }

    @Test("Memberships read as who did what to whom")
    func memberships() {
        #expect(row(.membership(userID: "@alice:hs", membership: .join, displayName: "alice")) == "— alice joined")
        #expect(row(.membership(userID: "@bob:hs", membership: .invite, displayName: nil)) == "— alice invited @bob:hs")
        #expect(row(.membership(userID: "@alice:hs", membership: .leave, displayName: nil)) == "— alice left")
        #expect(row(.membership(userID: "@bob:hs", membership: .leave, displayName: nil)) == "— alice removed @bob:hs")
        #expect(row(.membership(userID: "@bob:hs", membership: .ban, displayName: nil)) == "— alice banned @bob:hs")
        #expect(
            row(sender: "@bob:hs", name: "bob", .membership(userID: "@bob:hs", membership: .knock, displayName: "bob"))
                == "— bob asked to join")
    }

    @Test("A room name that draws on the terminal is shown, never performed")
    func escaped() {
        #expect(row(.stateChange(.name("x\u{1B}[2Jy"))) == #"— alice set the room name to "x\u{1B}[2Jy""#)
    }
}
