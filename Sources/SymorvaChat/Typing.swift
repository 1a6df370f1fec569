import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

// Typing notifications and the fully-read marker of a conversation.

extension Conversation {
    /// How long a typing notification lasts unless renewed: the specification's example (30 s);
    /// an app that keeps typing calls ``setTyping(_:)`` again before it runs out.
    public static let typingTimeout: Duration = .seconds(30)

    /// Tells the room the member is typing (for ``typingTimeout``) or has stopped.
    ///
    /// - Throws: the server's refusal, `.accountEnded`.
    public func setTyping(_ isTyping: Bool) async throws(ChatError) {
        try client.ensureCurrent()
        do {
            _ = try await client.requester.send(
                ChatAPI.typing(roomID: id, userID: client.userID, isTyping: isTyping, timeout: Self.typingTimeout))
        } catch {
            throw ChatError(error, now: client.wallClock.now)
        }
    }

    /// The event the member has read up to (`m.fully_read`, set by ``markRead(upTo:)`` on any of
    /// their devices), once synced.
    ///
    /// - Throws: `.store` when it cannot be read.
    public func fullyReadEventID() async throws(ChatError) -> EventID? {
        do { return try await client.store.fullyRead(roomID: id).map(EventID.init(rawValue:)) } catch {
            throw .store(error)
        }
    }

    /// Reads who is typing from the store and publishes it (others only) when it changed.
    func refreshTyping() async {
        guard let users = try? await client.store.typingUsers(roomID: id) else { return }
        let others = users.filter { $0 != client.userID.rawValue }.map(UserID.init(stored:))
        if typingPublisher.value != others { typingPublisher.publish(others) }
    }
}
