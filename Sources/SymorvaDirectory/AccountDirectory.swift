import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The directory of one signed-in account: its Matrix requester and community services, bound
/// to the account for its whole life (its searches stop when the account's scope ends).
///
/// Apps use ``PublicRoomsClient`` (`community.publicRooms`) and ``DirectoryClient``
/// (`community.directory`), which follow the active account and delegate here.
public final class AccountDirectory: AccountModule {
    /// The signed-in member.
    public let userID: UserID
    /// Whether the manifest enables the member directory (the services' module).
    public let isMemberDirectoryEnabled: Bool

    let requester: any MatrixRequester
    let services: CommunityServicesClient
    let scope: AccountScope
    let tracer: Tracer
    let coalescer = RequestCoalescer<PageKey, DirectoryPage<DirectoryMember>, DirectoryError>()

    /// How many member-directory page requests joined an equal one in flight (tests wait on it as a gate).
    package var memberPageRequestJoins: ObservableValue<Int> { coalescer.joins }
    let userCoalescer = RequestCoalescer<PageKey, DirectoryPage<DirectoryUser>, DirectoryError>()

    /// The directory of the account signed in to `scope`.
    public init(
        userID: UserID, requester: any MatrixRequester, services: CommunityServicesClient, scope: AccountScope,
        isMemberDirectoryEnabled: Bool, tracer: Tracer = .shared
    ) {
        self.userID = userID
        self.requester = requester
        self.services = services
        self.scope = scope
        self.isMemberDirectoryEnabled = isMemberDirectoryEnabled
        self.tracer = tracer
    }

    /// Nothing to release: searches run in the account's scope and stop with it.
    public func stop() async {}

    /// Whether the account's scope has ended (signed out, switched away from).
    public var isEnded: Bool { scope.isEnded }

    func ensureCurrent() throws(DirectoryError) {
        if scope.isEnded { throw .accountEnded }
    }

    var access: MatrixAccess { .account(requester) }

    // MARK: Member directory (community services)

    static let membersPath = "/_symorva/v1/directory/members"

    /// One page of the member directory for `query` (its term and role).
    func memberPage(_ query: DirectoryQuery, page: DirectoryPageToken?) async throws(DirectoryError)
        -> DirectoryPage<DirectoryMember>
    {
        try ensureCurrent()
        guard isMemberDirectoryEnabled else { throw .moduleDisabled }
        let key = PageKey(query: query, page: page, access: userID.rawValue)
        let services = services
        return try await coalescer.value(for: key) {
            () async throws(DirectoryError) -> DirectoryPage<DirectoryMember> in
            var items = [URLQueryItem(name: "limit", value: String(query.pageSize))]
            if !query.term.isEmpty { items.append(URLQueryItem(name: "q", value: query.term)) }
            if case .members(let role?) = query.source { items.append(URLQueryItem(name: "role", value: role)) }
            if let page { items.append(URLQueryItem(name: "from", value: page.rawValue)) }
            let body: [UInt8]
            do throws(ServicesError) {
                body = try await services.send(.get, Self.membersPath, query: items)
            } catch {
                throw DirectoryWire.error(error)
            }
            return try DirectoryWire.decode(DirectoryWire.MemberPage.self, from: body).page
        }
    }

    /// One member's entry.
    func member(_ member: UserID) async throws(DirectoryError) -> DirectoryMember {
        try await memberEntry(.get, "\(Self.membersPath)/\(try Self.pathSegment(member))")
    }

    /// The member's own entry, fetched again from their Matrix profile now.
    func refreshOwnProfile() async throws(DirectoryError) -> DirectoryMember {
        try await memberEntry(.post, "/_symorva/v1/directory/profile/refresh")
    }

    private func memberEntry(_ method: HTTPMethod, _ path: String) async throws(DirectoryError) -> DirectoryMember {
        try ensureCurrent()
        guard isMemberDirectoryEnabled else { throw .moduleDisabled }
        let body: [UInt8]
        do throws(ServicesError) {
            body = try await services.send(method, path)
        } catch {
            throw DirectoryWire.error(error)
        }
        guard let member = try DirectoryWire.decode(DirectoryWire.Member.self, from: body).member else {
            throw .malformedResponse
        }
        return member
    }

    /// Gives `member` the role `role` (`true`), or takes it (`false`); community admins only.
    func setRole(_ role: String, _ assigned: Bool, for member: UserID) async throws(DirectoryError) -> Bool {
        try ensureCurrent()
        guard isMemberDirectoryEnabled else { throw .moduleDisabled }
        guard Self.isValidRole(role) else { throw .invalidInput("role") }
        let path = "/_symorva/v1/directory/admin/members/\(try Self.pathSegment(member))/roles/\(role)"
        struct Answer: Decodable { var changed: Bool }
        let body: [UInt8]
        do throws(ServicesError) {
            body = try await services.send(assigned ? .put : .delete, path)
        } catch {
            throw DirectoryWire.error(error)
        }
        return try DirectoryWire.decode(Answer.self, from: body).changed
    }

    /// A user ID as a path segment of the services (whose client percent-encodes paths itself);
    /// a historical user ID with a `/` cannot be one.
    static func pathSegment(_ userID: UserID) throws(DirectoryError) -> String {
        guard !userID.rawValue.contains("/") else { throw .invalidInput("user ID") }
        return userID.rawValue
    }

    /// Roles are 1–32 characters: lower-case letters, digits, `-` and `_`, starting with a letter.
    static func isValidRole(_ role: String) -> Bool {
        let bytes = Array(role.utf8)
        guard (1...32).contains(bytes.count), let first = bytes.first,
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
        else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }
    }

    // MARK: User directory (homeserver)

    /// The homeserver's user directory for `query`'s term (one page: the API has no paging).
    func userPage(_ query: DirectoryQuery) async throws(DirectoryError) -> DirectoryPage<DirectoryUser> {
        try ensureCurrent()
        guard !query.term.isEmpty else { throw .invalidInput("term") }
        let key = PageKey(query: query, page: nil, access: userID.rawValue)
        let requester = requester
        return try await userCoalescer.value(for: key) {
            () async throws(DirectoryError) -> DirectoryPage<DirectoryUser> in
            let response: [UInt8]
            do throws(MatrixRequestError) {
                response = try await requester.send(DirectoryAPI.searchUsers(term: query.term, limit: query.pageSize))
                    .body
            } catch {
                throw DirectoryWire.error(error)
            }
            return try DirectoryWire.decode(DirectoryWire.UserSearchResponse.self, from: response).page
        }
    }
}
