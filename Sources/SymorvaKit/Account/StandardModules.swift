import SymorvaAIStudio
import SymorvaChat
import SymorvaChatStore
import SymorvaDirectory
import SymorvaE2EE
import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMeetings
import SymorvaPush
import SymorvaRuntime
import SymorvaStore
import SymorvaWallet

#if os(Linux)
    import SymorvaMediaGStreamer
#endif

// The SDK's own modules, attached to every signed-in account through the same extension point
// that third-party modules use (`AccountModuleFactory`).

extension AccountModuleFactory {
    /// The modules a community gets unless told otherwise: end-to-end encryption, chat, meetings
    /// and push (always), the wallet, the directory and the AI studio (when the manifest enables
    /// them).
    public static var standard: [AccountModuleFactory] {
        [crypto, chat, wallet, meetings, directory, push, aiStudio]
    }

    /// End-to-end encryption: the account's ``/SymorvaE2EE/AccountCrypto`` (its Olm account, device
    /// keys, tracked devices and room keys), started as soon as the session is restored. Chat's
    /// sync hands it each committed batch's device changes. Its tables are versioned as feature
    /// `e2ee` (declared here, applied when the account's database opens); its pickle key is
    /// sealed with the account's secrets-at-rest key.
    public static let crypto = AccountModuleFactory(
        name: "crypto", schema: AccountMigrations.Feature(name: CryptoStore.feature, migrations: CryptoStore.migrations)
    ) { context in
        let logger = Logger(category: "crypto", center: context.logCenter)
        let deviceID: DeviceID
        switch context.session.states.value {
        case .signedIn(let session), .softLoggedOut(let session, _): deviceID = session.deviceID
        default:
            logger.error("crypto not started: no session account=\(context.userID)")
            return nil
        }
        do {
            let key = try context.keyProvider.key(for: context.userID.rawValue)
            let crypto = try await AccountCrypto(
                userID: context.userID, deviceID: deviceID, database: context.database.database, secretsKey: key,
                requester: context.requester, scope: context.scope, clock: context.clock,
                wallClock: context.wallClock, tracer: context.tracer, logCenter: context.logCenter)
            await crypto.start()
            return crypto
        } catch {
            logger.error("crypto did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }

    /// Chat: the account's ``/SymorvaChat/AccountChat`` (what `community.chat` shows while the account is
    /// active), started (sync from the stored since-token, send queues
    /// resumed) as soon as the account's session is restored. Its schema is the database's main
    /// migration list (``/SymorvaFeatureKit/AccountMigrations/main``), which this factory declares
    /// and the database applies when it opens.
    ///
    /// The sync loop and the send queues wait when a request is refused for its token even
    /// after the requester's own refresh (or while the session is soft logged out): they ask the
    /// session for one refresh, and resume with the session's next token (a refresh, or
    /// re-authentication).
    public static let chat = AccountModuleFactory(name: "chat", mainMigrations: ChatSchema.migrations) { context in
        let logger = Logger(category: "chat", center: context.logCenter)
        let chat = AccountChat(
            requester: context.requester, database: context.database.database, scope: context.scope,
            clock: context.clock, wallClock: context.wallClock, tracer: context.tracer,
            options: ChatOptions(encryptsNewRooms: context.configuration.encryption.isEnabledByDefault))
        chat.onTokenRejected { context.requestTokenRefresh() }
        if let crypto = context.built.module(AccountCrypto.self) {
            chat.connectDevices(inbox: { inbox, db throws(StoreError) in try CryptoStore.writeInbox(inbox, in: db) }) {
                changes in await crypto.syncCommitted(changes)
            }
            chat.setEncryptor(CryptoRoomEncryptor(crypto: crypto))
            chat.setDecryptor(CryptoRoomDecryptor(crypto: crypto))
            crypto.onRoomKeysStored { [weak chat] in chat?.roomKeysArrived() }
        }
        chat.onStop(context.onTokenRefreshed { [weak chat] in Task { await chat?.tokenRefreshed() } })
        do { try await chat.start() } catch {
            logger.error("chat did not start account=\(context.userID) error=\(error)")
        }
        return chat
    }

    /// The wallet, when the manifest enables it: the account's ``/SymorvaWallet/AccountWallet`` (what
    /// `community.wallet` shows while the account is active) with the
    /// manifest's assets; commands left unknown by an earlier run are queried again at once.
    /// Its tables (feature `wallet`) are declared here and made when the account's database
    /// opens, whether or not the manifest enables the wallet.
    public static let wallet = AccountModuleFactory(name: "wallet", schema: WalletStore.schema) { context in
        let module = context.configuration.modules.wallet
        guard module.isEnabled else { return nil }
        let logger = Logger(category: "wallet", center: context.logCenter)
        do {
            let wallet = try await AccountWallet(
                member: context.userID, services: context.services,
                database: context.database.database, scope: context.scope,
                configuration: WalletConfiguration(manifest: module),
                clock: context.clock, wallClock: context.wallClock, tracer: context.tracer)
            Task {
                do { try await wallet.resumePendingCommands() } catch {
                    logger.info("pending wallet commands not resumed account=\(context.userID) error=\(error)")
                }
            }
            return wallet
        } catch {
            logger.error("wallet did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }

    /// Meetings, when the manifest enables them: the account's ``/SymorvaMeetings/AccountMeetings``
    /// (what `community.meetings` joins with while the account is active). No tables: meetings
    /// live on the services.
    ///
    /// The stage members' media engine is the platform's: on Linux GStreamer's `webrtcbin`
    /// (``/SymorvaMediaGStreamer/GStreamerMediaEngine/automatic(transport:tracer:)``, over the
    /// account's transport); elsewhere ``/SymorvaMeetings/UnavailableMediaEngine`` until the app
    /// plugs its own.
    public static let meetings = AccountModuleFactory(name: "meetings") { context in
        guard context.configuration.modules.meetings.isEnabled else { return nil }
        return AccountMeetings(
            member: context.userID, services: context.services, scope: context.scope,
            engine: platformMediaEngine(transport: context.services.transport, tracer: context.tracer),
            clock: context.clock, wallClock: context.wallClock, tracer: context.tracer)
    }

    /// The platform's media engine for stage members.
    package static func platformMediaEngine(transport: any HTTPTransport, tracer: Tracer) -> any MediaEngine {
        #if os(Linux)
            GStreamerMediaEngine.automatic(transport: transport, tracer: tracer)
        #else
            UnavailableMediaEngine()
        #endif
    }

    /// A media engine whose stage voice is a sine tone of `frequency` hertz instead of a
    /// microphone (the REPL's `meeting join <room> --tone <hz>`): the room's mix plays on the
    /// machine's sink when an audio server is reachable, else it only feeds the level meter.
    /// `nil` where the SDK has no engine of its own (Apple platforms).
    package static func toneMediaEngine(frequency: Int, transport: any HTTPTransport, tracer: Tracer)
        -> (any MediaEngine)?
    {
        #if os(Linux)
            GStreamerMediaEngine.toneEngine(frequency: frequency, transport: transport, tracer: tracer)
        #else
            nil
        #endif
    }
}

extension AccountMeetings: AccountModule {
    /// Nothing more to release: the scope's end already left every meeting.
    public func stop() async {}
}

extension AccountModuleFactory {
    /// The directory: the account's ``/SymorvaDirectory/AccountDirectory``, always built (the
    /// public room directory's joins and publishing need it); its member directory answers
    /// only when the manifest enables the directory module. No tables.
    public static let directory = AccountModuleFactory(name: "directory") { context in
        AccountDirectory(
            userID: context.userID, requester: context.requester, services: context.services, scope: context.scope,
            isMemberDirectoryEnabled: context.configuration.modules.directory.isEnabled, tracer: context.tracer)
    }
}

extension AccountModuleFactory {
    /// The AI studio, when the manifest enables it: the account's ``/SymorvaAIStudio/AccountStudio`` (what
    /// `community.aiStudio` acts for while the account is active), reading conversation content
    /// from the homeserver as the account; grants an earlier run left live are restored. The
    /// consent presenter is the one `community.aiStudio` holds. Its tables (feature `studio`) are
    /// declared here and made when the account's database opens.
    public static let aiStudio = AccountModuleFactory(name: "studio", schema: AccountStudio.schema) { context in
        guard context.configuration.modules.aiStudio.isEnabled else { return nil }
        let logger = Logger(category: "studio", center: context.logCenter)
        // Messages of encrypted rooms are decrypted on the device by the account's crypto module.
        let content =
            if let crypto = context.built.module(AccountCrypto.self) {
                HomeserverContentSource(requester: context.requester, decryptor: CryptoStudioDecryptor(crypto: crypto))
            } else {
                HomeserverContentSource(requester: context.requester)
            }
        do {
            let studio = try await AccountStudio(
                member: context.userID, services: context.services,
                content: content, database: context.database.database,
                scope: context.scope, presenter: UnavailableConsentPresenter(), clock: context.clock,
                wallClock: context.wallClock, tracer: context.tracer)
            do { try await studio.restoreGrants() } catch {
                logger.info("studio grants not restored account=\(context.userID) error=\(error)")
            }
            return studio
        } catch {
            logger.error("studio did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }
}

extension AccountStudio: AccountModule {
    /// Stops every grant host (the scope's end does the same).
    public func stop() async { await shutdown() }
}

extension AccountChat: AccountModule {}

extension AccountCrypto: AccountModule {}

extension AccountWallet: AccountModule {
    /// Nothing to release: every transfer host runs in the account's scope and stops with it,
    /// and unknown commands stay in the store for the next sign-in.
    public func stop() async {}
}

extension AccountMigrations {
    /// The migrations of an account database with the standard modules: the session feature's,
    /// then what each of ``SymorvaFeatureKit/AccountModuleFactory/standard`` declares (chat's main
    /// list, `e2ee`, `wallet`, `studio`).
    public static var standard: AccountMigrations { community(modules: AccountModuleFactory.standard) }

    /// The migrations of a community with `modules`: the session feature's (the umbrella's own),
    /// then every module's, as its factory declares them.
    static func community(modules: [AccountModuleFactory]) -> AccountMigrations {
        var migrations = AccountMigrations(main: [], [SessionStore.feature])
        migrations.register(modules: modules)
        return migrations
    }
}

extension AccountStorageError {
    /// The session feature's view of the failure.
    var sessionError: SessionError { .store(storeFailure) }
}

/// Chat's send queues encrypt through the account's crypto module.
struct CryptoRoomEncryptor: RoomEncryptor {
    let crypto: AccountCrypto

    func encrypt(_ content: MessageContent, in room: EncryptedRoom) async throws(SendError) -> MessageContent {
        do throws(RoomEncryptionError) {
            let encrypted = try await crypto.encryptEvent(
                room: room, eventType: content.eventType, content: Array(content.json.utf8))
            return MessageContent(eventType: "m.room.encrypted", json: String(decoding: encrypted, as: UTF8.self))
        } catch {
            switch error {
            case .transient(.server(let status)): throw .server(status: status)
            case .transient(.rateLimited(let retryAfter)): throw .rateLimited(retryAfter: retryAfter)
            case .transient(.unauthorized): throw .unknownToken
            case .transient: throw .network
            case .failed: throw .permanent(.encryptionFailed)
            }
        }
    }

    func seal(_ content: [UInt8], transactionID: TransactionID) -> [UInt8]? {
        crypto.sealQueued(content, transactionID: transactionID.rawValue)
    }

    func open(_ sealed: [UInt8], transactionID: TransactionID) -> [UInt8]? {
        crypto.openQueued(sealed, transactionID: transactionID.rawValue)
    }
}

/// Chat's timelines decrypt through the account's crypto module (`package` for
/// `symorva-bench ingest --encrypted`, which decrypts through it).
package struct CryptoRoomDecryptor: RoomDecryptor {
    let crypto: AccountCrypto

    package init(crypto: AccountCrypto) { self.crypto = crypto }

    package func requestKeysAgain(in roomID: RoomID) async throws(StoreError) -> Int {
        do throws(CryptoStoreError) {
            return try await crypto.requestKeysAgain(roomID: roomID)
        } catch {
            switch error {
            case .store(let failure): throw failure
            // Unreachable: resending reads and writes rows only.
            case .secrets, .driver, .outboundSessionReplaced: throw .corrupt
            }
        }
    }

    package func decrypt(_ content: [UInt8], in roomID: RoomID, eventID: EventID, sender: UserID) async
        -> DecryptionOutcome?
    {
        outcome(
            await crypto.decrypt(content: content, roomID: roomID, eventID: eventID, sender: sender), eventID: eventID)
    }

    package func decrypt(_ events: [UndecryptedEvent]) async -> [DecryptionOutcome?] {
        let results = await crypto.decrypt(
            events.map {
                AccountCrypto.EncryptedRoomEvent(
                    content: $0.content, roomID: RoomID($0.roomID), eventID: EventID($0.eventID),
                    sender: UserID(stored: $0.sender))
            })
        return zip(events, results).map { outcome($1, eventID: EventID($0.eventID)) }
    }

    private func outcome(
        _ result: Result<
            (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool), CryptoEngine.DecryptionRefusal
        >?, eventID: EventID
    ) -> DecryptionOutcome? {
        switch result {
        case nil: return nil
        case .failure(let refusal): return .undecryptable(reason: refusal.rawValue)
        case .success(let decrypted):
            guard let sealed = crypto.sealDecrypted(decrypted.event.content, eventID: eventID) else { return nil }
            return .decrypted(
                type: decrypted.event.type, content: sealed, senderKey: decrypted.event.senderKey,
                senderDevice: decrypted.deviceID, deviceKnown: decrypted.isKnown)
        }
    }

    package func open(_ sealed: [UInt8], eventID: EventID) -> [UInt8]? {
        crypto.openDecrypted(sealed, eventID: eventID)
    }
}

extension AccountModuleFactory {
    /// Push: the account's ``/SymorvaPush/AccountPush`` (its pusher host, rules, pushed events).
    /// No tables: the pusher lives on the homeserver, the profile tag in the data folder.
    public static let push = AccountModuleFactory(name: "push") { context in
        AccountPush(
            userID: context.userID, requester: context.requester, services: context.services, scope: context.scope,
            tracer: context.tracer)
    }
}

/// The studio's content source decrypts through the account's crypto module.
struct CryptoStudioDecryptor: StudioEventDecryptor {
    let crypto: AccountCrypto

    func plaintext(of content: [UInt8], eventID: EventID, roomID: RoomID, sender: UserID) async
        -> (type: String, content: Secret<[UInt8]>)?
    {
        guard
            case .success(let decrypted) = await crypto.decrypt(
                content: content, roomID: roomID, eventID: eventID, sender: sender)
        else { return nil }
        return (decrypted.event.type, Secret(decrypted.event.content))
    }
}
