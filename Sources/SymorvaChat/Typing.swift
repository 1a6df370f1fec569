import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

// Typing notifications and the fully-read marker of a conversation.

extension Conversation {
    /// How long a typing notification lasts unless renewed: the specification's example (30 s).
    public static let typingTimeout: Duration = .seconds(30)
    /// How old the last typing notice must be before ``setTyping(_:)`` sends another: an app
    /// calls it on every keystroke, the room hears it once per this interval, before
    /// ``typingTimeout`` runs out.
    public static let typingRenewal: Duration = .seconds(20)

    /// Tells the room the member is typing (for ``typingTimeout``) or has stopped. Call it on
    /// every keystroke: a notice is sent only when none was sent in the last ``typingRenewal``
    /// (so typing is renewed while the member keeps typing, and a burst of keystrokes is one
    /// request); stopping is sent only after a typing notice. Notices leave in call order.
    ///
    /// - Throws: the server's refusal, `.accountEnded`. After a failure the next call sends.
    public func setTyping(_ isTyping: Bool) async throws(ChatError) {
        try client.ensureCurrent()
        try await typingLock.withLock { () async throws(ChatError) in
            let now = client.clock.now
            let previous = typingSentAt.withLock { $0 }
            if isTyping {
                if let previous, now - previous < Self.typingRenewal { return }
            } else if previous == nil {
                return
            }
            typingSentAt.withLock { $0 = isTyping ? now : nil }
            do throws(MatrixRequestError) {
                _ = try await client.requester.send(
                    ChatAPI.typing(
                        roomID: id, userID: client.userID, isTyping: isTyping, timeout: Self.typingTimeout))
            } catch {
                // Unknown whether the room heard it: the next call sends again.
                typingSentAt.withLock { $0 = isTyping ? nil : previous }
                throw ChatError(error, now: client.wallClock.now)
            }
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
