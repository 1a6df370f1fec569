import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// `wallet.*`, `draft.*`, `pending.*` and their paths; `contract.moduleDisabled` when the
    /// manifest disables the wallet.
    var walletMethods: ContractMethods {
        let wallet = community.wallet
        var methods = ContractMethods()
        let draft: @Sendable (ContractCall) throws(ContractError) -> SymorvaWallet.TransferDraft = { call in
            try call.handles.resolve(
                call.params, "draft", kind: "draft", as: SymorvaWallet.TransferDraft.self, domain: "wallet")
        }
        let pending: @Sendable (ContractCall) throws(ContractError) -> PendingTransfer = { call in
            try call.handles.resolve(
                call.params, "pending", kind: "pending", as: PendingTransfer.self, domain: "wallet")
        }
        methods.asynchronous["wallet.refreshBalances"] = { _ in
            let wallet = try Self.required(wallet, "wallet")
            let balances = try await mapping("wallet") { try await wallet.refreshBalances() }
            return .array(balances.map(ContractValues.balance))
        }
        methods.asynchronous["wallet.history"] = { call in
            let wallet = try Self.required(wallet, "wallet")
            let limit = try call.params.optionalInt("limit", in: 1...500) ?? 50
            let entries = try await mapping("wallet") {
                try await wallet.history(limit: limit)
            }
            return .array(entries.map(ContractValues.ledgerEntry))
        }
        methods.asynchronous["wallet.prepareTransfer"] = { [weak self] call in
            let wallet = try Self.required(wallet, "wallet")
            let recipient = try call.params.userID("recipient")
            let code = try call.params.string("asset")
            guard let asset = wallet.configuration.asset(code: code) else {
                throw ContractError.invalidParams("asset", "an asset code of the manifest")
            }
            let text = try call.params.string("amount")
            let amount: Amount
            do throws(AmountError) { amount = try asset.amount(text) } catch {
                throw ContractError(error, domain: "amount")
            }
            let account = self?.activeUserID
            let prepared = try await mapping("wallet") {
                try await wallet.prepareTransfer(to: recipient, asset: asset, amount: amount)
            }
            return .object([
                "draft": .string(call.handles.issue(prepared, kind: "draft", account: account)),
                "summary": ContractValues.summary(prepared.summary),
                "verificationMethods": .array(
                    prepared.verificationMethods.map { "\($0)" }.sorted().map(JSONValue.string)),
            ])
        }
        methods.asynchronous["wallet.setPIN"] = { call in
            let wallet = try Self.required(wallet, "wallet")
            let pin = try call.params.secret("pin")
            let oldPIN = try call.params.optionalSecret("oldPIN")
            try await mapping("wallet") { try await wallet.setPIN(pin, replacing: oldPIN) }
            return .object([:])
        }
        methods.asynchronous["wallet.resumePendingCommands"] = { [weak self] call in
            let wallet = try Self.required(wallet, "wallet")
            let account = self?.activeUserID
            let commands = try await mapping("wallet") {
                try await wallet.resumePendingCommands()
            }
            return .array(commands.map { Self.pending($0, call.handles.issue($0, kind: "pending", account: account)) })
        }
        // {draft, pin?}: without a PIN the host is asked (`hostRequest` kind `pin`, answered with
        // the PIN as a string, or null to cancel: `wallet.cancelled`).
        methods.asynchronous["draft.confirm"] = { [weak self] call in
            let target = try draft(call)
            let account = self?.activeUserID
            let pin: Secret<String>
            if let given = try call.params.optionalSecret("pin") {
                pin = given
            } else {
                let answer = await call.askHost(
                    "pin",
                    .object(["draft": call.params.members["draft"], "summary": ContractValues.summary(target.summary)]))
                guard case .string(let typed)? = answer, !typed.isEmpty else {
                    throw ContractError(
                        domain: "wallet", code: "cancelled", message: "The host gave no PIN: nothing was sent.")
                }
                pin = Secret(typed)
            }
            let outcome = try await mapping("wallet") {
                try await target.confirm(with: .pin(pin))
            }
            return Self.outcome(outcome, call.handles, account)
        }
        methods.asynchronous["draft.cancel"] = { call in
            try await draft(call).cancel()
            return .object([:])
        }
        methods.asynchronous["pending.query"] = { [weak self] call in
            let target = try pending(call)
            let account = self?.activeUserID
            let outcome = try await mapping("wallet") { try await target.query() }
            return Self.outcome(outcome, call.handles, account)
        }
        methods.subscriptions["wallet.balances"] = { _ in
            ContractSource(try Self.required(wallet, "wallet").balances) { .array($0.map(ContractValues.balance)) }
        }
        methods.subscriptions["wallet.pendingCommands"] = { call in
            // The list follows the active account: each publication's handles belong to the
            // wallet's member when it is published (the wallet follows an account before the
            // session state says so), not to the account of when the subscription began.
            let wallet = try Self.required(wallet, "wallet")
            return ContractSource(wallet.pendingCommands) { commands in
                let account = wallet.member
                return .array(
                    commands.map { Self.pending($0, call.handles.issue($0, kind: "pending", account: account)) })
            }
        }
        methods.subscriptions["draft.state"] = { call in
            ContractSource(try draft(call).states, encode: ContractValues.transferState)
        }
        methods.subscriptions["pending.state"] = { call in
            ContractSource(try pending(call).states, encode: ContractValues.transferState)
        }
        return methods
    }

    static func pending(_ pending: PendingTransfer, _ handle: String) -> JSONValue {
        .object([
            "pending": .string(handle), "commandID": .string(pending.commandID.rawValue),
            "summary": ContractValues.summary(pending.summary),
        ])
    }

    /// `TransferOutcome` as the contract's tagged union; an unknown outcome's pending command
    /// becomes a handle of the same account.
    static func outcome(_ outcome: TransferOutcome, _ handles: ContractHandles, _ account: UserID?) -> JSONValue {
        switch outcome {
        case .settled(let transfer): .object(["kind": "settled", "transfer": ContractValues.transfer(transfer)])
        case .failed(let reason): .object(["kind": "failed", "reason": ContractValues.failure(reason)])
        case .unknown(let pending):
            .object([
                "kind": "unknown",
                "pending": Self.pending(pending, handles.issue(pending, kind: "pending", account: account)),
            ])
        }
    }

    /// `meetings.join`, `room.*` and the meeting paths.
    var meetingMethods: ContractMethods {
        let meetings = community.meetings
        let environment = community.environment
        var methods = ContractMethods()
        let room: @Sendable (ContractCall) throws(ContractError) -> MeetingRoom = { call in
            try call.handles.resolve(call.params, "room", kind: "room", as: MeetingRoom.self, domain: "meetings")
        }
        methods.asynchronous["meetings.join"] = { [weak self] call in
            let roomID = try call.params.roomID("roomID")
            let broadcast = try call.params.optionalBool("broadcast") ?? false
            // A sine tone of this many hertz as the stage microphone (hosts without a capture
            // device, and tests), as the REPL's `meeting join --tone`.
            var engine: (any MediaEngine)?
            if let tone = try call.params.optionalInt("tone", in: 20...20_000) {
                engine = AccountModuleFactory.toneMediaEngine(
                    frequency: tone, transport: environment.transport, tracer: environment.tracer)
                guard engine != nil else { throw ContractError(MeetingError.mediaUnavailable, domain: "meetings") }
            }
            let account = self?.activeUserID
            let joined = try await mapping("meetings") {
                try await meetings.join(roomID: roomID, broadcast: broadcast, mediaEngine: engine)
            }
            return .object([
                "room": .string(call.handles.issue(joined, kind: "room", account: account)),
                "roomID": .string(joined.roomID.rawValue), "meetingID": .string(joined.meetingID.rawValue),
                "role": .string(joined.role.value.kind.rawValue),
            ])
        }
        methods.asynchronous["room.raiseHand"] = Self.roomAction(room) { room, _ throws(MeetingError) in
            try await room.raiseHand()
        }
        methods.asynchronous["room.lowerHand"] = Self.roomAction(room) { room, _ throws(MeetingError) in
            try await room.lowerHand()
        }
        methods.asynchronous["room.leave"] = Self.roomAction(room) { room, _ throws(MeetingError) in
            try await room.leave()
        }
        methods.asynchronous["room.end"] = Self.roomAction(room) { room, _ throws(MeetingError) in try await room.end()
        }
        methods.asynchronous["room.promote"] = Self.roomAction(room, userID: true) {
            room, userID throws(MeetingError) in
            if let userID { try await room.promote(userID) }
        }
        methods.asynchronous["room.demote"] = Self.roomAction(room, userID: true) { room, userID throws(MeetingError) in
            if let userID { try await room.demote(userID) }
        }
        // The role's media, as the seed's `case .stage(let media)` / `case .listener(let playback)`:
        // `meetings.wrongRole` when the member's role now has the other kind.
        let media: @Sendable (ContractCall) throws(ContractError) -> any MediaSession = { call throws(ContractError) in
            guard case .stage(let media) = try room(call).role.value else {
                throw ContractError(MeetingError.wrongRole, domain: "meetings")
            }
            return media
        }
        let playback: @Sendable (ContractCall) throws(ContractError) -> any PlaybackStream = {
            call throws(ContractError) in
            guard case .listener(let playback) = try room(call).role.value else {
                throw ContractError(MeetingError.wrongRole, domain: "meetings")
            }
            return playback
        }
        methods.asynchronous["room.media.connect"] = { call in
            let media = try media(call)
            try await mapping("meetings") { try await media.connect() }
            return .object([:])
        }
        methods.asynchronous["room.media.setMicrophoneEnabled"] = { call in
            let media = try media(call)
            guard let enabled = try call.params.optionalBool("enabled") else {
                throw ContractError.invalidParams("enabled", "a boolean")
            }
            try await mapping("meetings") { try await media.setMicrophoneEnabled(enabled) }
            return .object([:])
        }
        methods.asynchronous["room.media.disconnect"] = { call in
            await (try media(call)).disconnect()
            return .object([:])
        }
        methods.asynchronous["room.playback.play"] = { call in
            try playback(call).play()
            return .object([:])
        }
        methods.asynchronous["room.playback.pause"] = { call in
            try playback(call).pause()
            return .object([:])
        }
        methods.asynchronous["room.playback.stop"] = { call in
            try playback(call).stop()
            return .object([:])
        }
        methods.subscriptions["meeting.media"] = { call in
            ContractSource(try media(call).state) { .object(["kind": .string($0.caseName)]) }
        }
        methods.subscriptions["meeting.audioLevels"] = { call in
            ContractSource(try media(call).audioLevels) { levels in
                let level: (AudioLevel) -> JSONValue = { level in
                    .object(["decibels": .number(level.decibels), "isSpeaking": .bool(level.isSpeaking)])
                }
                return .object(["incoming": level(levels.incoming), "outgoing": level(levels.outgoing)])
            }
        }
        methods.subscriptions["meeting.playback"] = { call in
            ContractSource(try playback(call).state) { .object(["kind": .string(ContractError.caseName(of: $0))]) }
        }
        methods.subscriptions["meeting.role"] = { call in
            ContractSource(try room(call).role) { .object(["kind": .string($0.kind.rawValue)]) }
        }
        methods.subscriptions["meeting.participants"] = { call in
            ContractSource(try room(call).participants) { .array($0.map(ContractValues.participant)) }
        }
        methods.subscriptions["meeting.state"] = { call in
            ContractSource(try room(call).state) { .object(["kind": .string($0.caseName)]) }
        }
        return methods
    }

    private static func roomAction(
        _ room: @escaping @Sendable (ContractCall) throws(ContractError) -> MeetingRoom, userID: Bool = false,
        _ body: @escaping @Sendable (MeetingRoom, UserID?) async throws(MeetingError) -> Void
    ) -> ContractMethods.Asynchronous {
        { call in
            let target = try room(call)
            let member = userID ? try call.params.userID("userID") : nil
            try await mapping("meetings") { try await body(target, member) }
            return .object([:])
        }
    }

    /// `studio.*` and `studio.grants`; `contract.moduleDisabled` when the manifest disables the
    /// studio. `studio.requestGrant` shows the consent sheet as a `hostRequest` of kind `consent`.
    var studioMethods: ContractMethods {
        let studio = community.aiStudio
        var methods = ContractMethods()
        let grant: @Sendable (ContractCall) throws(ContractError) -> ConversationGrant = { call in
            try call.handles.resolve(call.params, "grant", kind: "grant", as: ConversationGrant.self, domain: "studio")
        }
        methods.asynchronous["studio.requestGrant"] = { [weak self] call in
            let studio = try Self.required(studio, "aiStudio")
            let roomID = try call.params.roomID("roomID")
            let scope = try Self.scope(call.params)
            let account = self?.activeUserID
            let granted = try await mapping("studio") {
                try await studio.requestGrant(for: roomID, scope: scope)
            }
            return .object([
                "grant": .string(call.handles.issue(granted, kind: "grant", account: account)),
                "id": .string(granted.id.rawValue), "roomID": .string(granted.roomID.rawValue),
                "scope": ContractValues.scope(granted.scope),
                "expiresAt": .number(Double(granted.expiresAt.millisecondsSince1970)),
                "status": .string(ContractError.caseName(of: granted.status)),
            ])
        }
        methods.asynchronous["studio.summarize"] = { call in
            let studio = try Self.required(studio, "aiStudio")
            let target = try grant(call)
            let summary = try await mapping("studio") {
                try await studio.summarize(using: target)
            }
            return ContractValues.studioSummary(summary)
        }
        methods.asynchronous["studio.revoke"] = { call in
            let studio = try Self.required(studio, "aiStudio")
            let target = try grant(call)
            try await mapping("studio") { try await studio.revoke(target) }
            return .object([:])
        }
        // The service's audit of the member: counts and event IDs, never content.
        methods.asynchronous["studio.audit"] = { _ in
            let studio = try Self.required(studio, "aiStudio")
            let entries = try await mapping("studio") { try await studio.audit() }
            return .array(
                entries.map { entry in
                    .object([
                        "grantID": entry.grantID.map { .string($0.rawValue) }, "action": .string(entry.action),
                        "outcome": .string(entry.outcome), "itemCount": .int(entry.itemCount),
                        "itemIDs": .array(entry.itemIDs.map { .string($0.rawValue) }),
                    ])
                })
        }
        methods.subscriptions["studio.grants"] = { _ in
            ContractSource(try Self.required(studio, "aiStudio").grants) { .array($0.map(ContractValues.grantInfo)) }
        }
        return methods
    }

    /// `scope`: `{"kind": "selectedMessages", "eventIDs": [...]}` or `{"kind": "conversation", "since": "$…"}`.
    private static func scope(_ params: ContractParams) throws(ContractError) -> GrantScope {
        guard case .object(let members)? = params.members["scope"] else {
            throw .invalidParams("scope", "an object with kind selectedMessages or conversation")
        }
        let inner = ContractParams(members: members)
        switch try inner.optionalString("kind") {
        case "selectedMessages":
            let ids = try inner.optionalStrings("eventIDs") ?? []
            guard !ids.isEmpty, ids.allSatisfy({ $0.hasPrefix("$") }) else {
                throw .invalidParams("scope.eventIDs", "a non-empty array of event IDs")
            }
            return .selectedMessages(ids.map { EventID($0) })
        case "conversation":
            do throws(ContractError) {
                return .conversation(since: try inner.eventID("since"))
            } catch {
                throw .invalidParams("scope.since", "an event ID ($…)")
            }
        default:
            throw .invalidParams("scope.kind", "selectedMessages or conversation")
        }
    }
}
