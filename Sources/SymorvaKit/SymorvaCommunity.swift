import SymorvaAIStudio
import SymorvaChat
import SymorvaDirectory
import SymorvaFeatureKit
import SymorvaMatrix
import SymorvaMeetings
import SymorvaPush
import SymorvaRuntime
import SymorvaServices
import SymorvaSession
import SymorvaWallet

/// A Symorva community: the SDK's entry point, built from the community's manifest.
///
/// It composes the parts and owns none of the logic: the app flow (which account is active),
/// the session feature (``session``), per-account storage, the feature modules that attach to
/// every signed-in account (``module(_:)``), and the product clients that follow the active
/// account. Foundation modules are always present (``chat``); optional modules are optional
/// values, `nil` exactly when the manifest disables them (``wallet``). Each client is one
/// instance for the community's whole life and always shows the active account.
///
/// ```swift
/// let community = SymorvaCommunity(configuration: try .load(from: manifestURL))
/// await community.launch()                       // restores the last account, no network
/// if case .signedOut = community.session.state.value {
///     try await community.session.signIn(username: "alice", password: Secret(password))
/// }
/// let chat: ChatClient = community.chat
/// if let wallet = community.wallet { … }
/// ```
public final class SymorvaCommunity: Sendable {
    /// The manifest the community was built from.
    public let configuration: SymorvaConfiguration
    /// Where data, keys, transport, clocks, traces and logs come from.
    public let environment: SymorvaEnvironment
    /// Sign-in, registration, sign-out, accounts and switching.
    public let session: SessionClient
    /// Chat, always present: the active account's conversations and room operations
    /// (``/SymorvaChat/ConversationList/signedOut`` and ``/SymorvaChat/ChatError/notSignedIn``
    /// while nobody is signed in).
    public let chat: ChatClient
    /// The wallet, or `nil` when the manifest disables the wallet module (decided by the
    /// manifest alone, signed in or not); it shows the active account's wallet.
    public let wallet: WalletClient?
    /// Meetings, a foundation module, always present: joins act for the active account
    /// (``/SymorvaMachines/MeetingError/moduleDisabled`` when the manifest turns meetings off).
    public let meetings: MeetingsClient
    /// The homeserver's public room directory, always present: listed and searched signed out
    /// too; joining and publishing act for the active account.
    public let publicRooms: PublicRoomsClient
    /// The member directory, or `nil` when the manifest disables the directory module; it acts
    /// for the active account.
    public let directory: DirectoryClient?
    /// Push notifications, always present: pushers, push rules, counts, pushed events for the
    /// active account; this installation's profile tag.
    public let push: PushClient
    /// The AI studio, or `nil` when the manifest disables the aiStudio module; it acts for the
    /// active account. Set its `consentPresenter` before requesting grants.
    public let aiStudio: StudioClient?

    let sessions: CommunitySessions
    let coordinator: AppFlowCoordinator

    /// A community with the default environment (data in the platform's data folder, libcurl,
    /// key files, system clocks).
    public convenience init(configuration: SymorvaConfiguration) {
        self.init(configuration: configuration, environment: SymorvaEnvironment())
    }

