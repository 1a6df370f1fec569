import Foundation
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// Media tokens are secrets the services keep (no member receives one): a meeting with every log
/// at `.trace` and every transition traced (joins on stage, a promotion, a demotion, a fresh
/// descriptor) must not show one anywhere. The tokens are read from the services' database.
/// Part of the serialized meetings suite.
extension MeetingIntegrationTests {
    @Test("No media-session token reaches a log or a trace")
    func noMediaTokenInLogs() async throws {
        let shared = SharedLogCapture()
        defer { shared.finish() }
        let recorder = ObservableTraceRecorder()
        let tracer = Tracer()
        _ = tracer.addSink(recorder)
        let host = try await MeetingMember.register("mt-chost", in: environment, transport: transport, tracer: tracer)
        let bob = try await MeetingMember.register("mt-cbob", in: environment, transport: transport, tracer: tracer)
        let carol = try await MeetingMember.register("mt-ccarol", in: environment, transport: transport, tracer: tracer)
        let roomID = try await host.createRoom()
        try await bob.joinRoom(roomID)
        try await carol.joinRoom(roomID)
        let hostRoom = try await host.meetings.join(roomID: roomID)
        let bobRoom = try await bob.meetings.join(roomID: roomID)
        let carolRoom = try await carol.meetings.join(roomID: roomID)
        var tokens = try ServicesDatabase.mediaTokens(hostRoom.meetingID)
        #expect(tokens.count == 2)
        try await hostRoom.demote(bob.userID)
        try await hostRoom.promote(carol.userID)
        try await carolRoom.role.wait(timeout: .seconds(15)) { $0.kind == .stage }
        tokens += try ServicesDatabase.mediaTokens(hostRoom.meetingID)
        try await bobRoom.role.wait(timeout: .seconds(15)) { $0.kind == .listener }
        try await hostRoom.end()
        try await carolRoom.state.wait(timeout: .seconds(15)) { $0.isFinal }

        #expect(Set(tokens).count == 3)
        let logs = shared.text
        let traces = recorder.records.map(\.description).joined(separator: "\n")
        #expect(traces.contains("Meeting["), "no meeting records in the trace")
        #expect(traces.contains("mediaSessionResponse"))
        for token in tokens {
            #expect(!logs.contains(token), "a media token in the log")
            #expect(!traces.contains(token), "a media token in the trace")
        }
    }
}
