import SymorvaAIStudio
import SymorvaChat
import SymorvaChatStore
import SymorvaE2EE
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

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
            case .secrets, .driver, .outboundSessionReplaced, .notMigrated: throw .corrupt
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
            (event: CryptoEngine.DecryptedEvent, deviceID: String?, isKnown: Bool, trust: DeviceTrustLevel),
            CryptoEngine.DecryptionRefusal
        >?, eventID: EventID
    ) -> DecryptionOutcome? {
        switch result {
        case nil: return nil
        case .failure(.senderNotCrossSigned):
            // Not final: the sending device may be cross-signed (or verified by us) later.
            return .refusedUntilSenderTrusted(reason: CryptoEngine.DecryptionRefusal.senderNotCrossSigned.rawValue)
        case .failure(let refusal): return .undecryptable(reason: refusal.rawValue)
        case .success(let decrypted):
            guard let sealed = crypto.sealDecrypted(decrypted.event.content, eventID: eventID) else { return nil }
            return .decrypted(
                type: decrypted.event.type, content: sealed, senderKey: decrypted.event.senderKey,
                senderDevice: decrypted.deviceID, deviceKnown: decrypted.isKnown,
                senderTrust: Self.storedTrust(decrypted.trust))
        }
    }

    package func open(_ sealed: [UInt8], eventID: EventID) -> [UInt8]? {
        crypto.openDecrypted(sealed, eventID: eventID)
    }

    /// The chat store's name of a sending device's trust level (``SenderDeviceTrust``'s raw value).
    static func storedTrust(_ trust: DeviceTrustLevel) -> String {
        switch trust {
        case .verified: SenderDeviceTrust.verified.rawValue
        case .crossSigned: SenderDeviceTrust.crossSigned.rawValue
        case .unverified: SenderDeviceTrust.notCrossSigned.rawValue
        }
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
