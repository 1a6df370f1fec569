import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// The homeserver's public room directory: `community.publicRooms`, always present, signed in
/// or not.
///
/// Signed out it lists the rooms without a token and searches them as a guest (see
/// the module's guest access); signed in, as the active account. Joining, publishing and unpublishing
/// need an account (``/SymorvaMachines/DirectoryError/notSignedIn`` otherwise) and wait for the
/// server; publishing checks the room's power levels first.
///
/// ```swift
/// let rooms = community.publicRooms
/// let first = try await rooms.page(term: "governance")            // signed out is fine
/// if let next = first.nextPage { _ = try await rooms.page(term: "governance", since: next) }
/// let roomID = try await rooms.resolve(alias: "#general:localhost")
/// try await rooms.join(roomIDOrAlias: roomID.rawValue)            // signed in
/// try await rooms.setPublished(true, roomID: roomID)              // room admins
/// ```
public final class PublicRoomsClient: Sendable {
    private let guest: GuestAccess
    private let tracer: Tracer
    private let active = ActiveAccount<AccountDirectory>()
    private let coalescer = RequestCoalescer<PageKey, DirectoryPage<PublicRoom>, DirectoryError>()

    /// How many page requests joined an equal one in flight (tests wait on it as a gate).
    package var pageRequestJoins: ObservableValue<Int> { coalescer.joins }

    /// A client for the homeserver at `homeserverURL`, following no account until the
    /// community says which one is active.
    package init(homeserverURL: HomeserverURL, transport: any HTTPTransport, tracer: Tracer = .shared) {
        self.guest = GuestAccess(homeserverURL: homeserverURL, transport: transport)
        self.tracer = tracer
    }

    /// Makes `directory` (the new active account's) the one requests are made as; `nil` when
    /// nobody is signed in.
    package func follow(_ directory: AccountDirectory?) {
        active.follow(directory, isSignedIn: directory != nil)
    }

    private var current: AccountDirectory? { active.current }

    private var access: (MatrixAccess, String, AccountScope?) {
        if let account = current, !account.isEnded {
            return (account.access, account.userID.rawValue, account.scope)
        }
        return (.signedOut(guest), "", nil)
    }

    /// The signed-out access (tests: how many guests it registered).
    package var guestAccess: GuestAccess { guest }

    /// A new observable search of the public rooms of `server` (`nil`: this homeserver), as the
    /// account active now (signed out when none).
    public func search(server: String? = nil, pageSize: Int = 20) -> DirectorySearch<PublicRoom> {
        let (_, _, scope) = access
        return DirectorySearch(source: .publicRooms(server: server), pageSize: pageSize, scope: scope, tracer: tracer) {
            [weak self] query, page in
            guard let self else { return .failure(.accountEnded) }
            do throws(DirectoryError) {
                return .success(try await self.fetch(query, since: page))
            } catch {
                return .failure(error)
            }
        }
    }

    /// One page of public rooms matching `term` (every public room when empty), from `since`
    /// (the previous page's ``/SymorvaMachines/DirectoryPage/nextPage``), with the server's
    /// total estimate. Concurrent equal requests share one.
    public func page(
        term: String = "", server: String? = nil, since: DirectoryPageToken? = nil, limit: Int = 20
    ) async throws(DirectoryError) -> DirectoryPage<PublicRoom> {
        try await fetch(DirectoryQuery(source: .publicRooms(server: server), term: term, pageSize: limit), since: since)
    }

    func fetch(_ query: DirectoryQuery, since: DirectoryPageToken?) async throws(DirectoryError)
        -> DirectoryPage<PublicRoom>
    {
        guard case .publicRooms(let server) = query.source else { throw .invalidInput("source") }
        if let server, !MatrixServerName.isValid(server) { throw .invalidInput("server") }
        let (access, accessKey, _) = access
        let key = PageKey(query: query, page: since, access: accessKey)
        return try await coalescer.value(for: key) { () async throws(DirectoryError) -> DirectoryPage<PublicRoom> in
            // The plain listing needs no token; search (and another server's list) goes by POST.
            let endpoint =
                query.term.isEmpty && (server == nil || access.isSignedIn)
                ? DirectoryAPI.publicRooms(
                    limit: query.pageSize, since: since?.rawValue, server: server, authenticated: access.isSignedIn)
                : DirectoryAPI.searchPublicRooms(
                    term: query.term, limit: query.pageSize, since: since?.rawValue, server: server)
            let response = try await access.send(endpoint)
            return try DirectoryWire.decode(DirectoryWire.PublicRoomsResponse.self, from: response.body).page
        }
    }

