import Foundation
import SymorvaMatrix

/// A change of a room's state other than membership, as a person reads it: what a timeline row
/// for `m.room.name`, `m.room.encryption`, `m.room.power_levels`, … says.
///
/// Names, topics and aliases are remote text that the member may read but the SDK never logs:
/// ``description`` and every other description give the case name only.
public enum RoomStateChange: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// `m.room.create`: the room was created.
    case created
    /// `m.room.name`: the room's name was set (`nil`: removed).
    case name(String?)
    /// `m.room.topic`: the topic was set (`nil`: removed).
    case topic(String?)
    /// `m.room.avatar`: the room's picture was set (`false`: removed).
    case avatar(isSet: Bool)
    /// `m.room.canonical_alias`: the room's main address was set (`nil`: removed).
    case canonicalAlias(String?)
    /// `m.room.encryption`: end-to-end encryption was enabled (it cannot be turned off).
    case encryptionEnabled
    /// `m.room.power_levels`: who may do what changed.
    case powerLevels
    /// `m.room.join_rules`: who may join (`public`, `invite`, `knock`, `restricted`, …, as sent).
    case joinRule(String?)
    /// `m.room.history_visibility`: who may read the history (`shared`, `invited`, `joined`,
    /// `world_readable`, as sent).
    case historyVisibility(String?)
    /// `m.room.guest_access`: whether guests may join (`can_join`, `forbidden`, as sent).
    case guestAccess(String?)
    /// `m.room.pinned_events`: the pinned messages changed.
    case pinnedEvents
    /// `m.room.server_acl`: which servers may take part changed.
    case serverACL
    /// `m.room.tombstone`: the room was replaced by a new one.
    case tombstone
    /// A state event this SDK does not read: its type and state key.
    case other(type: String, stateKey: String)

    init(type: String, stateKey: String, content: [UInt8]) {
        let shown = StateContent.read(content)
        func text(_ value: String?) -> String? { value.flatMap { $0.isEmpty ? nil : $0 } }
        switch (type, stateKey) {
        case ("m.room.create", ""): self = .created
        case ("m.room.name", ""): self = .name(text(shown?.name))
        case ("m.room.topic", ""): self = .topic(text(shown?.topic))
        case ("m.room.avatar", ""): self = .avatar(isSet: text(shown?.url) != nil)
        case ("m.room.canonical_alias", ""): self = .canonicalAlias(text(shown?.alias))
        case ("m.room.encryption", ""): self = .encryptionEnabled
        case ("m.room.power_levels", ""): self = .powerLevels
        case ("m.room.join_rules", ""): self = .joinRule(text(shown?.joinRule))
        case ("m.room.history_visibility", ""): self = .historyVisibility(text(shown?.historyVisibility))
        case ("m.room.guest_access", ""): self = .guestAccess(text(shown?.guestAccess))
        case ("m.room.pinned_events", ""): self = .pinnedEvents
        case ("m.room.server_acl", ""): self = .serverACL
        case ("m.room.tombstone", ""): self = .tombstone
        default: self = .other(type: type, stateKey: stateKey)
        }
    }

    /// The case name only: names and topics stay out of logs.
    public var description: String {
        switch self {
        case .created: "created"
        case .name: "name"
        case .topic: "topic"
        case .avatar: "avatar"
        case .canonicalAlias: "canonicalAlias"
        case .encryptionEnabled: "encryptionEnabled"
        case .powerLevels: "powerLevels"
        case .joinRule: "joinRule"
        case .historyVisibility: "historyVisibility"
        case .guestAccess: "guestAccess"
        case .pinnedEvents: "pinnedEvents"
        case .serverACL: "serverACL"
        case .tombstone: "tombstone"
        case .other(let type, _): "other(\(type))"
        }
    }

    /// The case name only, as ``description``.
    public var debugDescription: String { description }

    /// No children: `dump` shows the case name only.
    public var customMirror: Mirror { Mirror(self, children: [:]) }

    /// The sentence a person reads after the sender's name: `created the room`, `set the room
    /// name to "lounge"`, `enabled encryption`. It contains the room's name, topic or alias:
    /// for the member's eyes, never for a log.
    public var sentence: String {
        switch self {
        case .created: "created the room"
        case .name(let name?): "set the room name to \"\(name)\""
        case .name(nil): "removed the room name"
        case .topic(let topic?): "set the topic to \"\(topic)\""
        case .topic(nil): "removed the topic"
        case .avatar(true): "changed the room picture"
        case .avatar(false): "removed the room picture"
        case .canonicalAlias(let alias?): "set the room's address to \(alias)"
        case .canonicalAlias(nil): "removed the room's address"
        case .encryptionEnabled: "enabled encryption"
        case .powerLevels: "changed the power levels"
        case .joinRule("public"): "made the room public: anyone can join"
        case .joinRule("invite"): "made the room invite only"
        case .joinRule("knock"): "let people ask to join"
        case .joinRule("restricted"), .joinRule("knock_restricted"): "limited joining to members of other rooms"
        case .joinRule(let rule): "changed the join rule to \(rule ?? "none")"
        case .historyVisibility("world_readable"): "made the history readable by anyone"
        case .historyVisibility("shared"): "made the history readable by all members"
        case .historyVisibility("invited"): "made the history readable by members since they were invited"
        case .historyVisibility("joined"): "made the history readable by members since they joined"
        case .historyVisibility(let visibility): "changed the history visibility to \(visibility ?? "none")"
        case .guestAccess("can_join"): "allowed guests to join"
        case .guestAccess("forbidden"): "stopped guests from joining"
        case .guestAccess(let access): "changed guest access to \(access ?? "none")"
        case .pinnedEvents: "changed the pinned messages"
        case .serverACL: "changed the server access list"
        case .tombstone: "replaced this room with a new one"
        case .other(let type, _): "changed \(type)"
        }
    }
}

/// The fields of state event content a ``RoomStateChange`` reads, each on its own: a field of
/// an unexpected type reads as absent and leaves the others readable.
struct StateContent: Decodable {
    var name: String?
    var topic: String?
    var url: String?
    var alias: String?
    var joinRule: String?
    var historyVisibility: String?
    var guestAccess: String?

    enum CodingKeys: String, CodingKey {
        case name, topic, url, alias
        case joinRule = "join_rule"
        case historyVisibility = "history_visibility"
        case guestAccess = "guest_access"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func field(_ key: CodingKeys) -> String? { try? container.decodeIfPresent(String.self, forKey: key) }
        name = field(.name)
        topic = field(.topic)
        url = field(.url)
        alias = field(.alias)
        joinRule = field(.joinRule)
        historyVisibility = field(.historyVisibility)
        guestAccess = field(.guestAccess)
    }

    static func read(_ bytes: [UInt8]) -> StateContent? {
        WireJSON.decodeIfValid(StateContent.self, from: bytes)
    }
}
