import SymorvaRuntime

/// A send's request for its room's key to reach every recipient device: drawn by the caller,
/// unique among the account's requests, and the key under which the machine leaves the outcome
/// (``CryptoWork/shareOutcomes``) until the caller takes it.
package struct ShareTicket: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The ticket's number.
    package var number: UInt64

    /// A ticket.
    package init(_ number: UInt64) { self.number = number }

    package static func < (lhs: ShareTicket, rhs: ShareTicket) -> Bool { lhs.number < rhs.number }
    package var description: String { "#\(number)" }
}

/// A device a room key may go to, as the sharing decision sees it: who it is and its identity key.
package struct ShareDevice: Sendable, Hashable, Comparable {
    /// Its owner.
    package var userID: UserID
    /// Its device ID.
    package var deviceID: String
    /// Its Curve25519 identity key (what Olm sessions and the record of sharing go by).
    package var curve25519: String

    /// A device.
    package init(userID: UserID, deviceID: String, curve25519: String) {
        self.userID = userID
        self.deviceID = deviceID
        self.curve25519 = curve25519
    }

    package static func < (lhs: ShareDevice, rhs: ShareDevice) -> Bool {
        (lhs.userID.rawValue, lhs.deviceID, lhs.curve25519) < (rhs.userID.rawValue, rhs.deviceID, rhs.curve25519)
    }
}

/// The room's current outbound Megolm session, as the store holds it (no key material).
package struct OutboundSessionFacts: Sendable, Equatable {
    /// Its session ID.
    package var sessionID: String
    /// When it was created (wall clock, ms since 1970).
    package var createdMilliseconds: Int64
    /// How many events it has encrypted.
    package var messageCount: Int
    /// The devices it was shared with.
    package var sharedWith: Set<ShareDevice>

    /// Facts.
    package init(sessionID: String, createdMilliseconds: Int64, messageCount: Int, sharedWith: Set<ShareDevice>) {
        self.sessionID = sessionID
        self.createdMilliseconds = createdMilliseconds
        self.messageCount = messageCount
        self.sharedWith = sharedWith
    }
}

/// What the store knows about an encrypted room's recipients when the machine decides how to
/// share its key (answer to ``CryptoMachine/Effect/loadRoomKeyFacts(_:round:)``).
package struct RoomKeyFacts: Sendable, Equatable {
    /// The recipients' devices that may get the key: verified, keys never changed, this device
    /// left out.
    package var devices: [ShareDevice]
    /// Those of ``devices`` with no Olm session with this device yet.
    package var withoutOlmSession: Set<ShareDevice>
    /// Recipients whose device lists are outdated (a member just joined, a device was added).
    package var outdatedUsers: [UserID]
    /// The room's outbound session, when it has one.
    package var outbound: OutboundSessionFacts?
    /// The wall clock when the facts were read (ms since 1970).
    package var nowMilliseconds: Int64

    /// Facts.
    package init(
        devices: [ShareDevice], withoutOlmSession: Set<ShareDevice> = [], outdatedUsers: [UserID] = [],
        outbound: OutboundSessionFacts? = nil, nowMilliseconds: Int64
    ) {
        self.devices = devices
        self.withoutOlmSession = withoutOlmSession
        self.outdatedUsers = outdatedUsers
        self.outbound = outbound
        self.nowMilliseconds = nowMilliseconds
    }
}

/// How long an outbound session lives and how many messages it carries: the room's
/// `rotation_period_ms` and `rotation_period_msgs`, kept within an hour to a week and 1 to
/// 10,000 messages (a room's state cannot make a key live longer, nor make every message start
/// a session); the defaults of `m.room.encryption` (one week, 100 messages) where the room
/// states none.
package struct RotationPolicy: Sendable, Equatable {
    /// Messages per session.
    package var messages = 100
    /// A session's lifetime.
    package var milliseconds: Int64 = Self.week

    static let hour: Int64 = 3_600_000
    static let week: Int64 = 7 * 24 * 3_600_000

    /// The defaults.
    package init() {}

    /// The room's policy.
    package init(room: EncryptedRoom) {
        if let stated = room.rotationPeriodMessages { messages = min(max(stated, 1), 10_000) }
        if let stated = room.rotationPeriodMilliseconds { milliseconds = min(max(stated, Self.hour), Self.week) }
    }
}

/// Which outbound session a batch of room keys carries.
package enum SessionChoice: Sendable, Hashable {
    /// Create a new session (replacing the room's current one, if any) and share it.
    case new
    /// The room's current session, by ID: the batch is refused if it was replaced meanwhile.
    case current(String)
}

