import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaServices

/// Signs an account out of the community services (`POST /_symorva/v1/auth/logout`): the
/// services revoke every services token issued for the account's Matrix device.
///
/// The first step of a sign-out, run by the sign-out host before its Matrix `/logout`: the
/// session is still live then, so a client that holds no services token (none was used in this
/// launch; tokens of earlier launches may still be valid) asks the homeserver for an OpenID token
/// and exchanges it. A token the running account's client held is handed over and presented
/// as it is. Best effort: a failure or a timeout is logged and the sign-out goes on.
struct ServicesSignOut {
    /// How long the whole services sign-out (an exchange when needed, then the logout) may take
    /// before the sign-out goes on without it.
    static let timeout: Duration = .seconds(10)

    let account: UserID
    let services: CommunityServicesClient
    let clock: any RuntimeClock
    let logger: Logger

    /// Logs out of the services, within ``timeout`` on `clock`.
    ///
    /// - Returns: how many services tokens the services revoked, or `nil` when the logout
    ///   failed or timed out (logged).
    @discardableResult
    func run() async -> Int? {
        let outcome = OneShot<Result<Int, ServicesError>?>()
        let services = services
        let work = Task {
            do throws(ServicesError) {
                outcome.resolve(.success(try await services.logOut(timeout: Self.timeout)))
            } catch {
                outcome.resolve(.failure(error))
            }
        }
        let clock = clock
        let deadline = Task {
            // Cancelled once the logout is answered; the outcome is known by then.
            try? await clock.sleep(for: Self.timeout)
            outcome.resolve(nil)
        }
        let result = await outcome.value
        work.cancel()
        deadline.cancel()
        switch result {
        case .success(let revoked):
            logger.info("signed out of the services account=\(account) revoked=\(revoked)")
            return revoked
        case .failure(let error):
            logger.warning("signing out of the services failed account=\(account) error=\(error)")
            return nil
        case nil:
            logger.warning("signing out of the services failed account=\(account) error=timeout(\(Self.timeout))")
            await services.invalidate()
            return nil
        }
    }
}

/// The OpenID source of a sign-out whose session cannot answer (soft logged out, or already
/// wiped by the server's logout): only a token handed over can be presented.
struct NoOpenIDSource: OpenIDTokenSource {
    func requestOpenIDToken() async throws(ServicesError) -> OpenIDToken {
        throw .openIDRefused(.unknownToken, status: 401)
    }
}
