import SymorvaChat
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Push notifications: `community.push`, one instance for the community's whole life, acting
/// for the active account (``/SymorvaMachines/PushError/notSignedIn`` without one).
///
/// - **Pushers.** ``setPusher(pushkey:appID:appDisplayName:deviceDisplayName:language:gatewayURL:format:)``
///   sets an HTTP pusher with this installation's ``profileTag()``; ``pushers()`` lists the
///   account's; ``removePusher()`` removes this installation's. Signing out removes it too (the
///   homeserver deletes the pushers of a device that logs out).
/// - **Rules.** ``rules()``, keyword rules (``addKeyword(_:)``), ``setRuleEnabled(_:kind:ruleID:)``;
///   muting a room is `community.chat.setFlag(.muted, …)`.
/// - **Counts.** ``counts``: notification and highlight counts per room and in total, observable.
/// - **Pushed events.** ``event(roomID:eventID:)`` fetches the event a push names, for display.
///
/// ```swift
/// let push = community.push
/// try await push.setPusher(
///     pushkey: apnsToken, appID: "org.example.chat.ios.prod", appDisplayName: "Example",
///     deviceDisplayName: "Alice's iPhone", gatewayURL: "https://push.example.org/_matrix/push/v1/notify")
/// let stop = push.counts.subscribe { counts in badge(counts.notifications) }
/// let shown = try await push.event(roomID: roomID, eventID: eventID)   // in the notification service
/// ```
public final class PushClient: Sendable {
    private let tag: InstallationProfileTag
    private let chat: ChatClient
    private let active = ActiveAccount<AccountPush>()
    private let countsPublisher: ObservableValue<NotificationCounts>.Publisher
    private let countsSubscription = Lock<ObservableValue<ConversationList>.Unsubscribe?>(nil)
    private let services: String

    /// Push for the installation whose data folder is `dataDirectory`; counts come from `chat`'s
    /// conversation list; `servicesURL` is where the community's reference gateway is.
    package init(dataDirectory: String, chat: ChatClient, servicesURL: String) {
        self.tag = InstallationProfileTag(dataDirectory: dataDirectory)
        self.chat = chat
        self.services = servicesURL.hasSuffix("/") ? String(servicesURL.dropLast()) : servicesURL
        let publisher = ObservableValue<NotificationCounts>.Publisher(Self.counts(of: chat.conversations.value))
        self.countsPublisher = publisher
        // Work follows observers: the conversation list is observed only while the counts are.
        publisher.observable.setHooks(
            .init(
                firstObserver: { [weak self] in self?.observeList(true) },
                lastObserverGone: { [weak self] in self?.observeList(false) },
                unobservedValue: { [chat] in Self.counts(of: chat.conversations.value) }))
    }

    /// Makes `push` (the new active account's) the one this client acts for.
    package func follow(_ push: AccountPush?) {
        active.follow(push, isSignedIn: push != nil)
        countsPublisher.publish(Self.counts(of: chat.conversations.value))
        if let push, let tag = try? tag.value() {
            Task { await push.adoptInstallationPusher(profileTag: tag) }
        }
    }

    private func account() throws(PushError) -> AccountPush { try active.module(orThrow: PushError.self) }

    /// This installation's profile tag: 16 alphanumerics generated once and kept for the
    /// installation's lifetime (in its data folder).
    public func profileTag() throws(PushError) -> String { try tag.value() }

    /// The active account's pusher as this installation set it (unregistered while nobody is
    /// signed in).
    public var pusherState: PusherState {
        active.current?.pusher.value ?? .unregistered
    }

    /// The community's reference Push Gateway endpoint (`<services>/_matrix/push/v1/notify`), for
    /// development and tests.
    public var communityGatewayURL: String { services + "/_matrix/push/v1/notify" }

    // MARK: Pushers

    /// Sets an HTTP pusher for the active account and returns it once the homeserver has it.
    ///
    /// - Parameters:
    ///   - pushkey: the platform's device token (APNs, FCM), opaque, at most 512 bytes.
    ///   - appID: reverse DNS with the build kind, as the Matrix iOS SDK advises:
    ///     `org.example.chat.ios.dev` for development builds, `org.example.chat.ios.prod` for
    ///     store builds (the gateway picks the APNs environment by it); at most 64 bytes.
    ///   - gatewayURL: the push gateway's `…/_matrix/push/v1/notify` (``communityGatewayURL``
    ///     in development): `https`, or plain `http` to a loopback host only.
    ///   - format: ``/SymorvaMachines/PushFormat/eventIDOnly`` keeps message content off the
    ///     gateway; the app fetches it with ``event(roomID:eventID:)``.
    /// - Throws: ``/SymorvaMachines/PushError/invalidInput(_:)`` for a malformed field (nothing sent).
    @discardableResult
    public func setPusher(
        pushkey: String, appID: String, appDisplayName: String, deviceDisplayName: String, language: String = "en",
        gatewayURL: String, format: PushFormat = .eventIDOnly
    ) async throws(PushError) -> Pusher {
        try Self.check(pushkey: pushkey, appID: appID)
        // The homeserver posts notifications there: plain http only to a loopback host, like the
        // homeserver URL itself (HomeserverURL's rule).
        guard gatewayURL.hasSuffix("/_matrix/push/v1/notify"), case .success = HomeserverURL.validate(gatewayURL)
        else { throw .invalidInput("gatewayURL") }
        let pusher = Pusher(
            pushkey: pushkey, appID: appID, appDisplayName: appDisplayName, deviceDisplayName: deviceDisplayName,
            profileTag: try tag.value(), language: language, gatewayURL: gatewayURL, format: format)
        return try await account().setPusher(pusher)
    }

