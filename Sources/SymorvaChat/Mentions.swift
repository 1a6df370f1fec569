import Foundation
import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

/// Whom a message mentions (`m.mentions`, the specification's intentional mentions): the
/// members it names, and whether it calls the whole room (`@room`). Push rules read it instead
/// of searching the body, so a mention notifies exactly the members meant, and a name that
/// merely appears in the text does not.
public struct Mentions: Sendable, Hashable {
    /// The members mentioned.
    public var userIDs: [UserID]
    /// Whether the whole room is mentioned (`@room`): allowed only to members whose power
    /// level reaches the room's `notifications.room` level (50 by default).
    public var room: Bool

    /// Mentions of `userIDs`, and of the room when `room` is set.
    public init(userIDs: [UserID] = [], room: Bool = false) {
        self.userIDs = userIDs
        self.room = room
    }

    /// The mentions a text makes: each word that is a user ID (`@name:server`, trailing
    /// punctuation aside) and the word `@room`.
    public init(parsing text: String) {
        var users: [UserID] = []
        var room = false
        for word in text.split(whereSeparator: { $0.isWhitespace }) {
            let trimmed = word.trimmingCharacters(in: CharacterSet(charactersIn: ",.;!?()"))
            if trimmed == "@room" {
                room = true
            } else if trimmed.hasPrefix("@"), let user = UserID(trimmed), !users.contains(user) {
                users.append(user)
            }
        }
        self.init(userIDs: users, room: room)
    }

    /// `m.mentions` as JSON text.
    var json: String {
        var users: [UInt8] = [UInt8(ascii: "[")]
        for (index, user) in userIDs.enumerated() {
            if index > 0 { users.append(UInt8(ascii: ",")) }
            JSONObjectWriter.appendQuoted(user.rawValue, to: &users)
        }
        users.append(UInt8(ascii: "]"))
        var object = JSONObjectWriter()
        object.raw("user_ids", String(decoding: users, as: UTF8.self))
        if room { object.raw("room", "true") }
        return object.text
    }

    /// Whether a message's content mentions `userID`: its `m.mentions` names the member or the
    /// room; a message without `m.mentions` (sent by an older client) when its body holds the
    /// member's user ID or localpart as a word.
    static func mention(of userID: UserID, in content: [UInt8]) -> Bool {
        struct Content: Decodable {
            var body: String?
            var mentions: Mentioned?
            enum CodingKeys: String, CodingKey {
                case body
                case mentions = "m.mentions"
            }
        }
        struct Mentioned: Decodable {
            var userIDs: [String]?
            var room: Bool?
            enum CodingKeys: String, CodingKey {
                case room
                case userIDs = "user_ids"
            }
        }
        guard let fields = WireJSON.decodeIfValid(Content.self, from: content) else { return false }
        if let mentions = fields.mentions {
            return mentions.userIDs?.contains(userID.rawValue) == true || mentions.room == true
        }
        guard let body = fields.body?.lowercased() else { return false }
        let localpart = String(userID.rawValue.dropFirst().prefix { $0 != ":" }).lowercased()
        let words = body.split { !($0.isLetter || $0.isNumber || "@:._-=/".contains($0)) }
        return words.contains { $0 == userID.rawValue.lowercased() || $0 == localpart || $0 == "@" + localpart }
    }
}

extension Conversation {
    /// Sends a message that mentions `mentions` (`m.mentions`), replying to `replyingTo` when
    /// given (the replied-to sender is mentioned too, as the specification asks).
    ///
    /// - Throws: `.insufficientPowerLevel` when the message mentions the room and the member's
    ///   power level is below the room's `notifications.room` level (checked first: nothing is
    ///   queued); otherwise what ``send(_:replyingTo:)`` throws.
    public func send(_ message: OutgoingMessage, mentioning mentions: Mentions, replyingTo: EventID? = nil)
        async throws(ChatError) -> SendReceipt
    {
        try client.ensureCurrent()
        if mentions.room { try await client.checkRoomMention(roomID: id) }
        var mentions = mentions
        if let replyingTo {
            let sender = try await sender(of: replyingTo)
            if sender != client.userID.rawValue, let user = UserID(sender), !mentions.userIDs.contains(user) {
                mentions.userIDs.append(user)
            }
        }
        var contents = message.contents(inReplyTo: replyingTo)
        guard !contents.isEmpty else { throw .invalidArgument(name: "message") }
        // Every part carries the mentions: each is a message of its own to the push rules.
        for index in contents.indices {
            var json = contents[index].json
            if json.hasSuffix("}") {
                json.removeLast()
                json += ",\"m.mentions\":" + mentions.json + "}"
            }
            contents[index].json = json
        }
        return try await enqueue(contents)
    }
}

extension AccountChat {
    /// Throws `.insufficientPowerLevel` unless the account may mention the whole room: its
    /// power level (stored, a refusal confirmed with the server's) reaches
    /// `notifications.room` (50 when absent).
    func checkRoomMention(roomID: RoomID) async throws(ChatError) {
        struct Notifications: Decodable {
            var notifications: [String: Int]?
        }
        for fresh in [false, true] {
            guard let (content, own) = try await ownPowerLevel(roomID: roomID, fresh: fresh) else { return }
            let required = WireJSON.decodeIfValid(Notifications.self, from: content)?.notifications?["room"] ?? 50
            if own >= required { return }
            if fresh { throw .insufficientPowerLevel(required: required, actual: own) }
        }
    }
}
