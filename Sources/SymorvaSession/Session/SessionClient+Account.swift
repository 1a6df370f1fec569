import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

// Managing the account's devices and the account itself (issue 27). Removing a device and
// deactivating the account are behind user-interactive authentication: both go through the
// session machine's password stage (``SessionClient/authorize(method:path:body:password:)``).

extension SessionClient {
    /// Renames one of the account's devices (its `display_name`, which other members see).
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/notSignedIn``, the server's refusal
    ///   (`serverError`, e.g. 404 for a device the account does not have), a transport failure.
    public func renameDevice(_ deviceID: String, to name: String) async throws(SessionError) {
        guard case .running(let context) = sessions.active.value else { throw .notSignedIn }
        var body = JSONObjectWriter()
        body.string("display_name", name)
        let endpoint = MatrixEndpoint(
            method: .put, path: "/_matrix/client/v3/devices/\(percentEncoded(deviceID))", body: body.bytes,
            requiresAuth: true)
        do {
            _ = try await context.requester.send(endpoint)
        } catch {
            throw SessionError(request: error)
        }
    }

    /// Removes one of the account's devices: it is signed out and its keys are gone from the
    /// server. Asks for the account's password through the session's password stage (sent only
    /// if the server asks for it).
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/invalidCredentials`` for a wrong password (the
    ///   device stays), ``/SymorvaMachines/SessionError/notSignedIn``, the server's refusal.
    public func removeDevice(_ deviceID: String, password: Secret<String>) async throws(SessionError) {
        _ = try await authorize(
            method: "DELETE", path: "/_matrix/client/v3/devices/\(percentEncoded(deviceID))", body: Array("{}".utf8),
            password: password)
    }

    /// Deactivates the account for good (`/account/deactivate`, with the password stage), then
    /// wipes its local data on this device as signing out does; the next account on the device,
    /// if any, becomes active.
    ///
    /// - Throws: ``/SymorvaMachines/SessionError/invalidCredentials`` for a wrong password (the
    ///   account stays as it was), ``/SymorvaMachines/SessionError/notSignedIn``, the server's
    ///   refusal.
    public func deactivateAccount(password: Secret<String>) async throws(SessionError) {
        guard let account = state.value.account else { throw .notSignedIn }
        do {
            _ = try await authorize(
                method: "POST", path: "/_matrix/client/v3/account/deactivate", body: Array(#"{"erase":false}"#.utf8),
                password: password)
        } catch .cancelled {
            // The server drops the account's tokens while it deactivates: a sync that met the
            // dead token first ends the authorization before its answer arrives. Asked, not
            // guessed: a token that still works means the account is still there.
            guard await !hasLiveToken() else { throw .cancelled }
        }
        // The server has dropped every token: the local sign-out's /logout answers
        // M_UNKNOWN_TOKEN and the data is wiped. A sync that met the dead token first may have
        // signed the account out (and wiped it) already.
        do {
            try await signOut()
        } catch .notSignedIn {
            // Signed out by the token's end.
        }
        _ = await accounts.first { accounts in accounts.contains { $0.id == account.id } ? nil : () }
    }
}

extension SessionClient {
    /// Whether the active account's access token still works (`/account/whoami`).
    fileprivate func hasLiveToken() async -> Bool {
        guard case .running(let context) = sessions.active.value else { return false }
        let endpoint = MatrixEndpoint(method: .get, path: "/_matrix/client/v3/account/whoami", requiresAuth: true)
        do {
            _ = try await context.requester.send(endpoint)
            return true
        } catch {
            switch SessionError(request: error) {
            case .unknownToken, .notSignedIn: return false
            default: return true
            }
        }
    }
}

extension SessionError {
    /// A requester's failure as the session's error.
    init(request error: MatrixRequestError) {
        switch error {
        case .transport(let transport): self.init(transport: transport)
        case .notSignedIn: self = .notSignedIn
        case .invalidRequest: self = .invalidResponse(reason: "invalid request")
        case .matrix(let matrix):
            if matrix.code == .unknownToken || matrix.code == .missingToken {
                self = .unknownToken(softLogout: matrix.isSoftLogout)
            } else {
                self = .serverError(status: matrix.status, errcode: matrix.code.errcode)
            }
        }
    }
}