    /// Every pusher of the active account, this installation's and others'.
    public func pushers() async throws(PushError) -> [Pusher] {
        try await account().pushers()
    }

    /// Removes this installation's pusher; returns once the homeserver has (at once when there
    /// is none).
    public func removePusher() async throws(PushError) {
        try await account().removePusher()
    }

    // MARK: Rules

    /// The account's push rules, in the homeserver's evaluation order.
    public func rules() async throws(PushError) -> [PushRule] {
        let response = try await account().send(PushAPI.rules())
        return try PushWire.decode(PushWire.RulesResponse.self, from: response.body).rules
    }

    /// Adds a keyword rule: a message whose body contains `keyword` notifies and highlights.
    public func addKeyword(_ keyword: String) async throws(PushError) {
        let ruleID = try Self.keywordRuleID(keyword)
        _ = try await account().send(PushAPI.addKeyword(keyword, ruleID: ruleID))
    }

    /// Removes the keyword rule for `keyword`.
    public func removeKeyword(_ keyword: String) async throws(PushError) {
        let ruleID = try Self.keywordRuleID(keyword)
        _ = try await account().send(PushAPI.deleteRule(kind: PushRule.Kind.content.rawValue, ruleID: ruleID))
    }

    /// Turns a rule on or off (a server-default rule too, `.m.rule.master` turns every push off).
    public func setRuleEnabled(_ enabled: Bool, kind: PushRule.Kind, ruleID: String) async throws(PushError) {
        guard !ruleID.isEmpty, !ruleID.contains("/"), !ruleID.contains("\\") else { throw .invalidInput("ruleID") }
        _ = try await account().send(PushAPI.setEnabled(enabled, kind: kind.rawValue, ruleID: ruleID))
    }

    // MARK: Counts

    /// Unread notification and highlight counts of the active account's rooms, observable;
    /// empty while nobody is signed in. They change with every sync.
    public var counts: ObservableValue<NotificationCounts> { countsPublisher.observable }

    private func observeList(_ observed: Bool) {
        if observed {
            let unsubscribe = chat.conversations.observable.subscribe { [weak self] list in
                self?.countsPublisher.publish(Self.counts(of: list))
            }
            countsSubscription.withLock { $0 = unsubscribe }
        } else {
            countsSubscription.withLock { subscription in
                subscription?()
                subscription = nil
            }
        }
    }

    static func counts(of list: ConversationList) -> NotificationCounts {
        var rooms: [RoomID: NotificationCounts.Room] = [:]
        for item in list.items where item.membership == .joined && (item.unreadCount > 0 || item.highlightCount > 0) {
            rooms[item.id] = .init(notifications: item.unreadCount, highlights: item.highlightCount)
        }
        return NotificationCounts(rooms: rooms)
    }

    // MARK: Pushed events

    /// The event a push names, fetched for display (what a notification service extension
    /// does with an `event_id_only` push). An encrypted event comes back with
    /// ``PushedEvent/isEncrypted`` and no body until the E2EE work decrypts it.
    public func event(roomID: RoomID, eventID: EventID) async throws(PushError) -> PushedEvent {
        try await account().event(roomID: roomID, eventID: eventID)
    }

    // MARK: The community's reference gateway (development and tests)

    /// Registers `pushkey` with the community services' reference Push Gateway, as a platform
    /// would register a device token: notifications for it are recorded there, and the gateway
    /// no longer answers them `rejected`.
    package func registerWithCommunityGateway(pushkey: String, appID: String) async throws(PushError) {
        try Self.check(pushkey: pushkey, appID: appID)
        try await account().registerWithGateway(pushkey: pushkey, appID: appID)
    }

    /// Forgets `pushkey` at the reference gateway: later notifications for it are `rejected`
    /// (and the homeserver then deletes its pusher).
    package func unregisterFromCommunityGateway(pushkey: String, appID: String) async throws(PushError) {
        try Self.check(pushkey: pushkey, appID: appID)
        try await account().unregisterFromGateway(pushkey: pushkey, appID: appID)
    }

    /// What the reference gateway recorded for one of the member's pushkeys, after `after`.
    package func communityGatewayNotifications(pushkey: String, appID: String, after: Int = 0) async throws(PushError)
        -> [GatewayNotification]
    {
        try Self.check(pushkey: pushkey, appID: appID)
        return try await account().gatewayNotifications(pushkey: pushkey, appID: appID, after: after)
    }

    static func check(pushkey: String, appID: String) throws(PushError) {
        guard !pushkey.isEmpty, pushkey.utf8.count <= 512, !pushkey.contains("/") else {
            throw .invalidInput("pushkey")
        }
        guard !appID.isEmpty, appID.utf8.count <= 64, appID.contains("."), !appID.contains("/") else {
            throw .invalidInput("appID")
        }
    }

    /// A keyword's rule ID: the keyword itself, which must be a usable path segment.
    static func keywordRuleID(_ keyword: String) throws(PushError) -> String {
        let trimmed = keyword.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.utf8.count <= 100, !trimmed.contains("/"), !trimmed.contains("\\"),
            !trimmed.hasPrefix(".")
        else { throw .invalidInput("keyword") }
        return trimmed
    }
}

extension AccountPush: AccountBound {
    /// Whether the account's scope has ended (switched away from, signed out).
    package var isEnded: Bool { scope.isEnded }
}

extension PushError: ActiveAccountError {}
