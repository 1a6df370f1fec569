import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// The wallet endpoints of the community services, answered in the machine's terms.
///
/// This is where an HTTP exchange becomes a ``PrepareResult``, ``ConfirmResult`` or
/// ``QueryResult``, and the one place that decides which failures are **ambiguous**. For a
/// confirm request the rule is strict: only an answer the service wrote itself is definitive
/// (a parsed command answer, or a 4xx error, which the service sends before it records
/// anything). Everything else — a timeout, a reset or empty reply, a 5xx, an unreadable 2xx body,
/// even a refused connection — may hide an executed command, so it is a
/// ``ConfirmResult/transportError(_:)`` and the machine moves to `unknown` and queries.
///
/// A 429 (`SY_LIMIT_EXCEEDED`) is the service's own answer, sent before it handles anything:
/// for a confirm it is a definitive "not executed" (``TransferFailure/rateLimited(retryAfter:)``,
/// the draft stays confirmable), never unknown. Prepare and reads reach here only after the
/// services client's own retries (``RateLimitPolicy``); a confirm is never retried by it.
struct WalletService: Sendable {
    let services: CommunityServicesClient
    let requestTimeout: Duration
    let draftLifetime: Duration?

    // MARK: Prepare

    func prepare(_ request: TransferRequest, now: Duration) async -> PrepareResult {
        let body = WalletWire.PrepareRequest(
            recipient: request.recipient.rawValue, asset: request.asset.code, amount: request.amount.formatted,
            ttlMilliseconds: draftLifetime.map { Int(($0 / .milliseconds(1)).rounded()) })
        do throws(ServicesError) {
            let answer = try await services.send(
                .post, WalletWire.Path.prepare, body: body, timeout: requestTimeout)
            guard let draft = WireJSON.decodeIfValid(WalletWire.Draft.self, from: answer)?.draft(now: now) else {
                return .transportError(.responseDropped)
            }
            return .drafted(draft)
        } catch {
            return Self.prepareResult(for: error)
        }
    }

    /// A failed prepare: nothing was committed, so every failure is safe to report as it is.
    static func prepareResult(for error: ServicesError) -> PrepareResult {
        switch error {
        case .rateLimited(let retryAfter):
            return .failed(.rateLimited(retryAfter: retryAfter))
        case .server(let code, let status, _, _) where status < 500:
            return .failed(prepareFailure(code: code))
        case .unauthorized(let code):
            return .failed(.rejected(code: code))
        default:
            return .transportError(problem(error))
        }
    }

    static func prepareFailure(code: String) -> TransferFailure {
        switch code {
        case "SY_INSUFFICIENT_FUNDS": .insufficientFunds
        case "SY_RECIPIENT_UNKNOWN": .recipientUnknown
        case "SY_INVALID_AMOUNT": .invalidAmount
        case "SY_UNKNOWN_ASSET": .assetUnknown
        case "SY_WALLET_LOCKED": .lockedOut
        default: .rejected(code: code)
        }
    }

    // MARK: Confirm

    func confirm(commandID: CommandID, draftID: DraftID, verification: SealedVerification) async -> ConfirmResult {
        let body = WalletWire.ConfirmRequest(
            draftID: draftID.rawValue, commandID: commandID.rawValue,
            verification: .init(
                method: verification.method.rawValue,
                sealed: Data(verification.sealedBytes.exposedValue).base64EncodedString()))
        do throws(ServicesError) {
            let answer = try await services.send(
                .post, WalletWire.Path.confirm, body: body, timeout: requestTimeout,
                deliversAtMostOnce: true)
            return Self.confirmResult(answer: answer)
        } catch {
            return Self.confirmResult(for: error)
        }
    }

    /// A 2xx answer to a confirm request. `unknown_command` is not an answer to a confirm;
    /// it and anything unreadable are ambiguous.
    static func confirmResult(answer: [UInt8]) -> ConfirmResult {
        switch commandOutcome(answer) {
        case .settled(let transfer): .settled(transfer)
        case .failed(let failure): .failed(failure)
        case .pending: .pending
        case .unknownCommand, .unreadable: .transportError(.responseDropped)
        }
    }

    /// What a command answer (`CommandAnswer`, to a confirm or a query) says.
    private enum CommandOutcome {
        case settled(Transfer)
        case failed(TransferFailure)
        case pending
        case unknownCommand
        /// Not JSON of the documented shape, an unknown status, or a status without its field.
        case unreadable
    }

    private static func commandOutcome(_ answer: [UInt8]) -> CommandOutcome {
        guard let answer = WireJSON.decodeIfValid(WalletWire.CommandAnswer.self, from: answer) else {
            return .unreadable
        }
        switch answer.status {
        case "settled": return answer.transfer?.transfer.map { .settled($0) } ?? .unreadable
        case "failed": return answer.failure.map { .failed($0.transferFailure) } ?? .unreadable
        case "pending": return .pending
        case "unknown_command": return .unknownCommand
        default: return .unreadable
        }
    }

    /// A confirm request that got no command answer. Only the service's own 4xx refusals are
    /// definitive: it sends them before anything is recorded. A 429 among them says so outright
    /// (rate limits are checked before routing), and keeps the draft confirmable.
    static func confirmResult(for error: ServicesError) -> ConfirmResult {
        switch error {
        case .rateLimited(let retryAfter):
            return .failed(.rateLimited(retryAfter: retryAfter))
        case .server(let code, let status, _, _) where status < 500:
            return .failed(.rejected(code: code))
        case .unauthorized(let code):
            // The services check the bearer token before routing: the handler never ran.
            return .failed(.rejected(code: code))
        default:
            return .transportError(problem(error))
        }
    }

