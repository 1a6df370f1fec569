import Foundation
import SymorvaKit

// README.md's embedding example against the public API only (no `@testable`) and with the
// README's imports only (`import SymorvaKit` is enough): the two halves below are the
// example's lines verbatim, split where the test swaps in its own environment.

/// The example's first lines: the community from the manifest, in the platform's data folder.
/// Compiled, not run (it would use this machine's data folder).
func readmeCommunity(manifest: URL) throws -> SymorvaCommunity {
    let community = SymorvaCommunity(configuration: try .load(from: manifest))
    return community
}

/// The rest of the example, run by the test.
func readmeExample(community: SymorvaCommunity, password: String, conversationID: RoomID) async throws {
    await community.launch()  // restores the last account, no network
    if community.session.state.value.account == nil {
        try await community.session.signIn(username: "alice", password: Secret(password))
    }

    // Foundation modules are non-optional and follow the active account.
    let chat: ChatClient = community.chat
    let stop = chat.conversations.subscribe { list in  // observe, never poll
        print(list.status, list.items.map(\.id))  // .signedOut while nobody is signed in
    }
    await chat.conversations.refresh()  // fresh list and sync, now
    let conversation = try await chat.conversation(id: conversationID)  // throws .notSignedIn when signed out
    let receipt = try await conversation.send(.text("Governance call starts at 18:00."))
    print(receipt.state.value)  // .sending, .sent or .failed(reason)
    stop()

    // Optional modules are nil when the manifest disables them.
    if let wallet = community.wallet {
        print(try await wallet.refreshBalances())
    }
}