    /// The room `alias` (`#name:server`) names.
    ///
    /// - Throws: ``/SymorvaMachines/DirectoryError/invalidInput(_:)`` for a malformed alias,
    ///   ``/SymorvaMachines/DirectoryError/notFound`` when no room has it.
    public func resolve(alias: String) async throws(DirectoryError) -> RoomID {
        guard Self.isRoomAlias(alias) else { throw .invalidInput("alias") }
        let response = try await access.0.send(DirectoryAPI.resolveAlias(alias))
        return RoomID(try DirectoryWire.decode(DirectoryWire.RoomIDAnswer.self, from: response.body).roomID)
    }

    /// Joins a listed room (by its ID or an alias) as the active account; returns its ID. The
    /// conversation appears in `community.chat` with the next sync.
    public func join(roomIDOrAlias: String) async throws(DirectoryError) -> RoomID {
        let account = try signedIn()
        guard roomIDOrAlias.hasPrefix("!") || Self.isRoomAlias(roomIDOrAlias) else { throw .invalidInput("room") }
        let response = try await account.access.send(ChatAPI.join(roomIDOrAlias))
        try active.ensureActive(account, orThrow: DirectoryError.self)
        return RoomID(try DirectoryWire.decode(DirectoryWire.RoomIDAnswer.self, from: response.body).roomID)
    }

    /// Joins `room`, listed by ``page(term:server:since:limit:)`` or a search.
    public func join(_ room: PublicRoom) async throws(DirectoryError) -> RoomID {
        try await join(roomIDOrAlias: room.roomID.rawValue)
    }

    /// Whether `roomID` is published in this homeserver's room directory.
    public func isPublished(_ roomID: RoomID) async throws(DirectoryError) -> Bool {
        let response = try await access.0.send(DirectoryAPI.visibility(roomID: roomID))
        return try DirectoryWire.decode(DirectoryWire.VisibilityAnswer.self, from: response.body).visibility == "public"
    }

    /// Publishes `roomID` in the room directory (`true`) or takes it out (`false`), and
    /// returns once the server has done it. The room's power levels are checked first: the
    /// member needs the level to send `m.room.canonical_alias` (what Synapse asks of a room
    /// admin), or to be a creator of a room whose version ranks creators above every level (12).
    ///
    /// - Throws: ``/SymorvaMachines/DirectoryError/forbidden(needed:has:)`` with both levels
    ///   when the member's is too low (nothing is sent then); ``/SymorvaMachines/DirectoryError/notSignedIn``.
    public func setPublished(_ published: Bool, roomID: RoomID) async throws(DirectoryError) {
        let account = try signedIn()
        let create = try await account.access.send(DirectoryAPI.createEvent(roomID: roomID))
        let creation = try DirectoryWire.decode(DirectoryWire.CreateEvent.self, from: create.body)
        // Room version 12 gives its creators a power above every level, outside `users`.
        if !creation.isPrivilegedCreator(account.userID) {
            let levels = try await account.access.send(DirectoryAPI.powerLevels(roomID: roomID))
            let power = try DirectoryWire.decode(DirectoryWire.PowerLevels.self, from: levels.body)
            let has = power.level(of: account.userID)
            guard has >= power.publishLevel else { throw .forbidden(needed: power.publishLevel, has: has) }
        }
        _ = try await account.access.send(DirectoryAPI.setVisibility(roomID: roomID, published: published))
        try active.ensureActive(account, orThrow: DirectoryError.self)
    }

    private func signedIn() throws(DirectoryError) -> AccountDirectory {
        try active.module(orThrow: DirectoryError.self)
    }

    /// `#localpart:server`, at most 255 bytes.
    static func isRoomAlias(_ text: String) -> Bool {
        guard text.utf8.count <= 255, text.hasPrefix("#"), let colon = text.firstIndex(of: ":") else { return false }
        let local = text[text.index(after: text.startIndex)..<colon]
        let server = String(text[text.index(after: colon)...])
        return !local.isEmpty && MatrixServerName.isValid(server)
    }
}
