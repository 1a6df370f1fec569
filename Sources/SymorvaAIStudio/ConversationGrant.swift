import SymorvaMachines
import SymorvaRuntime

/// A grant as ``AccountStudio/grants`` shows it: a value, republished when its status changes.
public struct GrantInfo: Sendable, Hashable {
    /// The service's ID.
    public let id: GrantID
    /// The conversation.
    public let roomID: RoomID
    /// What of it may be read.
    public let scope: GrantScope
    /// When it expires (wall clock).
    public let expiresAt: Timestamp
    /// Where it is.
    public let status: GrantStatus
}

/// One grant of one account: what ``AccountStudio/requestGrant(for:scope:)`` returns and what
/// ``AccountStudio/summarize(using:)`` and ``AccountStudio/revoke(_:)`` take.
///
/// It belongs to the account that asked for it, for good: once that account is switched away
/// from or signed out, every use throws ``StudioError/accountEnded``. It holds no content.
public final class ConversationGrant: Sendable, CustomStringConvertible {
    /// The service's ID.
    public let id: GrantID
    /// The member it belongs to.
    public let member: UserID
    /// The conversation.
    public let roomID: RoomID
    /// What of it may be read.
    public let scope: GrantScope
    /// When it expires (wall clock).
    public let expiresAt: Timestamp

    let host: MachineHost<StudioGrantMachine>
    let grant: StudioGrant

    init(grant: StudioGrant, host: MachineHost<StudioGrantMachine>) {
        self.grant = grant
        id = grant.id
        member = grant.member
        roomID = grant.roomID
        scope = grant.scope
        expiresAt = grant.expiresAt
        self.host = host
    }

    /// Where the grant is now; observe ``AccountStudio/grants`` to follow it.
    public var status: GrantStatus { GrantStatus(host.states.value) }

    var info: GrantInfo {
        GrantInfo(id: id, roomID: roomID, scope: scope, expiresAt: expiresAt, status: status)
    }

    public var description: String { "ConversationGrant(\(id.rawValue))" }
}
