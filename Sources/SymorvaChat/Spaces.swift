import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// A room of a space's hierarchy, as the server summarises it (the account need not be in it).
public struct SpaceRoom: Sendable, Hashable, Identifiable {
    /// The room.
    public var id: RoomID
    /// Its name, if set.
    public var name: String?
    /// Its topic, if set.
    public var topic: String?
    /// Its canonical alias, if set.
    public var canonicalAlias: String?
    /// Its avatar (`mxc://`), if set.
    public var avatarURL: String?
    /// Members joined.
    public var joinedMembers: Int
    /// `m.room.join_rules`' `join_rule` (`public`, `restricted`, `knock`, `invite`, …), if sent.
    public var joinRule: String?
    /// Whether the room is itself a space (a subspace).
    public var isSpace: Bool
    /// Whether anyone may read its history without joining.
    public var isWorldReadable: Bool
    /// The rooms it links to (for a space), in the server's order.
    public var children: [SpaceChildLink]
}

/// A space's link to a room (`m.space.child`).
public struct SpaceChildLink: Sendable, Hashable {
    /// The linked room.
    public var roomID: RoomID
    /// Servers to join it through.
    public var via: [String]
    /// Whether the space suggests it.
    public var isSuggested: Bool
}

/// A joined space of the account.
public struct JoinedSpace: Sendable, Hashable, Identifiable {
    /// The space's room ID.
    public var id: RoomID
    /// Its name, if set.
    public var name: String?
}

/// A space's rooms, paged in from the homeserver (`GET /v1/rooms/{roomId}/hierarchy`) as a view
/// asks for them: ``state`` holds the rooms loaded so far; ``loadNextPage()`` fetches the next
/// page. One request at a time: a call while a page is loading waits for that page instead of
/// asking again. Made for one account; after that account signs out or is switched away from,
/// loading fails with `.accountEnded` and a late page is dropped.
///
/// ```swift
/// let hierarchy = try await community.chat.communityRooms()
/// try await hierarchy.loadNextPage()                     // the first page (the space itself first)
/// List(hierarchy.state.value.rooms) { room in … }        // observe, load more at the end
/// ```
public final class SpaceHierarchy: Sendable {
    /// What has been loaded.
    public struct State: Sendable, Hashable {
        /// The rooms loaded so far, depth first, without duplicates.
        public var rooms: [SpaceRoom] = []
        /// Whether every page is loaded.
        public var isComplete = false
        /// Whether a page is loading.
        public var isLoading = false
        /// Why the last page failed, until the next succeeds.
        public var failure: ChatError?
    }

    /// The space.
    public let spaceID: RoomID
    /// Pages per request (the server may send fewer).
    public let pageSize: Int
    private let chat: AccountChat
    private let publisher = ObservableValue<State>.Publisher(State())
    private let progress = Lock(Progress())

    private struct Progress {
        var nextBatch: String?
        var loading: Task<Result<Void, ChatError>, Never>?
    }

    init(spaceID: RoomID, pageSize: Int, chat: AccountChat) {
        self.spaceID = spaceID
        self.pageSize = pageSize
        self.chat = chat
    }

    /// The loaded rooms, observable.
    public var state: ObservableValue<State> { publisher.observable }

    /// Loads the next page (the first on the first call); returns at once when complete. A
    /// call while a page loads waits for that page.
    ///
    /// - Throws: `.accountEnded` after the account ended; the server's refusal (`M_FORBIDDEN`
    ///   when the account may not see the space, `M_NOT_FOUND`); `.unexpectedResponse`.
    public func loadNextPage() async throws(ChatError) {
        let task: Task<Result<Void, ChatError>, Never>? = progress.withLock { progress in
            if let loading = progress.loading { return loading }
            guard !publisher.value.isComplete else { return nil }
            let token = progress.nextBatch
            let loading = Task { await self.load(from: token) }
            progress.loading = loading
            return loading
        }
        guard let task else { return }
        try await task.value.get()
    }

    private func load(from token: String?) async -> Result<Void, ChatError> {
        publisher.update {
            $0.isLoading = true
        }
        let result: Result<SpaceHierarchyResponse, ChatError>
        do throws(ChatError) {
            let response = try await chat.perform(
                SpacesAPI.hierarchy(spaceID: spaceID, from: token, limit: pageSize, maxDepth: nil, suggestedOnly: false)
            )
            guard let page = WireJSON.decodeIfValid(SpaceHierarchyResponse.self, from: response.body) else {
                throw .unexpectedResponse
            }
            try chat.ensureCurrent()
            result = .success(page)
        } catch {
            result = .failure(error)
        }
        progress.withLock { progress in
            progress.loading = nil
            if case .success(let page) = result { progress.nextBatch = page.nextBatch }
        }
        switch result {
        case .success(let page):
            publisher.update { state in
                let known = Set(state.rooms.map(\.id))
                state.rooms += page.rooms.filter { !known.contains(RoomID($0.roomID)) }.map(Self.room)
                state.isComplete = page.nextBatch == nil
                state.isLoading = false
                state.failure = nil
            }
            return .success(())
        case .failure(let error):
            publisher.update { state in
                state.isLoading = false
                state.failure = error
            }
            return .failure(error)
        }
    }

