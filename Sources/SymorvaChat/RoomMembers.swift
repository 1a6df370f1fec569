import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Which rooms have their full member list in the store.
///
/// Lazy-loaded members (`/sync` v2's filter) and sliding sync's list (`$LAZY`) store only the
/// members the timeline's senders need, yet a room key must reach every member's devices: the
/// first time a room's key is shared in a process, its members are read with
/// `GET /rooms/{roomId}/members`. From then on sync keeps them (every membership change is a
/// timeline event) — except across a gap (a `limited` timeline), whose skipped state may hold
/// membership changes: the room is read again before its next key is shared.
struct MemberLists: Sendable {
    private var loaded: Set<RoomID> = []
    /// Bumped by every gap: a load that started before one does not mark the room loaded.
    private var generations: [RoomID: UInt64] = [:]

    func isLoaded(_ roomID: RoomID) -> Bool { loaded.contains(roomID) }
    func generation(_ roomID: RoomID) -> UInt64 { generations[roomID, default: 0] }

    mutating func invalidate(_ roomID: RoomID) {
        loaded.remove(roomID)
        generations[roomID, default: 0] &+= 1
    }

    /// Marks `roomID` loaded if no gap arrived since the load began at `generation`.
    mutating func markLoaded(_ roomID: RoomID, since generation: UInt64) {
        if generations[roomID, default: 0] == generation { loaded.insert(roomID) }
    }
}

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
    /// with the room's full member list: read from the server first if this process has not
    /// read it since the room's last gap (``MemberLists``). One request per room at a time.
    /// `nil` when the room is not stored.
    ///
    /// - Throws: ``MemberListError``: the request failed or its answer was unreadable (the send
    ///   is tried again by its queue), or the store failed.
    func roomForEncryption(_ roomID: RoomID) async throws(MemberListError) -> EncryptedRoom? {
        if !memberLists.withLock({ $0.isLoaded(roomID) }) {
            let generation = memberLists.withLock { $0.generation(roomID) }
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
                do throws(ChatStoreError) { try await store.storeMembers(roomID: roomID, page: page) } catch {
                    throw .store(error)
                }
                return true
            }
            memberLists.withLock { $0.markLoaded(roomID, since: generation) }
        }
        do { return try await store.encryptedRoom(roomID) } catch { throw .store(error) }
    }
}
