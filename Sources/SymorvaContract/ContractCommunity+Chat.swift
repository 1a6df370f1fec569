import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// `session.*` and the paths `session.state`, `session.accounts`.
    var sessionMethods: ContractMethods {
        let session = community.session
        var methods = ContractMethods()
        methods.asynchronous["session.signIn"] = { call in
            let username = try call.params.string("username")
            let password = try call.params.secret("password")
            return ContractValues.account(
                try await mapping("session") {
                    try await session.signIn(username: username, password: password)
                })
        }
        methods.asynchronous["session.register"] = { call in
            let username = try call.params.string("username")
            let password = try call.params.secret("password")
            return ContractValues.account(
                try await mapping("session") {
                    try await session.register(username: username, password: password)
                })
        }
        methods.asynchronous["session.reauthenticate"] = { call in
            let password = try call.params.secret("password")
            return ContractValues.account(
                try await mapping("session") {
                    try await session.reauthenticate(password: password)
                })
        }
        methods.asynchronous["session.signOut"] = { _ in
            try await mapping("session") { try await session.signOut() }
            return .object([:])
        }
        methods.asynchronous["session.switchAccount"] = { call in
            let account = try Self.account(call.params, session)
            return ContractValues.account(
                try await mapping("session") {
                    try await session.switchAccount(to: account)
                })
        }
        methods.asynchronous["session.removeAccount"] = { call in
            let account = try Self.account(call.params, session)
            try await mapping("session") { try await session.removeAccount(account) }
            return .object([:])
        }
        // Which optional modules the manifest enables: a disabled one's client is absent (its
        // methods answer contract.moduleDisabled).
        let community = community
        methods.asynchronous["community.modules"] = { _ in
            .object([
                "meetings": .bool(community.meetings.isEnabled), "wallet": .bool(community.wallet != nil),
                "aiStudio": .bool(community.aiStudio != nil), "directory": .bool(community.directory != nil),
            ])
        }
        methods.subscriptions["session.state"] = { _ in
            ContractSource(session.state, encode: ContractValues.sessionState)
        }
        methods.subscriptions["session.accounts"] = { _ in
            ContractSource(session.accounts) { .array($0.map(ContractValues.account)) }
        }
        return methods
    }

    private static func account(_ params: ContractParams, _ session: SessionClient) throws(ContractError) -> Account {
        let userID = try params.userID("userID")
        guard let account = session.accounts.value.first(where: { $0.userID == userID }) else {
            throw ContractError(
                domain: "session", code: "unknownAccount", message: "No account of this user ID is on this device.")
        }
        return account
    }

    /// `chat.*` on the chat client, and the paths `chat.conversations`, `chat.syncState`.
    var chatMethods: ContractMethods {
        let chat = community.chat
        var methods = ContractMethods()
        methods.asynchronous["chat.refresh"] = { _ in
            await chat.refresh()
            return .object([:])
        }
        methods.asynchronous["chat.createRoom"] = { call in
            let params = call.params
            let name = try params.optionalString("name")
            let topic = try params.optionalString("topic")
            var invitees: [UserID] = []
            for text in try params.optionalStrings("invitees") ?? [] {
                guard let userID = UserID(text) else {
                    throw ContractError.invalidParams("invitees", "an array of Matrix user IDs")
                }
                invitees.append(userID)
            }
            let isDirect = try params.optionalBool("isDirect") ?? false
            let isEncrypted = try params.optionalBool("isEncrypted")
            let roomID = try await mapping("chat") {
                try await chat.createRoom(
                    name: name, topic: topic, invitees: invitees, isDirect: isDirect, isEncrypted: isEncrypted)
            }
            return .object(["roomID": .string(roomID.rawValue)])
        }
        methods.asynchronous["chat.join"] = { call in
            let target = try call.params.string("roomIDOrAlias")
            let roomID = try await mapping("chat") {
                try await chat.join(roomIDOrAlias: target)
            }
            return .object(["roomID": .string(roomID.rawValue)])
        }
        methods.asynchronous["chat.leave"] = { call in
            let roomID = try call.params.roomID("roomID")
            try await mapping("chat") { try await chat.leave(roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.invite"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            try await mapping("chat") { try await chat.invite(userID, to: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.setJoinRule"] = { call in
            let roomID = try call.params.roomID("roomID")
            let allowed = try (call.params.optionalStrings("allowedRooms") ?? []).map { text throws(ContractError) in
                guard text.hasPrefix("!"), text.count > 1 else {
                    throw ContractError.invalidParams("allowedRooms", "an array of room IDs (!…)")
                }
                return RoomID(text)
            }
            let rule: JoinRule
            switch try call.params.string("rule") {
            case "public": rule = .public
            case "invite": rule = .invite
            case "knock": rule = .knock
            case "restricted": rule = .restricted(allowedRooms: allowed)
            case "knock_restricted": rule = .knockRestricted(allowedRooms: allowed)
            default: throw ContractError.invalidParams("rule", "public, invite, knock, restricted or knock_restricted")
            }
            try await mapping("chat") { try await chat.setJoinRule(rule, roomID: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.kick"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            let reason = try call.params.optionalString("reason")
            try await mapping("chat") { try await chat.kick(userID, from: roomID, reason: reason) }
            return .object([:])
        }
        methods.asynchronous["chat.ban"] = { call in
            let roomID = try call.params.roomID("roomID")
            let userID = try call.params.userID("userID")
            let reason = try call.params.optionalString("reason")
            try await mapping("chat") { try await chat.ban(userID, from: roomID, reason: reason) }
            return .object([:])
        }
        // {roomID, flag: favourite | lowPriority | pinned | muted, value}: optimistic, rolled back
        // on failure (the Swift API's rule).
        methods.asynchronous["chat.setFlag"] = { call in
            let roomID = try call.params.roomID("roomID")
            let flag: ConversationFlag
            switch try call.params.optionalString("flag") {
            case "favourite": flag = .favourite
            case "lowPriority": flag = .lowPriority
            case "pinned": flag = .pinned
            case "muted": flag = .muted
            default: throw ContractError.invalidParams("flag", "favourite, lowPriority, pinned or muted")
            }
            guard let value = try call.params.optionalBool("value") else {
                throw ContractError.invalidParams("value", "a boolean")
            }
            try await mapping("chat") { try await chat.setFlag(flag, value, roomID: roomID) }
            return .object([:])
        }
        methods.asynchronous["chat.conversation"] = { [weak self] call in
            let roomID = try call.params.roomID("roomID")
            let account = self?.activeUserID
            let conversation = try await mapping("chat") {
                try await chat.conversation(id: roomID)
            }
            let handle = call.handles.issue(conversation, kind: "conversation", account: account)
            return .object(["conversation": .string(handle), "roomID": .string(roomID.rawValue)])
        }
        methods.subscriptions["chat.conversations"] = { _ in
            ContractSource(chat.conversations.observable, encode: ContractValues.conversationList)
        }
        methods.subscriptions["chat.syncState"] = { _ in
            ContractSource(chat.syncState) { .object(["kind": .string(ContractError.caseName(of: $0))]) }
        }
        return methods
    }

    /// `chat.conversation.*` on a conversation handle, and its paths.
    var conversationMethods: ContractMethods {
        var methods = ContractMethods()
        let conversation: @Sendable (ContractCall) throws(ContractError) -> Conversation = { call in
            try call.handles.resolve(
                call.params, "conversation", kind: "conversation", as: Conversation.self, domain: "chat")
        }
        methods.asynchronous["chat.conversation.send"] = { [weak self] call in
            let target = try conversation(call)
            let text = try call.params.string("text")
            let message: OutgoingMessage
            switch try call.params.optionalString("kind") ?? "text" {
            case "text": message = .text(text)
            case "notice": message = .notice(text)
            case "emote": message = .emote(text)
            default: throw ContractError.invalidParams("kind", "text, notice or emote")
            }
            let replyingTo = try call.params.optionalEventID("replyingTo")
            let account = self?.activeUserID
            let receipt = try await mapping("chat") {
                try await target.send(message, replyingTo: replyingTo)
            }
            return Self.receipt(receipt, call.handles.issue(receipt, kind: "receipt", account: account))
        }
        methods.asynchronous["chat.conversation.edit"] = { [weak self] call in
            let target = try conversation(call)
            let eventID = try call.params.eventID("eventID")
            let text = try call.params.string("text")
            let account = self?.activeUserID
            let receipt = try await mapping("chat") {
                try await target.edit(eventID, newText: text)
            }
            return Self.receipt(receipt, call.handles.issue(receipt, kind: "receipt", account: account))
        }
        methods.asynchronous["chat.conversation.paginateBackwards"] = { call in
            let target = try conversation(call)
            let count = try call.params.optionalInt("count", in: 1...1_000) ?? 20
            return Self.pagination(await target.paginateBackwards(count))
        }
        methods.asynchronous["chat.conversation.react"] = { call in
            let target = try conversation(call)
            let eventID = try call.params.eventID("eventID")
            let key = try call.params.string("key")
            try await mapping("chat") { try await target.react(to: eventID, key: key) }
            return .object([:])
        }
        methods.asynchronous["chat.conversation.redact"] = { call in
            let target = try conversation(call)
            let eventID = try call.params.eventID("eventID")
            try await mapping("chat") { try await target.redact(eventID) }
            return .object([:])
        }
        methods.asynchronous["chat.conversation.markRead"] = { call in
            let target = try conversation(call)
            let eventID = try call.params.optionalEventID("eventID")
            try await mapping("chat") { try await target.markRead(upTo: eventID) }
            return .object([:])
        }
        // A failed message is resent with its transaction ID (the PUT is idempotent) or cancelled.
        methods.asynchronous["chat.conversation.resend"] = { call in
            let target = try conversation(call)
            let transactionID = TransactionID(try call.params.string("transactionID"))
            await target.resend(transactionID)
            return .object([:])
        }
        methods.asynchronous["chat.conversation.cancelSend"] = { call in
            let target = try conversation(call)
            let transactionID = TransactionID(try call.params.string("transactionID"))
            await target.cancelSend(transactionID)
            return .object([:])
        }
        methods.subscriptions["conversation.outbox"] = { call in
            ContractSource(try conversation(call).outbox) { entries in
                .array(
                    entries.map { entry in
                        .object([
                            "transactionID": .string(entry.transactionID.rawValue),
                            "state": ContractValues.sendState(entry.state),
                        ])
                    })
            }
        }
        methods.subscriptions["conversation.timeline"] = { call in
            ContractSource(try conversation(call).timeline, encode: ContractValues.timeline)
        }
        methods.subscriptions["conversation.pagination"] = { call in
            ContractSource(try conversation(call).pagination, encode: Self.pagination)
        }
        methods.subscriptions["receipt.state"] = { call in
            let receipt = try call.handles.resolve(
                call.params, "receipt", kind: "receipt", as: SendReceipt.self, domain: "chat")
            return ContractSource(receipt.state, encode: ContractValues.sendState)
        }
        return methods
    }

    static func receipt(_ receipt: SendReceipt, _ handle: String) -> JSONValue {
        .object([
            "receipt": .string(handle), "roomID": .string(receipt.roomID.rawValue),
            "transactionIDs": .array(receipt.transactionIDs.map { .string($0.rawValue) }),
            "state": ContractValues.sendState(receipt.state.value),
        ])
    }

    static func pagination(_ pagination: TimelinePagination) -> JSONValue {
        .object([
            "isObserved": .bool(pagination.isObserved), "isPaginating": .bool(pagination.isPaginating),
            "hasReachedStart": .bool(pagination.hasReachedStart),
            "lastError": pagination.lastError.map { ContractError($0, domain: "chat").json },
        ])
    }
}