/// One `sendToDevice` request of `m.room_key`s: whole users' devices, up to
/// ``RoomKeySharing/batchSize`` (a user with more devices goes alone).
package struct RoomKeyBatch: Sendable, Hashable {
    /// The session it carries.
    package var session: SessionChoice
    /// The devices it goes to, sorted.
    package var devices: [ShareDevice]

    /// A batch.
    package init(session: SessionChoice, devices: [ShareDevice]) {
        self.session = session
        self.devices = devices
    }
}

/// What one batch did: the session it carried and the devices that got it (those with an
/// Olm session; each is recorded as having the session).
package struct RoomKeySent: Sendable, Equatable {
    /// The session shared.
    package var sessionID: String
    /// The devices that got it.
    package var devices: [ShareDevice]
    /// The session is new: its inbound copy was stored (and waits for the key backup).
    package var newSessionStored: Bool

    /// A report.
    package init(sessionID: String, devices: [ShareDevice], newSessionStored: Bool = false) {
        self.sessionID = sessionID
        self.devices = devices
        self.newSessionStored = newSessionStored
    }
}

/// How a send's request for its room's key ended.
package enum ShareOutcome: Sendable, Equatable {
    /// Every recipient device that can be reached has the session: encrypt with it.
    case shared(sessionID: String)
    /// A request failed (retryable ones are retried by the send queue).
    case failed(CryptoRequestError)
}

/// The machine's decisions about a room's key: whether to replace the session, who needs an
/// Olm session first, who gets the key, in which batches. Pure functions of the facts.
package enum RoomKeySharing {
    /// How many to-device messages one `sendToDevice` request carries at most.
    package static let batchSize = 250

    /// Whether the room's session must be replaced: there is none, it is too old or used too
    /// often, or a device it was shared with is no longer a recipient (a member left, a device
    /// was removed or its keys changed). A restart never replaces it.
    package static func mustRotate(_ facts: RoomKeyFacts, policy: RotationPolicy) -> Bool {
        guard let outbound = facts.outbound else { return true }
        if outbound.messageCount >= policy.messages { return true }
        if facts.nowMilliseconds - outbound.createdMilliseconds >= policy.milliseconds { return true }
        return !outbound.sharedWith.isSubset(of: Set(facts.devices))
    }

    /// The devices that must get the key: all of them for a new session, else those the
    /// current one has not reached.
    package static func recipients(_ facts: RoomKeyFacts, rotating: Bool) -> [ShareDevice] {
        guard !rotating, let outbound = facts.outbound else { return facts.devices.sorted() }
        return facts.devices.filter { !outbound.sharedWith.contains($0) }.sorted()
    }

    /// `devices` in batches of whole users, up to ``batchSize`` each (a user with more devices
    /// goes alone), in user order.
    package static func batches(_ devices: [ShareDevice]) -> [[ShareDevice]] {
        var batches: [[ShareDevice]] = []
        var batch: [ShareDevice] = []
        for (_, userDevices) in Dictionary(grouping: devices.sorted(), by: \.userID).sorted(by: {
            $0.key.rawValue < $1.key.rawValue
        }) {
            if !batch.isEmpty && batch.count + userDevices.count > batchSize {
                batches.append(batch)
                batch = []
            }
            batch += userDevices
        }
        if !batch.isEmpty { batches.append(batch) }
        return batches
    }
}

/// The sharing of one room's key in progress.
package struct RoomKeyShare: Sendable, Equatable {
    /// The room as the latest request described it.
    package var room: EncryptedRoom
    /// The round's number: its effects run under ``CryptoMachine/shareKey(_:)``, and results of
    /// another round are stale.
    package var round: UInt64
    /// Where the round is.
    package var step: Step
    /// The tickets this round answers.
    package var tickets: [ShareTicket]
    /// Tickets that arrived while the round ran: the next round answers them (the recipients
    /// may have changed).
    package var nextTickets: [ShareTicket] = []
    /// Whether this round had the recipients' outdated device lists queried already (once per
    /// round: users the server cannot answer for stay outdated, with the devices they had).
    package var queried = false

    /// Where a round is.
    package enum Step: Sendable, Equatable {
        /// Reading the recipients' devices and the room's session.
        case loadingFacts
        /// Waiting for the `keys/query` of these recipients.
        case awaitingQuery([UserID])
        /// Claiming one-time keys for `claiming` (the recipients without an Olm session); then
        /// the key goes to `recipients` (less those that got no session) with `session`.
        case claiming(session: SessionChoice, recipients: [ShareDevice], claiming: [ShareDevice])
        /// Sending the key: the batch in flight carries `session`; `remaining` follow.
        case sending(session: SessionChoice, remaining: [[ShareDevice]])
    }

    /// A round.
    package init(room: EncryptedRoom, round: UInt64, step: Step, tickets: [ShareTicket]) {
        self.room = room
        self.round = round
        self.step = step
        self.tickets = tickets
    }
}
