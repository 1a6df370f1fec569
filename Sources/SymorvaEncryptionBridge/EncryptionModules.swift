import SymorvaAIStudio
import SymorvaChat
import SymorvaChatStore
import SymorvaE2EE
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime
import SymorvaStore

// Where end-to-end encryption meets chat and the AI studio: their factories, which attach the
// account's crypto module when the community lists it, and the adapters through which they
// encrypt and decrypt. Chat and the studio know only their own protocols (`RoomEncryptor`,
// `RoomDecryptor`, `StudioEventDecryptor`); `SymorvaE2EE` knows neither.

extension AccountModuleFactory {
    /// Chat: the account's ``/SymorvaChat/AccountChat`` (what `community.chat` shows while the
    /// account is active), started (sync from the stored since-token, send queues resumed) as
    /// soon as the account's session is restored. Its schema is the database's main migration
    /// list (``/SymorvaFeatureKit/AccountMigrations/main``), which this factory declares and the
    /// database applies when it opens.
    ///
    /// It uses `crypto` when the community lists it (built first): sync hands the crypto module
    /// each committed batch's device changes and to-device inbox, send queues encrypt and
    /// timelines decrypt through it, room keys that arrive retry undecryptable events, and
    /// in-room verification sends its events through chat and reads them from its timelines.
    ///
    /// It syncs with simplified sliding sync when the manifest's `sync.mode` says `sliding`, or
    /// says `auto` (the default) and the homeserver's `/versions` (as the session knows it)
    /// advertises it; with `/sync` v2 otherwise.
    ///
    /// The sync loop and the send queues wait when a request is refused for its token even
    /// after the requester's own refresh (or while the session is soft logged out): they ask the
    /// session for one refresh, and resume with the session's next token (a refresh, or
    /// re-authentication).
    public static let chat = AccountModuleFactory(
        name: "chat", mainMigrations: ChatSchema.migrations, uses: [crypto.name]
    ) { context in
        let logger = Logger(category: "chat", center: context.logCenter)
        let versions = context.session.states.value.signedInSession?.homeserver.versions
        let syncMode = SyncMode.choose(context.configuration.sync.mode, versions: versions)
        logger.info("chat syncs with \(LogLabel(syncMode.rawValue)) account=\(context.userID)")
        let chat = AccountChat(
            requester: context.requester, database: context.database.database, scope: context.scope,
            clock: context.clock, wallClock: context.wallClock, tracer: context.tracer,
            options: ChatOptions(
                encryptsNewRooms: context.configuration.encryption.isEnabledByDefault,
                communitySpace: context.configuration.community.space,
                attachmentsDirectory: context.database.directory + "/attachments",
                mediaCacheDirectory: context.database.directory + "/media-cache",
                mediaCacheBytes: context.configuration.media.cacheBytes, syncMode: syncMode))
        chat.onTokenRejected { context.requestTokenRefresh() }
        if let crypto = context.built.module(AccountCrypto.self) {
            chat.connectDevices(
                inbox: { inbox, db throws(StoreError) in try CryptoStore.writeInbox(inbox, in: db) },
                onChanges: { changes in await crypto.syncCommitted(changes) },
                trackMembers: { members in await crypto.trackMembers(members) })
            chat.setEncryptor(CryptoRoomEncryptor(crypto: crypto))
            chat.setDecryptor(CryptoRoomDecryptor(crypto: crypto))
            crypto.onRoomKeysStored { [weak chat] in chat?.roomKeysArrived() }
            crypto.onDevicesQueried { [weak chat] users in chat?.senderDevicesUpdated(users) }
            await AccountModuleFactory.connectVerification(chat: chat, crypto: crypto)
        }
        chat.onStop(context.onTokenRefreshed { [weak chat] in Task { await chat?.tokenRefreshed() } })
        do { try await chat.start() } catch {
            logger.error("chat did not start account=\(context.userID) error=\(error)")
        }
        return chat
    }

    /// In-room verification: the verification events of rooms' timelines (decrypted) go to the
    /// crypto module, which sends its own through the conversation (encrypted when the room is).
    /// They are handed over in order by one task of their own, never on the sync's path: a flow
    /// step that sends (and may share a room key first) does not hold the sync loop up.
    private static func connectVerification(chat: AccountChat, crypto: AccountCrypto) async {
        let (batches, continuation) = AsyncStream<[VerificationRoomEvent]>.makeStream()
        let consumer = Task {
            for await batch in batches { await crypto.verificationRoomEvents(batch) }
        }
        chat.onStop {
            continuation.finish()
            consumer.cancel()
        }
        let request = VerificationMessages.Kind.request.rawValue
        chat.tapRoomEvents(
            RoomEventTap(
                types: Set(VerificationMessages.Kind.allCases.map(\.rawValue)).subtracting([request]),
                messageTypes: [request]
            ) { events in
                continuation.yield(
                    events.map {
                        VerificationRoomEvent(
                            roomID: $0.roomID, eventID: $0.eventID.rawValue, sender: $0.sender, type: $0.type,
                            content: $0.content, originServerTS: $0.originServerTS)
                    })
            })
        await crypto.setVerificationRoomSender { [weak chat] room, type, content throws(KeyVerificationError) in
            guard let chat else { throw .unavailable }
            do throws(ChatError) {
                return try await chat.conversation(id: room).sendEvent(type: type, content: content).rawValue
            } catch {
                throw .unavailable
            }
        }
    }

    /// The AI studio, when the manifest enables it: the account's
    /// ``/SymorvaAIStudio/AccountStudio`` (what `community.aiStudio` acts for while the account is
    /// active), reading conversation content from the homeserver as the account; grants an
    /// earlier run left live are restored. The consent presenter is the one `community.aiStudio`
    /// holds. Its tables (feature `studio`) are declared here and made when the account's
    /// database opens. It uses `crypto` when the community lists it (built first): messages of
    /// encrypted rooms are decrypted on the device.
    public static let aiStudio = AccountModuleFactory(
        name: "studio", schema: AccountStudio.schema, uses: [crypto.name]
    ) { context in
        guard context.configuration.modules.aiStudio.isEnabled else { return nil }
        let logger = Logger(category: "studio", center: context.logCenter)
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
