import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaMediaGStreamer
import SymorvaMeetings
import SymorvaRuntime
import SymorvaTesting
import Testing

/// `meeting join <room> --tone <hz>` typed into the built `symorva` program, on a machine
/// without a microphone: a plain `meeting join` says that no capture device is there and how to
/// join anyway; with `--tone 440` the member joins the stage with a test tone, turns it on, and
/// the other stage member hears it in the room's decoded mix.
extension MeetingMediaIntegrationTests {
    @Test(
        "meeting join --tone 440 puts a test tone on stage: 'meeting mic on' and the other stage member hears 440 Hz",
        .requires(DevEnvironment.current?.manifestPath != nil, "needs the dev servers' manifest"),
        .requires(REPLProcess.binary != nil, "needs the symorva binary (swift build)"))
    func replJoinsWithATone() async throws {
        let bob = try await MeetingMember.register(
            "md-repl-b", in: environment, transport: transport, engine: engine(tone: 660, tracer: Tracer()))
        let roomID = try await bob.createRoom()
        let bobRoom = try await bob.meetings.join(roomID: roomID)
        let session = try #require(bobRoom.stageSession as? JanusMediaSession)
        try await session.connect()
        let detector = ToneDetector(frequency: 440)
        let stop = session.audioMeter.listenToIncomingSamples { samples, rate in detector.take(samples, rate: rate) }
        defer { stop() }

        let name = DevEnvironment.uniqueUsername("md-repl-a")
        _ = try await RegisteredAccount.register(
            name, password: testPassword.exposedValue, in: environment, transport: transport)
        let data = TemporaryDataDirectory("meeting-repl")
        let repl = try REPLProcess(
            environment: ["SYMORVA_DATA_DIR": data.path, "SYMORVA_MANIFEST": environment.manifestPath!])
        repl.send("login \(name) --password-stdin")
        repl.send(testPassword.exposedValue)
        try await repl.waitForLine { $0.hasPrefix("signed in as @\(name):") }
        repl.send("join \(roomID.rawValue)")
        try await repl.waitForLine { $0.contains("joined") && $0.contains(roomID.rawValue) }
        if !GStreamerSupport.hasCaptureDevice {
            // Without a microphone the stage says what is missing and how to join anyway.
            repl.send("meeting join \(roomID.rawValue)")
            try await repl.waitForLine {
                $0 == "media: no audio capture device (microphone) here: join with a test tone instead "
                    + "(meeting join <room> --tone 440)"
            }
            repl.send("meeting leave")
            try await repl.waitForLine { $0.hasPrefix("left ") }
        }
        repl.send("meeting join \(roomID.rawValue) --tone 440")
        try await repl.waitForLine {
            $0.contains(" on stage (media room ")
                && $0.hasSuffix(", a 440 Hz test tone for a microphone: 'meeting mic on' sends it)")
        }
        repl.send("meeting mic on")
        try await repl.waitForLine { $0 == "microphone on" }
        try await waitUntil(timeout: .seconds(15), "Bob hears the REPL member's 440 Hz") { detector.hears() }
        #expect(
            repl.transcript.value.output.filter { $0.hasPrefix("media: ") }.count
                == (GStreamerSupport.hasCaptureDevice ? 0 : 1), "the tone's media engine failed")

        repl.send("meeting leave")
        try await repl.waitForLine { $0.hasPrefix("left ") }
        repl.send("quit")
        #expect(try await repl.finish() == 0)
        await session.disconnect()
        try await bobRoom.leave()
    }
}
