import SymorvaFeatureKit
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaServices

/// The studio endpoints of the community services, answered in the machine's terms.
///
/// Grant, summary and revoke requests are not commands: a lost answer leaves nothing
/// ambiguous that matters for content (a grant nobody uses expires; a summary is simply not
/// shown), so every failure is reported as it is.
/// A grant as the service has it now.
enum ServiceGrantState: Sendable, Equatable {
    /// Live, with this long left on the service's clock.
    case active(remaining: Duration)
    /// Revoked (by this device, another one or the service), or expired (`expired`: on the
    /// service's clock).
    case ended(expired: Bool)
}

struct StudioService: Sendable {
    let services: CommunityServicesClient
    let requestTimeout: Duration

    func createGrant(_ request: GrantRequest, now: Duration) async -> Result<StudioGrant, StudioFailure> {
        do throws(ServicesError) {
            let answer = try await services.send(
                .post, StudioWire.Path.grants, body: StudioWire.grantBody(request),
                timeout: requestTimeout)
            guard let grant = WireJSON.decodeIfValid(StudioWire.Grant.self, from: answer)?.grant(now: now) else {
                return .failure(.serviceUnreachable(.responseDropped))
            }
            return .success(grant)
        } catch {
            return .failure(Self.failure(error))
        }
    }

    /// Sends granted content. The body is made from the ``/SymorvaMachines/GrantedContent`` only.
    func summarize(_ content: GrantedContent) async -> Result<Summary, StudioFailure> {
        do throws(ServicesError) {
            let answer = try await services.send(
                .post, StudioWire.Path.summaries, body: StudioWire.summarizeBody(content),
                timeout: requestTimeout)
            guard let summary = WireJSON.decodeIfValid(StudioWire.SummaryAnswer.self, from: answer)?.summary else {
                return .failure(.serviceUnreachable(.responseDropped))
            }
            return .success(summary)
        } catch {
            return .failure(Self.failure(error))
        }
    }

    /// What the service says of a grant now: its state and, while active, what it has left on the
    /// service's clock (how a restored grant's expiry is set, never from the device's wall clock).
    func check(_ id: GrantID) async -> Result<ServiceGrantState, StudioFailure> {
        do throws(ServicesError) {
            let answer = try await services.send(.get, StudioWire.Path.grant(id), timeout: requestTimeout)
            guard let grant = WireJSON.decodeIfValid(StudioWire.Grant.self, from: answer) else {
                return .failure(.serviceUnreachable(.responseDropped))
            }
            switch grant.state {
            case "active":
                let left = grant.expiresInMilliseconds ?? 0
                return .success(left > 0 ? .active(remaining: .milliseconds(left)) : .ended(expired: true))
            case "expired": return .success(.ended(expired: true))
            default: return .success(.ended(expired: false))
            }
        } catch {
            return .failure(Self.failure(error))
        }
    }

    func revoke(_ id: GrantID) async -> Result<GrantID, StudioFailure> {
        do throws(ServicesError) {
            _ = try await services.send(.post, StudioWire.Path.revoke(id), timeout: requestTimeout)
            return .success(id)
        } catch {
            return .failure(Self.failure(error))
        }
    }

    /// What the service's audit says it processed for this member (IDs and counts only).
    func audit() async throws(StudioError) -> [StudioAuditEntry] {
        let answer: [UInt8]
        do throws(ServicesError) {
            answer = try await services.send(.get, StudioWire.Path.audit, timeout: requestTimeout)
        } catch {
            throw .failure(Self.failure(error))
        }
        guard let page = WireJSON.decodeIfValid(StudioWire.AuditPage.self, from: answer) else {
            throw .failure(.serviceUnreachable(.responseDropped))
        }
        return page.entries.map {
            StudioAuditEntry(
                grantID: $0.grantID.map { GrantID($0) }, action: $0.action, outcome: $0.outcome,
                itemCount: $0.itemCount,
                itemIDs: $0.itemIDs.map { EventID($0) })
        }
    }

    /// A services failure in the studio's terms: the studio's codes first (a few of them 5xx
    /// answers), then by class (``/SymorvaFeatureKit/FailureClass``).
    static func failure(_ error: ServicesError) -> StudioFailure {
        switch error {
        case .server("SY_OUT_OF_SCOPE", _, let message, _):
            // "items[1] ($e3) is outside grant …'s scope": the first offending item.
            guard let open = message.firstIndex(of: "("), let close = message[open...].firstIndex(of: ")") else {
                return .outOfScope(.empty)
            }
            return .outOfScope(.outside(EventID(String(message[message.index(after: open)..<close]))))
        case .server(let code, let status, _, _)
        where status < 500 || code == "SY_SUMMARIZER_UNAVAILABLE"
            || code == "SY_HOMESERVER_UNAVAILABLE":
            return failure(code: code)
        default:
            break
        }
        switch FailureClass(error) {
        case .transport(let problem): return .serviceUnreachable(problem)
        case .rateLimited(let retryAfter): return .rateLimited(retryAfter: retryAfter)
        case .refused(let code, _): return .rejected(code: code)
        case .moduleDisabled: return .rejected(code: "SY_NOT_FOUND")
        case .signInRequired: return .serviceUnreachable(.unreachable)
        case .malformedResponse, .invalidRequest: return .serviceUnreachable(.responseDropped)
        }
    }

    static func failure(code: String) -> StudioFailure {
        switch code {
        case "SY_NOT_ROOM_MEMBER": .notRoomMember
        case "SY_GRANT_REVOKED": .grantRevoked
        case "SY_GRANT_EXPIRED": .grantExpired
        case "SY_GRANT_FORBIDDEN": .grantForbidden
        case "SY_GRANT_UNKNOWN": .grantUnknown
        case "SY_OUT_OF_SCOPE": .outOfScope(.empty)
        case "SY_SUMMARIZER_UNAVAILABLE": .summarizerUnavailable
        default: .rejected(code: code)
        }
    }
}