    static func room(_ room: SpaceHierarchyResponse.Room) -> SpaceRoom {
        SpaceRoom(
            id: RoomID(room.roomID), name: room.name, topic: room.topic, canonicalAlias: room.canonicalAlias,
            avatarURL: room.avatarURL, joinedMembers: room.joinedMembers, joinRule: room.joinRule,
            isSpace: room.roomType == "m.space", isWorldReadable: room.worldReadable,
            children: room.childrenState.filter { !$0.via.isEmpty }.map {
                SpaceChildLink(roomID: RoomID($0.stateKey), via: $0.via, isSuggested: $0.suggested)
            })
    }
}

extension AccountChat {
    /// The account's joined spaces, by name.
    public func joinedSpaces() async throws(ChatError) -> [JoinedSpace] {
        do {
            return try await store.joinedSpaces().map { JoinedSpace(id: $0.roomID, name: $0.name) }
        } catch {
            throw .store(error)
        }
    }

    /// The rooms a joined space links to, as the synced state says (no request); empty for a
    /// space the account is not in. A conversation list filtered to a space keeps its rows whose
    /// ID is here.
    public func roomsOfSpace(_ spaceID: RoomID) async throws(ChatError) -> [SpaceChildLink] {
        do {
            return try await store.spaceChildren(of: spaceID).map {
                SpaceChildLink(roomID: $0.roomID, via: $0.via, isSuggested: false)
            }
        } catch {
            throw .store(error)
        }
    }

    /// The hierarchy of `spaceID`, paged from the server (nothing is loaded until
    /// ``SpaceHierarchy/loadNextPage()``).
    public func hierarchy(of spaceID: RoomID, pageSize: Int = 50) throws(ChatError) -> SpaceHierarchy {
        guard spaceID.rawValue.hasPrefix("!") else { throw .invalidArgument(name: "spaceID") }
        guard (1...1_000).contains(pageSize) else { throw .invalidArgument(name: "pageSize") }
        try ensureCurrent()
        return SpaceHierarchy(spaceID: spaceID, pageSize: pageSize, chat: self)
    }

    /// The community's space (the manifest's `community.space`; an alias is resolved), paged
    /// like ``hierarchy(of:pageSize:)``.
    ///
    /// - Throws: `.invalidArgument("community.space")` when the manifest names no space; the
    ///   server's refusal (`M_NOT_FOUND` for an unknown alias).
    public func communityRooms(pageSize: Int = 50) async throws(ChatError) -> SpaceHierarchy {
        guard let space = options.communitySpace else { throw .invalidArgument(name: "community.space") }
        var spaceID = RoomID(space)
        if space.hasPrefix("#") {
            let response = try await perform(
                MatrixEndpoint(
                    method: .get, path: "\(AuthAPI.clientPrefix)/directory/room/\(percentEncoded(space))",
                    requiresAuth: true))
            guard let resolved = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
            spaceID = RoomID(resolved)
        }
        return try hierarchy(of: spaceID, pageSize: pageSize)
    }

    /// Creates a space and returns its ID once the list shows it.
    public func createSpace(name: String, topic: String? = nil, isPublic: Bool = false) async throws(ChatError)
        -> RoomID
    {
        guard !name.isEmpty else { throw .invalidArgument(name: "name") }
        let response = try await perform(SpacesAPI.createSpace(name: name, topic: topic, isPublic: isPublic))
        guard let roomID = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        await waitUntilListed(RoomID(roomID), as: .joined)
        return RoomID(roomID)
    }

    /// Links `roomID` into `spaceID` (`m.space.child` in the space, joinable through `via`,
    /// by default the account's server) and, when the account may, names the space as the
    /// room's parent (`m.space.parent`). Waits for the server.
    ///
    /// - Throws: `.insufficientPowerLevel` when the account may not send `m.space.child` in
    ///   the space; the server's refusal.
    public func addToSpace(_ roomID: RoomID, spaceID: RoomID, via: [String]? = nil, suggested: Bool = false)
        async throws(ChatError)
    {
        let servers = via ?? [String(userID.rawValue.split(separator: ":", maxSplits: 1).last ?? "")]
        guard !servers.isEmpty, servers.allSatisfy({ !$0.isEmpty }) else { throw .invalidArgument(name: "via") }
        try await checkStatePower("m.space.child", roomID: spaceID)
        _ = try await perform(
            ChatAPI.setState(
                roomID: spaceID, type: "m.space.child", stateKey: roomID.rawValue,
                content: SpacesAPI.childContent(via: servers, suggested: suggested)))
        if (try? await checkStatePower("m.space.parent", roomID: roomID)) != nil {
            _ = try? await perform(
                ChatAPI.setState(
                    roomID: roomID, type: "m.space.parent", stateKey: spaceID.rawValue,
                    content: SpacesAPI.parentContent(via: servers)))
        }
    }

