import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Why a room's members could not be made complete for its key.
enum MemberListError: Error, Sendable {
    /// `/members` failed.
    case request(MatrixRequestError)
    /// `/members` answered something that is not a member list.
    case unreadable(SyncDecodingError)
    /// The store failed.
    case store(ChatStoreError)
}

extension AccountChat {
    /// What the crypto module needs to share `roomID`'s key (``ChatStore/encryptedRoom(_:)``),
    /// with the room's full member list.
    ///
    /// Lazy-loaded members (`/sync` v2's filter) and sliding sync's list (`$LAZY`) store only the
    /// members the timeline's senders need, yet a room key must reach every member's devices: the
    /// first time a room's key is shared, its members are read with `GET /rooms/{roomId}/members`
    /// and the room is marked complete in the store (``ChatStore/memberList(_:)``). From then on
    /// sync keeps them — every membership change is a timeline event — across restarts too,
    /// until an ingest that may have skipped some (a gap that does not join the stored
    /// timeline, our own membership leaving `join`) marks the room incomplete: it is read again
    /// before its next key is shared. One request per room at a time. `nil` when the room is
    /// not stored.
    ///
    /// - Throws: ``MemberListError``: the request failed or its answer was unreadable (the send
    ///   is tried again by its queue), or the store failed.
    func roomForEncryption(_ roomID: RoomID) async throws(MemberListError) -> EncryptedRoom? {
        let state: MemberListState
        do { state = try await store.memberList(roomID) } catch { throw .store(error) }
        if !state.isComplete {
            let requester = requester
            let store = store
            _ = try await memberLoads.value(for: roomID) { () async throws(MemberListError) -> Bool in
                let body: [UInt8]
                do throws(MatrixRequestError) {
                    body = try await requester.send(ChatAPI.members(roomID: roomID)).body
                } catch {
                    throw .request(error)
                }
                let page: MessagesPage
                do throws(SyncDecodingError) { page = try SyncResponseDecoder.decodeMessages(body) } catch {
                    throw .unreadable(error)
                }
                do throws(ChatStoreError) {
                    try await store.storeMembers(roomID: roomID, page: page, generation: state.generation)
                } catch {
                    throw .store(error)
                }
                return true
            }
        }
        do { return try await store.encryptedRoom(roomID) } catch { throw .store(error) }
    }
}