    /// A community.
    ///
    /// - Parameters:
    ///   - modules: feature modules built for every signed-in account, with their database
    ///     migrations (see ``/SymorvaFeatureKit/AccountModuleFactory``); by default
    ///     ``SymorvaFeatureKit/AccountModuleFactory/standard``. They are built in the order their
    ///     declarations give (a module after those it requires or uses), whatever the list's order.
    ///
    /// - Precondition: `modules` can be ordered: no name twice, every required module listed, no
    ///   cycle. Check a list of your own with ``/SymorvaFeatureKit/AccountModuleFactory/ordered(_:)``,
    ///   which says why it cannot (``/SymorvaFeatureKit/AccountModuleGraphError``).
    public init(
        configuration: SymorvaConfiguration, environment: SymorvaEnvironment,
        modules: [AccountModuleFactory] = AccountModuleFactory.standard
    ) {
        self.configuration = configuration
        self.environment = environment
        // Built in the order the factories' declarations give (`requires`, `uses`), not the list's.
        let ordered: [AccountModuleFactory]
        do { ordered = try AccountModuleFactory.ordered(modules) } catch {
            preconditionFailure("SymorvaCommunity: the module list cannot be built: \(error)")
        }
        // Every module's tables, as its factory declares them, made when an account's database opens.
        let migrations = AccountMigrations.community(modules: ordered)
        let storage = AccountStorage(
            dataDirectory: environment.dataDirectory, keyProvider: environment.keyProvider, migrations: migrations,
            logger: environment.logger("store"))
        let sessions = CommunitySessions(
            configuration: configuration, environment: environment, storage: storage, factories: ordered)
        let coordinator = AppFlowCoordinator(driver: sessions, clock: environment.clock, tracer: environment.tracer)
        self.sessions = sessions
        self.coordinator = coordinator
        let chat = ChatClient()
        let wallet =
            configuration.modules.wallet.isEnabled
            ? WalletClient(configuration: WalletConfiguration(manifest: configuration.modules.wallet)) : nil
        self.chat = chat
        self.wallet = wallet
        let meetings = MeetingsClient(isEnabled: configuration.modules.meetings.isEnabled)
        self.meetings = meetings
        let publicRooms = PublicRoomsClient(
            homeserverURL: configuration.homeserver.url, transport: environment.transport, tracer: environment.tracer)
        let directory = configuration.modules.directory.isEnabled ? DirectoryClient() : nil
        self.publicRooms = publicRooms
        self.directory = directory
        let push = PushClient(
            dataDirectory: environment.dataDirectory, chat: chat,
            servicesURL: configuration.services.url.absoluteString)
        self.push = push
        let aiStudio = configuration.modules.aiStudio.isEnabled ? StudioClient() : nil
        self.aiStudio = aiStudio
        // For the community's lifetime: the clients follow whichever account runs. Listeners of
        // two publications made on different threads may run out of order, so the listener
        // ignores its argument and, under one lock, follows the value current at that moment:
        // whichever call comes last follows the newest account.
        //
        // It subscribes before the session client does: listeners run in subscription order, so
        // the clients follow a new account before `session.state` says it is signed in, and
        // `register`, `signIn` and `switchAccount` (which return on that state) never hand back
        // control while `community.chat` still answers `.notSignedIn`.
        let following = Lock(())
        let active = sessions.active
        _ = active.subscribe { _ in
            following.withLock { _ in
                var modules: AccountModules?
                if case .running(let context) = active.value { modules = context.modules }
                chat.follow(modules?.module(AccountChat.self))
                wallet?.follow(modules?.module(AccountWallet.self), isSignedIn: modules != nil)
                meetings.follow(modules?.module(AccountMeetings.self))
                publicRooms.follow(modules?.module(AccountDirectory.self))
                directory?.follow(modules?.module(AccountDirectory.self))
                push.follow(modules?.module(AccountPush.self))
                aiStudio?.follow(modules?.module(AccountStudio.self), isSignedIn: modules != nil)
            }
        }
        self.session = SessionClient(coordinator: coordinator, sessions: sessions)
    }

    /// Restores the last active account from the store (no network needed) and returns once
    /// ``/SymorvaSession/SessionClient/state`` says where the member is: signed in, soft logged out, signed out
    /// or unavailable.
    public func launch() async { await session.launch() }

    /// Stops every session and its modules. The community cannot be used afterwards.
    public func shutdown() async {
        await coordinator.shutdown()
        await sessions.shutdown()
    }

    /// The community services as the active account, or `nil` when no account is signed in.
    public var services: CommunityServicesClient? {
        guard case .running(let context) = sessions.active.value else { return nil }
        return context.services
    }

    /// The active account's module of type `type`, or `nil` when no account is active or the
    /// module is not built (not registered, or disabled in the manifest).
    public func module<Module: AccountModule>(_ type: Module.Type) -> Module? {
        guard case .running(let context) = sessions.active.value else { return nil }
        return context.modules.module(type)
    }

    /// Matrix requests as the active account (with transparent token refresh), or `nil` when
    /// no account is signed in. Chat and other Matrix features build on this.
    public var requester: (any MatrixRequester)? {
        guard case .running(let context) = sessions.active.value else { return nil }
        return context.requester
    }
}

#if canImport(Observation)
    import Observation

    /// SwiftUI injects the community with `.environment(community)`; views observe
    /// ``SymorvaCommunity/session`` state through ``ObservedValue``.
    extension SymorvaCommunity: Observable {}
#endif
