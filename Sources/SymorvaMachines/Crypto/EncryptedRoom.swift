/// What the crypto module needs to know about an encrypted room to share its Megolm key, as chat
/// reads it from the room's state: the crypto module keeps no room state of its own (chat's
/// store is the one source of truth for members, history visibility and encryption settings).
package struct EncryptedRoom: Sendable, Equatable {
    /// The room.
    package var roomID: RoomID
    /// Members whose membership is `join`.
    package var joined: [UserID]
    /// Members whose membership is `invite`.
    package var invited: [UserID]
    /// `m.room.history_visibility` (`shared` when the room has none).
    package var historyVisibility: String
    /// `rotation_period_ms` of `m.room.encryption`, when stated.
    package var rotationPeriodMilliseconds: Int64?
    /// `rotation_period_msgs` of `m.room.encryption`, when stated.
    package var rotationPeriodMessages: Int?

    /// A room's description.
    package init(
        roomID: RoomID, joined: [UserID], invited: [UserID] = [], historyVisibility: String = "shared",
        rotationPeriodMilliseconds: Int64? = nil, rotationPeriodMessages: Int? = nil
    ) {
        self.roomID = roomID
        self.joined = joined
        self.invited = invited
        self.historyVisibility = historyVisibility
        self.rotationPeriodMilliseconds = rotationPeriodMilliseconds
        self.rotationPeriodMessages = rotationPeriodMessages
    }

    /// Who gets the room's key: the joined members, and the invited ones unless the history is
    /// visible only to joined members (an invitee must not read what is sent before they join).
    package var recipients: [UserID] {
        historyVisibility == "joined" ? joined : Array(Set(joined + invited)).sorted()
    }
}
