import SymorvaMachines

/// The simplified sliding sync request (MSC4186), as the pinned Synapse serves it under
/// `/_matrix/client/unstable/org.matrix.simplified_msc3575/sync` (advertised in `/versions` as
/// `org.matrix.simplified_msc3575`, `ServerVersions.supportsSimplifiedSlidingSync`).
///
/// The ``SlidingSyncMachine`` decides the position, the timeout, the list's range and the
/// subscribed rooms (``SlidingSyncRequest``); this builder adds what every request carries:
/// one list (``listName``) ordered by recency with the state a conversation-list row needs and
/// lazy-loaded members, the subscribed rooms' full state and a screenful of timeline, and the
/// extensions (`to_device` with its own `since`, `e2ee`, `account_data`, `receipts`, `typing`).
/// Every request sends the whole configuration: simplified sliding sync keeps no sticky
/// parameters between requests.
package enum SlidingSyncAPI {
    /// The endpoint's path.
    package static let path = "/_matrix/client/unstable/org.matrix.simplified_msc3575/sync"
    /// The one list of conversations, by recency.
    package static let listName = "all"

    /// The state of a conversation-list row: name, avatar, alias, topic, encryption, creation,
    /// the account's own membership, and the members the timeline's senders need (`$LAZY`).
    package static let listRequiredState: [[String]] = [
        ["m.room.create", ""], ["m.room.name", ""], ["m.room.avatar", ""], ["m.room.canonical_alias", ""],
        ["m.room.topic", ""], ["m.room.encryption", ""], ["m.room.join_rules", ""], ["m.room.tombstone", ""],
        ["m.room.member", "$ME"], ["m.room.member", "$LAZY"],
    ]

    /// Options of the request body that are not the machine's decisions.
    package struct Options: Sendable, Equatable {
        /// Timeline events per room of the list: the last message is the row's preview.
        package var listTimelineLimit: Int
        /// Timeline events per subscribed room (an open conversation: a screenful).
        package var subscriptionTimelineLimit: Int

        /// Creates options.
        package init(listTimelineLimit: Int = 1, subscriptionTimelineLimit: Int = 20) {
            self.listTimelineLimit = max(1, listTimelineLimit)
            self.subscriptionTimelineLimit = max(1, subscriptionTimelineLimit)
        }
    }

    /// `POST …/sync?pos=…&timeout=…` with `request`'s list range and subscriptions and every
    /// extension; `toDeviceSince` is the to-device extension's committed `next_batch` (the
    /// store's, not the machine's: it survives a reset of the connection).
    ///
    /// - Throws: ``WireJSONError`` if the body cannot be encoded (it always can: strings and
    ///   integers only).
    package static func sync(
        _ request: SlidingSyncRequest, toDeviceSince: String?, options: Options = Options()
    ) throws(WireJSONError) -> MatrixEndpoint {
        var query: [MatrixEndpoint.QueryItem] = []
        if let pos = request.pos { query.append(.init(name: "pos", value: pos.rawValue)) }
        query.append(.init(name: "timeout", value: String(ChatAPI.milliseconds(request.timeout))))
        var subscriptions: [String: Body.Subscription] = [:]
        for room in request.subscriptions {
            subscriptions[room] = Body.Subscription(
                required_state: [["*", "*"]], timeline_limit: options.subscriptionTimelineLimit)
        }
        let body = Body(
            lists: [
                listName: Body.List(
                    ranges: [[request.range.lowerBound, request.range.upperBound]], required_state: listRequiredState,
                    timeline_limit: options.listTimelineLimit)
            ],
            room_subscriptions: subscriptions,
            extensions: Body.Extensions(
                to_device: Body.ToDevice(enabled: true, since: toDeviceSince), e2ee: Body.Enabled(),
                account_data: Body.Enabled(), receipts: Body.Enabled(), typing: Body.Enabled()))
        return MatrixEndpoint(
            method: .post, path: path, query: query, body: try WireJSON.encode(body), requiresAuth: true)
    }

    /// The request body, field names as on the wire.
    struct Body: Encodable {
        struct List: Encodable {
            var ranges: [[Int]]
            var required_state: [[String]]
            var timeline_limit: Int
        }
        struct Subscription: Encodable {
            var required_state: [[String]]
            var timeline_limit: Int
        }
        struct Enabled: Encodable {
            var enabled = true
        }
        struct ToDevice: Encodable {
            var enabled: Bool
            var since: String?
        }
        struct Extensions: Encodable {
            var to_device: ToDevice
            var e2ee: Enabled
            var account_data: Enabled
            var receipts: Enabled
            var typing: Enabled
        }

        var lists: [String: List]
        var room_subscriptions: [String: Subscription]
        var extensions: Extensions
    }
}
