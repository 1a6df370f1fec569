import SymorvaChatStore
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaStore

/// Whether a room's messages are end-to-end encrypted.
public enum RoomEncryptionState: Sendable, Hashable, CustomStringConvertible {
    /// Not known yet: the room's state has not synced (a room just joined or invited to) and
    /// the server has not been asked. A message sent now first asks the server, so it never
    /// leaves in plaintext by mistake.
    case unknown
    /// The room has no `m.room.encryption`: messages go in plaintext.
    case notEncrypted
    /// `m.room.encryption` is set: every message is encrypted on this device. Final: a room
    /// never goes back to plaintext.
    case encrypted

    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .notEncrypted: "notEncrypted"
        case .encrypted: "encrypted"
        }
    }

    /// How far it is known: the state only ever moves up (unknown → not encrypted → encrypted).
    var rank: Int {
        switch self {
        case .unknown: 0
        case .notEncrypted: 1
        case .encrypted: 2
        }
    }
}

extension Conversation {
    /// Turns on end-to-end encryption for the room (`m.room.encryption`, Megolm). Messages sent
    /// from then on are encrypted; encryption cannot be turned off again. Returns once the
    /// server accepted the state event; the room is then ``RoomEncryptionState/encrypted``.
    /// Does nothing when the room is already encrypted.
    ///
    /// - Throws: `.server(403, M_FORBIDDEN)` when the member may not change the room's state,
    ///   `.network`, `.accountEnded`, and the other request failures of ``ChatError``.
    public func enableEncryption() async throws(ChatError) {
        try client.ensureCurrent()
        if encryption.value == .encrypted { return }
        _ = try await client.perform(
            ChatAPI.setState(roomID: id, type: "m.room.encryption", content: ChatAPI.encryptionContent))
        await client.markEncrypted(id)
    }

    /// Asks the account's other devices again for the keys of this room's messages that could
    /// not be decrypted (``TimelineItem`` `unableToDecrypt(.missingKey)`), as a "request the keys
    /// again" button does. The first request goes out by itself when such a message arrives; a
    /// device that did not know this one yet (just signed in) may have dropped it. A key that
    /// arrives turns its messages into text in place.
    ///
    /// - Returns: how many requests go out again (0: none is waiting for an answer).
    /// - Throws: ``ChatError/encryptionUnavailable`` without a crypto module, `.accountEnded`.
    @discardableResult
    public func requestMissingKeys() async throws(ChatError) -> Int {
        try client.ensureCurrent()
        guard let decryptor = client.decryptor else { throw .encryptionUnavailable }
        do throws(StoreError) {
            return try await decryptor.requestKeysAgain(in: id)
        } catch {
            throw .store(.store(error))
        }
    }

    /// The room became encrypted (its state synced, or this client turned it on): final.
    func encryptionTurnedOn() async {
        advanceEncryption(to: .encrypted)
        await sendQueue.send(.encryptionEnabled)
    }

    /// Publishes `state` if it says more than what is published: the value only moves up, also
    /// when a sync and a server answer race (it is computed under the value's lock).
    func advanceEncryption(to state: RoomEncryptionState) {
        encryptionPublisher.publish { current in state.rank > current.rank ? state : nil }
    }

    /// Reads what the store knows of the room's encryption and publishes it.
    func refreshEncryption() async {
        if encryptionPublisher.value == .encrypted { return }
        let marked = client.encryptedRooms.withLock { $0.contains(id) }
        let knowledge = try? await client.store.encryptionKnowledge(roomID: id)
        if marked || knowledge?.isEncrypted == true {
            await encryptionTurnedOn()
        } else if knowledge?.hasFullState == true {
            advanceEncryption(to: .notEncrypted)
        }
    }

    /// Whether a message sent now must be encrypted. While the room's encryption is unknown,
    /// the server is asked (`GET state/m.room.encryption`, one question at a time): an answer
    /// with the event makes the room encrypted, `M_NOT_FOUND` makes it plaintext (until a sync
    /// says otherwise).
    ///
    /// - Throws: the request's failure when the server cannot say: the message is not queued,
    ///   rather than risk sending it in the clear.
    func resolveEncryption() async throws(ChatError) -> Bool {
        switch encryption.value {
        case .encrypted: return true
        case .notEncrypted: return false
        case .unknown: break
        }
        return try await encryptionProbe.withLock { () async throws(ChatError) -> Bool in
            await self.refreshEncryption()
            switch self.encryption.value {
            case .encrypted: return true
            case .notEncrypted: return false
            case .unknown: break
            }
            do throws(ChatError) {
                let response = try await self.client.perform(
                    ChatAPI.state(roomID: self.id, type: "m.room.encryption"))
                guard RawJSON.string("algorithm", in: response.body) != nil else { throw .unexpectedResponse }
                await self.client.markEncrypted(self.id)
                return true
            } catch .server(404, _) {
                self.advanceEncryption(to: .notEncrypted)
                return self.encryption.value == .encrypted
            }
        }
    }
}
