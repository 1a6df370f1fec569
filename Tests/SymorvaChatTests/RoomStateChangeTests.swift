import Foundation
import SymorvaMachines
import Testing

@testable import SymorvaChat

/// State events become what they changed, so that a timeline row can say it as a sentence; the
/// names and topics they carry never reach a description.
@Suite("Room state changes read from state events")
struct RoomStateChangeTests {
    func change(_ type: String, _ content: String, stateKey: String = "") -> TimelineItemContent {
        TimelineItemContent(type: type, stateKey: stateKey, content: Array(content.utf8), isRedacted: false)
    }

    @Test("Each known state event is read as its change, with the value a person needs")
    func known() {
        #expect(change("m.room.create", #"{"room_version": "11"}"#) == .stateChange(.created))
        #expect(change("m.room.name", #"{"name": "lounge"}"#) == .stateChange(.name("lounge")))
        #expect(change("m.room.name", #"{"name": ""}"#) == .stateChange(.name(nil)))
        #expect(change("m.room.topic", #"{"topic": "gardens"}"#) == .stateChange(.topic("gardens")))
        #expect(change("m.room.avatar", #"{"url": "mxc://hs/abc"}"#) == .stateChange(.avatar(isSet: true)))
        #expect(change("m.room.avatar", "{}") == .stateChange(.avatar(isSet: false)))
        #expect(
            change("m.room.canonical_alias", ##"{"alias": "#club:hs"}"##) == .stateChange(.canonicalAlias("#club:hs")))
        #expect(
            change("m.room.encryption", #"{"algorithm": "m.megolm.v1.aes-sha2"}"#) == .stateChange(.encryptionEnabled))
        #expect(change("m.room.power_levels", #"{"users": {}}"#) == .stateChange(.powerLevels))
        #expect(change("m.room.join_rules", #"{"join_rule": "public"}"#) == .stateChange(.joinRule("public")))
        #expect(
            change("m.room.history_visibility", #"{"history_visibility": "shared"}"#)
                == .stateChange(.historyVisibility("shared")))
        #expect(
            change("m.room.guest_access", #"{"guest_access": "can_join"}"#) == .stateChange(.guestAccess("can_join")))
        #expect(change("m.room.pinned_events", #"{"pinned": []}"#) == .stateChange(.pinnedEvents))
        #expect(change("m.room.server_acl", #"{"allow": ["*"]}"#) == .stateChange(.serverACL))
        #expect(change("m.room.tombstone", #"{"replacement_room": "!n:hs"}"#) == .stateChange(.tombstone))
    }

    @Test("Unknown types, unexpected state keys and odd field types stay readable")
    func lenient() {
        #expect(
            change("org.example.poll", "{}", stateKey: "k")
                == .stateChange(.other(type: "org.example.poll", stateKey: "k")))
        #expect(change("m.room.name", "{}", stateKey: "x") == .stateChange(.other(type: "m.room.name", stateKey: "x")))
        // A field of the wrong type reads as absent; the others still read.
        #expect(change("m.room.topic", #"{"topic": 5, "name": "n"}"#) == .stateChange(.topic(nil)))
        #expect(change("m.room.name", "not json") == .stateChange(.name(nil)))
    }

    @Test("Descriptions, debug descriptions and dumps name the case only: no room name or topic")
    func redacted() {
        let canary = "canary-room-name-7e1"
        for value in [RoomStateChange.name(canary), .topic(canary), .canonicalAlias(canary)] {
            var dumped = ""
            dump(value, to: &dumped)
            for text in ["\(value)", String(reflecting: value), dumped] {
                #expect(!text.contains(canary), "\(text)")
            }
        }
        #expect("\(RoomStateChange.name(canary))" == "name")
    }

    @Test("The sentence is what a person reads after the sender's name")
    func sentences() {
        #expect(RoomStateChange.created.sentence == "created the room")
        #expect(RoomStateChange.name("lounge").sentence == #"set the room name to "lounge""#)
        #expect(RoomStateChange.name(nil).sentence == "removed the room name")
        #expect(RoomStateChange.encryptionEnabled.sentence == "enabled encryption")
        #expect(RoomStateChange.joinRule("invite").sentence == "made the room invite only")
        #expect(
            RoomStateChange.historyVisibility("joined").sentence
                == "made the history readable by members since they joined")
        #expect(RoomStateChange.powerLevels.sentence == "changed the power levels")
        #expect(RoomStateChange.other(type: "org.example.poll", stateKey: "").sentence == "changed org.example.poll")
    }
}