    // MARK: Query

    func query(_ commandID: CommandID) async -> QueryResult {
        do throws(ServicesError) {
            let answer = try await services.send(.get, WalletWire.Path.command(commandID), timeout: requestTimeout)
            return Self.queryResult(answer: answer)
        } catch {
            // Whatever went wrong, the command's outcome is still unknown: query again later
            // (after the service's hint, when it limited the query).
            if case .rateLimited(let retryAfter) = error { return .rateLimited(retryAfter: retryAfter) }
            return .transportError(Self.problem(error))
        }
    }

    static func queryResult(answer: [UInt8]) -> QueryResult {
        switch commandOutcome(answer) {
        case .settled(let transfer): .settled(transfer)
        case .failed(let failure): .failed(failure)
        case .pending: .pending
        case .unknownCommand: .unknownCommand
        case .unreadable: .transportError(.responseDropped)
        }
    }

    // MARK: Transport problems

    /// What a failed exchange means for an outcome. Every case is treated as ambiguous by the
    /// machine for a confirm; the distinction is for traces and for the member.
    ///
    /// The exchange and 5xx answers are classified as everywhere (``/SymorvaFeatureKit/FailureClass``);
    /// the member's credentials refused (OpenID, the services token) or the module off reach
    /// no wallet: ``/SymorvaMachines/TransportProblem/unreachable``; any other answer (a 4xx,
    /// unreadable JSON) is one the wallet could not use: ``/SymorvaMachines/TransportProblem/responseDropped``.
    static func problem(_ error: ServicesError) -> TransportProblem {
        switch FailureClass(error) {
        case .transport(let problem): problem
        case .signInRequired, .moduleDisabled, .refused(_, 401): .unreachable
        // Callers map a rate limit to their own typed outcome first; a 4xx answer otherwise.
        case .refused, .rateLimited, .malformedResponse, .invalidRequest: .responseDropped
        }
    }

    // MARK: Balances, history, PIN

    func balances() async throws(TransferError) -> [Balance] {
        let answer = try await call(.get, WalletWire.Path.balances)
        guard let page = WireJSON.decodeIfValid(WalletWire.Balances.self, from: answer) else {
            throw .transport(.responseDropped)
        }
        var balances: [Balance] = []
        for entry in page.balances {
            guard let amount = try? Amount(entry.amount, precision: entry.precision) else {
                throw .transport(.responseDropped)
            }
            balances.append(Balance(asset: Asset(code: entry.asset, precision: entry.precision), amount: amount))
        }
        return balances
    }

    func history(limit: Int) async throws(TransferError) -> [LedgerEntry] {
        let answer = try await call(
            .get, WalletWire.Path.transfers, query: [URLQueryItem(name: "limit", value: String(limit))])
        guard let page = WireJSON.decodeIfValid(WalletWire.TransferPage.self, from: answer) else {
            throw .transport(.responseDropped)
        }
        let entries = page.transfers.compactMap(\.ledgerEntry)
        guard entries.count == page.transfers.count else { throw .transport(.responseDropped) }
        return entries
    }

    func sealingKey() async throws(TransferError) -> [UInt8] {
        let answer = try await call(.get, WalletWire.Path.capabilities)
        guard let capabilities = WireJSON.decodeIfValid(WalletWire.Capabilities.self, from: answer) else {
            throw .transport(.responseDropped)
        }
        guard let wallet = capabilities.modules.wallet, wallet.enabled else {
            throw .failure(.rejected(code: "module_disabled"))
        }
        guard let key = wallet.sealingKey?.bytes, key.count == SealingContext.publicKeyLength else {
            throw .transport(.responseDropped)
        }
        return key
    }

    func setPIN(sealed: [UInt8]) async throws(TransferError) {
        let body = WalletWire.PINRequest(sealed: Data(sealed).base64EncodedString())
        do throws(ServicesError) {
            _ = try await services.send(
                .post, WalletWire.Path.pin, body: body, timeout: requestTimeout)
        } catch {
            if case .server(let code, let status, _, _) = error, status < 500 {
                throw .failure(code == "SY_WALLET_LOCKED" ? .lockedOut : .rejected(code: code))
            }
            throw Self.transferError(error)
        }
    }

    private func call(
        _ method: HTTPMethod, _ path: String, query: [URLQueryItem] = []
    ) async throws(TransferError) -> [UInt8] {
        do throws(ServicesError) {
            return try await services.send(method, path, query: query, timeout: requestTimeout)
        } catch {
            throw Self.transferError(error)
        }
    }

    /// A failed read (balances, history): a refusal by code (a rate limit that outlasted the
    /// client's retries among them), or a transport problem.
    static func transferError(_ error: ServicesError) -> TransferError {
        switch error {
        case .rateLimited(let retryAfter): .failure(.rateLimited(retryAfter: retryAfter))
        case .server(let code, let status, _, _) where status < 500: .failure(.rejected(code: code))
        case .unauthorized(let code): .failure(.rejected(code: code))
        default: .transport(problem(error))
        }
    }
}
