import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

// Ignoring users (`m.ignored_user_list`, global account data). The homeserver stops sending
// their events and drops their invites; the device hides what it had already stored from them.

extension AccountChat {
    /// The users the account ignores, as last synced (or set here).
    public var ignoredUsers: [UserID] { ignored.withLock { $0 }.sorted().map(UserID.init(stored:)) }

    /// Ignores `user`: their events are hidden from every timeline (those stored too) and the
    /// server sends no more of them, nor their invites. Waits for the server.
    ///
    /// - Throws: `.invalidArgument` for the account itself, the server's refusal.
    public func ignore(_ user: UserID) async throws(ChatError) {
        guard user != userID else { throw .invalidArgument(name: "user") }
        try await setIgnored(user, true)
    }

    /// Stops ignoring `user` (the server then sends their events again, from the next sync).
    ///
    /// - Throws: the server's refusal.
    public func unignore(_ user: UserID) async throws(ChatError) {
        try await setIgnored(user, false)
    }

    private func setIgnored(_ user: UserID, _ isIgnored: Bool) async throws(ChatError) {
        try ensureCurrent()
        // The server's list (another device may have changed it), with `user` added or removed;
        // other fields of the content are kept.
        var content: [String: JSONValue] = [:]
        do throws(MatrixRequestError) {
            let response = try await requester.send(ChatAPI.accountData("m.ignored_user_list", userID: userID))
            if case .object(let fields)? = try? JSONValue(parsing: response.body) { content = fields }
        } catch {
            guard case .matrix(let matrix) = error, matrix.status == 404 else {
                throw ChatError(error, now: wallClock.now)
            }
        }
        var users: [String: JSONValue] = [:]
        if case .object(let listed)? = content["ignored_users"] { users = listed }
        users[user.rawValue] = isIgnored ? .object([:]) : nil
        content["ignored_users"] = .object(users)
        guard let body = try? JSONValue.object(content).canonicalEncoding() else {
            throw .invalidArgument(name: "user")
        }
        _ = try await perform(ChatAPI.accountData("m.ignored_user_list", userID: userID, content: body))
        ignored.withLock { $0 = Set(users.keys) }
        for conversation in handles.withLock({ Array($0.values) }) { conversation.requestRebuild() }
    }

    /// Reads the ignored users from the store (after each committed sync); conversations
    /// rebuild when the set changed.
    func refreshIgnored() async {
        var users: Set<String> = []
        if let bytes = try? await store.globalAccountData("m.ignored_user_list"),
            case .object(let content)? = try? JSONValue(parsing: bytes),
            case .object(let listed)? = content["ignored_users"]
        {
            users = Set(listed.keys)
        }
        let changed = ignored.withLock { current -> Bool in
            defer { current = users }
            return current != users
        }
        if changed {
            for conversation in handles.withLock({ Array($0.values) }) { conversation.requestRebuild() }
        }
    }
}

extension ChatClient {
    /// Ignores `user` in the active account. See ``AccountChat/ignore(_:)``.
    public func ignore(_ user: UserID) async throws(ChatError) {
        try await withActive { chat async throws(ChatError) in try await chat.ignore(user) }
    }

    /// Stops ignoring `user` in the active account. See ``AccountChat/unignore(_:)``.
    public func unignore(_ user: UserID) async throws(ChatError) {
        try await withActive { chat async throws(ChatError) in try await chat.unignore(user) }
    }

    /// The users the active account ignores.
    ///
    /// - Throws: `.accountEnded` (no active account).
    public func ignoredUsers() throws(ChatError) -> [UserID] { try activeChat().ignoredUsers }
}
