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

/// The JSON the directory reads: `/publicRooms`, `/user_directory/search`, the services'
/// member directory; and how their failures become ``DirectoryError``s.
enum DirectoryWire {
    struct PublicRoomsResponse: Decodable {
        var chunk: [Room]
        var nextBatch: String?
        var totalRoomCountEstimate: Int?
        enum CodingKeys: String, CodingKey {
            case chunk
            case nextBatch = "next_batch"
            case totalRoomCountEstimate = "total_room_count_estimate"
        }

        struct Room: Decodable {
            var roomID: String
            var name: String?
            var topic: String?
            var canonicalAlias: String?
            var avatarURL: String?
            var numJoinedMembers: Int?
            var joinRule: String?
            var guestCanJoin: Bool?
            var worldReadable: Bool?
            enum CodingKeys: String, CodingKey {
                case name, topic
                case roomID = "room_id"
                case canonicalAlias = "canonical_alias"
                case avatarURL = "avatar_url"
                case numJoinedMembers = "num_joined_members"
                case joinRule = "join_rule"
                case guestCanJoin = "guest_can_join"
                case worldReadable = "world_readable"
            }
        }

        var page: DirectoryPage<PublicRoom> {
            DirectoryPage(
                items: chunk.map { room in
                    PublicRoom(
                        roomID: RoomID(room.roomID), name: room.name, topic: room.topic,
                        canonicalAlias: room.canonicalAlias, avatarURL: room.avatarURL,
                        joinedMemberCount: room.numJoinedMembers ?? 0,
                        isPubliclyJoinable: (room.joinRule ?? "public") == "public",
                        guestCanJoin: room.guestCanJoin ?? false, isWorldReadable: room.worldReadable ?? false)
                },
                nextPage: nextBatch.flatMap { $0.isEmpty ? nil : DirectoryPageToken($0) },
                totalEstimate: totalRoomCountEstimate)
        }
    }

    struct UserSearchResponse: Decodable {
        var results: [User]
        var limited: Bool
        struct User: Decodable {
            var userID: String
            var displayName: String?
            var avatarURL: String?
            enum CodingKeys: String, CodingKey {
                case userID = "user_id"
                case displayName = "display_name"
                case avatarURL = "avatar_url"
            }
        }

        var page: DirectoryPage<DirectoryUser> {
            DirectoryPage(
                items: results.compactMap { user in
                    UserID(user.userID).map {
                        DirectoryUser(userID: $0, displayName: user.displayName, avatarURL: user.avatarURL)
                    }
                },
                nextPage: nil, totalEstimate: limited ? nil : results.count)
        }
    }

    struct Member: Decodable {
        var userID: String
        var displayName: String?
        var avatarURL: String?
        var roles: [String]
        enum CodingKeys: String, CodingKey {
            case roles
            case userID = "user_id"
            case displayName = "display_name"
            case avatarURL = "avatar_url"
        }

        var member: DirectoryMember? {
            UserID(userID).map {
                DirectoryMember(userID: $0, displayName: displayName, avatarURL: avatarURL, roles: roles)
            }
        }
    }

    struct MemberPage: Decodable {
        var members: [Member]
        var nextFrom: String?
        var total: Int
        enum CodingKeys: String, CodingKey {
            case members, total
            case nextFrom = "next_from"
        }

        var page: DirectoryPage<DirectoryMember> {
            DirectoryPage(
                items: members.compactMap(\.member), nextPage: nextFrom.map(DirectoryPageToken.init),
                totalEstimate: total)
        }
    }

    struct RoomIDAnswer: Decodable {
        var roomID: String
        enum CodingKeys: String, CodingKey { case roomID = "room_id" }
    }

    struct VisibilityAnswer: Decodable {
        var visibility: String
    }

    struct GuestRegistration: Decodable {
        var accessToken: String
        enum CodingKeys: String, CodingKey { case accessToken = "access_token" }
    }

    /// The `m.room.create` event (`format=event`): who created the room, in which version.
    struct CreateEvent: Decodable {
        struct Content: Decodable {
            var roomVersion: String?
            var additionalCreators: [String]?
            enum CodingKeys: String, CodingKey {
                case roomVersion = "room_version"
                case additionalCreators = "additional_creators"
            }
        }
        var sender: String
        var content: Content

        /// Room versions whose creators rank above every power level (MSC4289).
        static let creatorPowerVersions: Set<String> = ["12", "org.matrix.hydra.11"]

        func isPrivilegedCreator(_ userID: UserID) -> Bool {
            guard Self.creatorPowerVersions.contains(content.roomVersion ?? "1") else { return false }
            return sender == userID.rawValue || (content.additionalCreators ?? []).contains(userID.rawValue)
        }
    }

    /// The parts of `m.room.power_levels` that publishing needs (Synapse's rule: the level to
    /// send `m.room.canonical_alias`).
    struct PowerLevels: Decodable {
        var users: [String: Int]?
        var usersDefault: Int?
        var events: [String: Int]?
        var stateDefault: Int?
        enum CodingKeys: String, CodingKey {
            case users, events
            case usersDefault = "users_default"
            case stateDefault = "state_default"
        }

        func level(of userID: UserID) -> Int { users?[userID.rawValue] ?? usersDefault ?? 0 }
        var publishLevel: Int { events?["m.room.canonical_alias"] ?? stateDefault ?? 50 }
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(DirectoryError) -> T {
        guard let value = WireJSON.decodeIfValid(type, from: body) else { throw .malformedResponse }
        return value
    }

    /// A failed homeserver request in the directory's terms (``/SymorvaFeatureKit/FailureClass``);
    /// an account the requester knows to be signed out is ``/SymorvaMachines/DirectoryError/notSignedIn``.
    static func error(_ error: MatrixRequestError) -> DirectoryError {
        if case .notSignedIn = error { return .notSignedIn }
        return self.error(FailureClass(error))
    }

    /// A failed community services request (the member directory) in the directory's terms.
    static func error(_ error: ServicesError) -> DirectoryError { self.error(FailureClass(error)) }

    /// The directory's refusals by status and code; everything else by its class.
    static func error(_ failure: FailureClass) -> DirectoryError {
        switch failure {
        case .transport(let problem): return .transport(problem)
        case .rateLimited(let wait): return .rateLimited(retryAfter: wait)
        case .refused(let code, let status):
            switch (code, status) {
            case (_, 404): return .notFound
            case (_, 403): return .forbidden(needed: nil, has: nil)
            case ("SY_INVALID_PARAM", _): return .invalidInput("parameter")
            default: return .server(code: code, status: status)
            }
        case .signInRequired: return .signInRequired
        case .moduleDisabled: return .moduleDisabled
        case .invalidRequest: return .invalidInput("request")
        case .malformedResponse: return .malformedResponse
        }
    }
}
