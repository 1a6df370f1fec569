import Foundation
import SymorvaAIStudio
import SymorvaE2EE
import SymorvaKit
import SymorvaMachines
import SymorvaRuntime
import Testing

/// The studio in an end-to-end encrypted room: the messages are decrypted on the device and
/// leave only in the granted summarize request.
extension StudioIntegrationTests {
    @Test("In an encrypted room the granted messages are decrypted on the device and summarized")
    func encryptedRoom() async throws {
        let fixture = StudioCommunity()
        _ = try await fixture.community.session.register(
            username: DevEnvironment.uniqueUsername("sealed"), password: testPassword)
        let crypto = try #require(fixture.community.module(AccountCrypto.self))
        try await crypto.state.wait(timeout: .seconds(60)) { state in
            if case .ready(let work) = state { return !work.isUploading }
            return false
        }
        let room = try await fixture.community.chat.createRoom(name: "Sealed plans", isEncrypted: true)
        var ids: [EventID] = []
        for body in Self.bodies.prefix(3) {
            let receipt = try await fixture.community.chat.conversation(id: room).send(.text(body))
            try await receipt.waitUntilSent()
            guard case .sent(let id) = receipt.state.value else { throw IntegrationFailure("not sent") }
            ids.append(id)
        }
        let studio = try #require(fixture.community.aiStudio)
        studio.consentPresenter = ClosureConsentPresenter { _ in .approved }
        let grant = try await studio.requestGrant(for: room, scope: .selectedMessages(ids))
        let summary = try await studio.summarize(using: grant)
        #expect(summary.itemCount == 3)
        #expect(Set(summary.citedEventIDs).isSubset(of: ids))
        #expect(
            summary.points.contains { point in
                Self.bodies.prefix(3).contains { $0.contains(point.text) || point.text.contains($0) }
            })
    }
}
