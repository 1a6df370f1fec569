import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

/// The community's member directory: `community.directory`, present exactly when the manifest
/// enables the directory module, and then one instance for the community's whole life.
///
/// It lists and searches the community's members as the community services know them (Matrix
/// display name and avatar, kept fresh by the services, and the roles the community's admins
/// gave them), and searches the homeserver's user directory. It acts for the account active
/// when called (``/SymorvaMachines/DirectoryError/notSignedIn`` without one); a search belongs
/// to the account it was made for and ends with it.
///
/// ```swift
/// guard let directory = community.directory else { return }     // disabled in the manifest
/// let people = try directory.members()
/// let stop = people.results.subscribe { state in show(state.results?.items ?? []) }
/// people.update(term: "ali")                                      // as the member types
/// let stewards = try await directory.members(role: "steward").search()
/// let found = try await directory.users().search("bob")           // the homeserver's directory
/// ```
public final class DirectoryClient: Sendable {
    private let active = ActiveAccount<AccountDirectory>()

    /// A directory that shows nobody until the community tells it which account is active.
    package init() {}

    /// A directory that always acts for `directory`: for tools and tests that manage one
    /// account themselves. Apps use `community.directory`.
    public convenience init(following directory: AccountDirectory) {
        self.init()
        follow(directory)
    }

    /// Makes `directory` (the new active account's) the one this client acts for.
    package func follow(_ directory: AccountDirectory?) {
        active.follow(directory, isSignedIn: directory != nil)
    }

    private func account() throws(DirectoryError) -> AccountDirectory {
        try active.module(orThrow: DirectoryError.self)
    }

    /// The active member, or `nil` while nobody is signed in.
    public var userID: UserID? { active.current?.userID }

    /// A new observable search of the community's members (only those with `role` when given).
    public func members(role: String? = nil, pageSize: Int = 20) throws(DirectoryError) -> DirectorySearch<
        DirectoryMember
    > {
        let account = try account()
        if let role, !AccountDirectory.isValidRole(role) { throw .invalidInput("role") }
        return DirectorySearch(
            source: .members(role: role), pageSize: pageSize, scope: account.scope, tracer: account.tracer
        ) { [weak account] query, page in
            guard let account else { return .failure(.accountEnded) }
            do throws(DirectoryError) {
                return .success(try await account.memberPage(query, page: page))
            } catch {
                return .failure(error)
            }
        }
    }

    /// A new observable search of the homeserver's user directory (a term is needed; one page,
    /// the server's best matches).
    public func users(pageSize: Int = 20) throws(DirectoryError) -> DirectorySearch<DirectoryUser> {
        let account = try account()
        return DirectorySearch(source: .users, pageSize: pageSize, scope: account.scope, tracer: account.tracer) {
            [weak account] query, _ in
            guard let account else { return .failure(.accountEnded) }
            do throws(DirectoryError) {
                return .success(try await account.userPage(query))
            } catch {
                return .failure(error)
            }
        }
    }

    /// One member's directory entry.
    ///
    /// - Throws: ``/SymorvaMachines/DirectoryError/notFound`` when the member is not listed.
    public func member(_ userID: UserID) async throws(DirectoryError) -> DirectoryMember {
        try await active.withActive { account async throws(DirectoryError) -> DirectoryMember in
            try await account.member(userID)
        }
    }

    /// Asks the services to fetch the active member's Matrix profile again now (after changing
    /// the display name or avatar) and returns the fresh entry.
    @discardableResult
    public func refreshOwnProfile() async throws(DirectoryError) -> DirectoryMember {
        try await active.withActive { account async throws(DirectoryError) -> DirectoryMember in
            try await account.refreshOwnProfile()
        }
    }

    /// Gives `member` the role `role`; community admins only. Returns whether it changed
    /// anything (`false`: the member had it).
    ///
    /// - Throws: ``/SymorvaMachines/DirectoryError/forbidden(needed:has:)`` for a member who
    ///   is not an admin; ``/SymorvaMachines/DirectoryError/invalidInput(_:)`` for a malformed role.
    @discardableResult
    public func assignRole(_ role: String, to member: UserID) async throws(DirectoryError) -> Bool {
        try await account().setRole(role, true, for: member)
    }

    /// Takes the role `role` from `member`; community admins only. Returns whether it changed
    /// anything (`false`: the member did not have it).
    @discardableResult
    public func removeRole(_ role: String, from member: UserID) async throws(DirectoryError) -> Bool {
        try await account().setRole(role, false, for: member)
    }
}

extension AccountDirectory: AccountBound {}

extension DirectoryError: ActiveAccountError {}