    /// Unlinks `roomID` from `spaceID` (an empty `m.space.child`). Waits for the server.
    public func removeFromSpace(_ roomID: RoomID, spaceID: RoomID) async throws(ChatError) {
        try await checkStatePower("m.space.child", roomID: spaceID)
        _ = try await perform(
            ChatAPI.setState(roomID: spaceID, type: "m.space.child", stateKey: roomID.rawValue, content: "{}"))
    }

    /// Joins a room of a space through the servers its link names (works for `restricted`
    /// rooms the account may join as a member of the space) and returns once the list shows it.
    public func join(_ roomID: RoomID, via servers: [String]) async throws(ChatError) -> RoomID {
        guard roomID.rawValue.hasPrefix("!") else { throw .invalidArgument(name: "roomID") }
        let response = try await perform(SpacesAPI.join(roomID: roomID, via: servers))
        guard let joined = RawJSON.string("room_id", in: response.body) else { throw .unexpectedResponse }
        await waitUntilListed(RoomID(joined), as: .joined)
        return RoomID(joined)
    }

    /// Throws `.insufficientPowerLevel` unless the account may send the state event `type` in
    /// the room (the room's `events[type]`, else `state_default`, else 50).
    func checkStatePower(_ type: String, roomID: RoomID) async throws(ChatError) {
        // A refusal by the stored levels is confirmed with the server's: they may not have synced
        // a change yet (a promotion a moment ago).
        for fresh in [false, true] {
            guard let (content, own) = try await ownPowerLevel(roomID: roomID, fresh: fresh) else { return }
            let required = PowerLevels.read(content)?.stateLevel(type) ?? 50
            if own >= required { return }
            if fresh { throw .insufficientPowerLevel(required: required, actual: own) }
        }
    }

    /// The room's `m.room.power_levels` content (stored, else — or with `fresh` — fetched) and the account's level
    /// in it; `nil` when the room has none. A creator of a room whose version makes creators
    /// privileged (12 and later: they are not listed in `users`) has the highest level there is.
    func ownPowerLevel(roomID: RoomID, fresh: Bool = false) async throws(ChatError) -> (content: [UInt8], level: Int)? {
        var content = fresh ? nil : (try? await store.stateContent(roomID: roomID, type: "m.room.power_levels")) ?? nil
        if content == nil {
            content = try await perform(ChatAPI.state(roomID: roomID, type: "m.room.power_levels")).body
        }
        guard let content else { return nil }
        if try await privilegedCreators(roomID: roomID).contains(userID.rawValue) { return (content, Int.max) }
        return (content, PowerLevels.read(content)?.level(of: userID.rawValue) ?? 0)
    }

    /// The creators a room's version privileges (the create event's sender and
    /// `additional_creators`, in room versions 12 and later), from the stored create event, else
    /// the room's state on the server.
    func privilegedCreators(roomID: RoomID) async throws(ChatError) -> Set<String> {
        struct Create: Decodable {
            var roomVersion: String?
            var additionalCreators: [String]?
            enum CodingKeys: String, CodingKey {
                case roomVersion = "room_version"
                case additionalCreators = "additional_creators"
            }
        }
        struct StateEvent: Decodable {
            var type: String
            var stateKey: String?
            var sender: String
            enum CodingKeys: String, CodingKey {
                case type, sender
                case stateKey = "state_key"
            }
        }
        var create = (try? await store.createEvent(roomID: roomID)) ?? nil
        if create == nil {
            let state = try await perform(ChatAPI.roomState(roomID: roomID)).body
            let events = WireJSON.decodeIfValid([StateEvent].self, from: state) ?? []
            if let sender = events.first(where: { $0.type == "m.room.create" && $0.stateKey == "" })?.sender {
                create = (sender, try await perform(ChatAPI.state(roomID: roomID, type: "m.room.create")).body)
            }
        }
        guard let create, let fields = WireJSON.decodeIfValid(Create.self, from: create.content) else { return [] }
        let version = fields.roomVersion ?? "1"
        guard (Int(version).map { $0 >= 12 } ?? false) || version == "org.matrix.hydra.11" else { return [] }
        return Set([create.sender] + (fields.additionalCreators ?? []))
    }
}
