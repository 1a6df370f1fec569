import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// How the directory talks to the homeserver: as the signed-in account, or signed out.
///
/// Signed out, requests that need no token (listing the public rooms, resolving an alias) go
/// without one. A request that needs one (searching the room directory, which Synapse answers
/// only with a token) is sent as a **guest**: the first such request registers a guest account
/// (`POST /register?kind=guest`), whose token lives in memory only, for this process. A server
/// that allows no guests makes those requests fail with ``/SymorvaMachines/DirectoryError/signInRequired``.
package enum MatrixAccess: Sendable {
    /// As a signed-in account (its requester refreshes tokens).
    case account(any MatrixRequester)
    /// Signed out, through `guest` when a token is needed.
    case signedOut(GuestAccess)

    /// Sends `endpoint` and returns the 2xx response.
    package func send(_ endpoint: MatrixEndpoint) async throws(DirectoryError) -> HTTPResponse {
        switch self {
        case .account(let requester):
            do { return try await requester.send(endpoint) } catch { throw DirectoryWire.error(error) }
        case .signedOut(let guest):
            return try await guest.send(endpoint)
        }
    }

    /// Whether requests carry an account's token.
    package var isSignedIn: Bool {
        if case .account = self { return true }
        return false
    }
}

/// Signed-out access to one homeserver, with a guest token obtained on first need.
package actor GuestAccess {
    private let homeserverURL: HomeserverURL
    private let transport: any HTTPTransport
    private var token: Secret<String>?
    private var registration: Task<Result<Secret<String>, DirectoryError>, Never>?
    private let logger = Logger(category: "directory")

    /// Access to the homeserver at `homeserverURL` through `transport`.
    package init(homeserverURL: HomeserverURL, transport: any HTTPTransport) {
        self.homeserverURL = homeserverURL
        self.transport = transport
    }

    /// How many guest accounts this access registered (tests).
    package private(set) var guestRegistrations = 0

    /// Sends `endpoint`, with a guest token when it needs one; a rejected guest token is
    /// replaced once.
    package func send(_ endpoint: MatrixEndpoint) async throws(DirectoryError) -> HTTPResponse {
        guard endpoint.requiresAuth else { return try await perform(endpoint, token: nil) }
        let first = try await guestToken()
        do throws(DirectoryError) {
            return try await perform(endpoint, token: first)
        } catch .signInRequired {
            if token == first { token = nil }
            return try await perform(endpoint, token: try await guestToken())
        }
    }

    private func perform(_ endpoint: MatrixEndpoint, token: Secret<String>?) async throws(DirectoryError)
        -> HTTPResponse
    {
        do {
            return try await MatrixExchange.perform(
                endpoint, on: homeserverURL, token: token, timeout: nil, transport: transport)
        } catch {
            throw DirectoryWire.error(error)
        }
    }

    /// The guest token, registering a guest once however many requests need it at the same time.
    private func guestToken() async throws(DirectoryError) -> Secret<String> {
        if let token { return token }
        let task: Task<Result<Secret<String>, DirectoryError>, Never>
        if let registration {
            task = registration
        } else {
            task = Task { await self.registerGuest() }
            registration = task
        }
        let result = await task.value
        registration = nil
        let token = try result.get()
        self.token = token
        return token
    }

    private func registerGuest() async -> Result<Secret<String>, DirectoryError> {
        do throws(DirectoryError) {
            let response = try await perform(DirectoryAPI.registerGuest(), token: nil)
            let answer = try DirectoryWire.decode(DirectoryWire.GuestRegistration.self, from: response.body)
            guestRegistrations += 1
            logger.info("registered a guest for the signed-out room directory")
            return .success(Secret(answer.accessToken))
        } catch .forbidden, .server(code: "M_GUEST_ACCESS_FORBIDDEN", _) {
            return .failure(.signInRequired)
        } catch {
            return .failure(error)
        }
    }
}
