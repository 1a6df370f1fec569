import Foundation
import SymorvaMachines
import SymorvaMatrix

/// A community's manifest, `symorva.config.json`: which homeserver and services to talk to,
/// which optional modules exist, and whether new conversations are encrypted by default.
///
/// ```json
/// {"version": 1,
///  "community": {"name": "Orbit Dev"},
///  "homeserver": {"url": "http://127.0.0.1:8008", "serverName": "localhost"},
///  "services": {"url": "http://127.0.0.1:8090"},
///  "modules": {"meetings": {"enabled": true}, "aiStudio": {"enabled": true},
///              "wallet": {"enabled": true, "assets": [{"code": "ORB", "precision": 2}]},
///              "directory": {"enabled": true}},
///  "encryption": {"defaultEnabled": false}}
/// ```
///
/// The rules are those of `docs/manifest.md` and of the reference validator
/// (`Server/symorva_server/config.py`), so that the client accepts what the server accepts
/// (it also checks that `homeserver.serverName` follows the Matrix grammar): `modules` may be left out and a module absent from it is disabled; every listed
/// module, known or not, needs a boolean `enabled`; `encryption.defaultEnabled` defaults to
/// `false`; `encryption.roomKeySharing` (``SymorvaConfiguration/RoomKeyPolicy``) to `crossSignedOnly`;
/// `encryption.crossSigningBootstrap` to `automatic`. Other unknown fields are ignored, so newer manifests stay readable.
public struct SymorvaConfiguration: Sendable, Hashable {
    /// The manifest format version; always 1 today.
    public var version: Int
    /// The community as members see it.
    public var community: Community
    /// The Matrix homeserver.
    public var homeserver: Homeserver
    /// The community services (meetings, wallet, AI studio, directory).
    public var services: Services
    /// Which modules are switched on.
    public var modules: Modules
    /// End-to-end encryption defaults.
    public var encryption: Encryption
    /// Media settings (the manifest's `media`).
    public var media: Media
    /// How chat syncs (the manifest's `sync`).
    public var sync: Sync

    /// The community's identity.
    public struct Community: Sendable, Hashable {
        /// Display name, e.g. `Orbit Dev`: 1–100 characters, not blank.
        public var name: String
        /// A short description for UIs.
        public var description: String?
        /// The avatar, an `mxc://` or `https://` URL as written in the manifest.
        public var avatarURL: String?
        /// The community's Matrix space, a room ID (`!…`) or alias (`#…:server`): its rooms are
        /// the community's (`community.chat.communityRooms()`).
        public var space: String?

        /// A community.
        public init(name: String, description: String? = nil, avatarURL: String? = nil, space: String? = nil) {
            self.name = name
            self.description = description
            self.avatarURL = avatarURL
            self.space = space
        }
    }

    /// Where the Matrix homeserver is.
    public struct Homeserver: Sendable, Hashable {
        /// The client-server API base URL (no trailing slash).
        public var url: HomeserverURL
        /// The server name in user IDs (`@alice:<serverName>`).
        public var serverName: String

        /// A homeserver.
        public init(url: HomeserverURL, serverName: String) {
            self.url = url
            self.serverName = serverName
        }

        /// Where session discovery starts: the known URL, checked with `/versions`.
        public var address: ServerAddress { .homeserverURL(url, serverName: serverName) }
    }

    /// Where the community services are.
    public struct Services: Sendable, Hashable {
        /// The services' base URL.
        public var url: URL
        /// Services at `url`.
        public init(url: URL) { self.url = url }
    }

    /// A module that is either on or off.
    public struct ModuleSwitch: Sendable, Hashable {
        /// Whether the module's client exists.
        public var isEnabled: Bool
        /// A switch.
        public init(isEnabled: Bool) { self.isEnabled = isEnabled }
    }

    /// One asset the wallet module handles.
    public struct Asset: Sendable, Hashable {
        /// The asset code, 2–12 upper-case letters or digits (`ORB`).
        public var code: String
        /// Digits after the decimal point, 0–18.
        public var precision: Int

        /// An asset.
        public init(code: String, precision: Int) {
            self.code = code
            self.precision = precision
        }
    }

    /// The wallet module's switch and assets.
    public struct Wallet: Sendable, Hashable {
        /// Whether the wallet client exists.
        public var isEnabled: Bool
        /// The assets, in manifest order; at least one when enabled.
        public var assets: [Asset]

        /// A wallet module.
        public init(isEnabled: Bool, assets: [Asset]) {
            self.isEnabled = isEnabled
            self.assets = assets
        }
    }

    /// The modules of the manifest.
    public struct Modules: Sendable, Hashable {
        /// Meetings (a foundation module, normally on).
        public var meetings: ModuleSwitch
        /// The AI studio (optional).
        public var aiStudio: ModuleSwitch
        /// The wallet (optional).
        public var wallet: Wallet
        /// The member directory (optional).
        public var directory: ModuleSwitch

        /// The modules.
        public init(meetings: ModuleSwitch, aiStudio: ModuleSwitch, wallet: Wallet, directory: ModuleSwitch) {
            self.meetings = meetings
            self.aiStudio = aiStudio
            self.wallet = wallet
            self.directory = directory
        }
    }

    /// Encryption defaults.
    public struct Encryption: Sendable, Hashable {
        /// Whether conversations created by members are end-to-end encrypted by default.
        public var isEnabledByDefault: Bool
        /// Which devices get room keys and whose key requests and forwarded keys are taken
        /// (`encryption.roomKeySharing`).
        public var roomKeyPolicy: RoomKeyPolicy
        /// Whether an account without a cross-signing identity gets one as soon as its device
        /// keys are published (`encryption.crossSigningBootstrap`).
        public var crossSigningBootstrap: CrossSigningBootstrap
        /// Encryption defaults.
        public init(
            isEnabledByDefault: Bool, roomKeyPolicy: RoomKeyPolicy = .crossSignedOnly,
            crossSigningBootstrap: CrossSigningBootstrap = .automatic
        ) {
            self.isEnabledByDefault = isEnabledByDefault
            self.roomKeyPolicy = roomKeyPolicy
            self.crossSigningBootstrap = crossSigningBootstrap
        }
    }

    /// When an account gets its cross-signing identity (master, self-signing and user-signing
    /// keys, with this device signed by them).
    public enum CrossSigningBootstrap: String, Sendable, Hashable, CaseIterable {
        /// At the first sign-in: once the device's keys are published, an account the server
        /// lists no identity for gets one (the first identity needs no password). Secret storage
        /// and the recovery key come later, when the member sets up recovery.
        case automatic
        /// Only when the app asks (`AccountCrypto.bootstrapCrossSigning()` or
        /// `setUpRecovery(passphrase:)`): for an account another client sets up.
        case manual
    }

    /// Which devices this account trusts with room keys (MSC4153's device policy): a room's key
    /// is shared with those devices only, and room key requests are answered and forwarded keys
    /// accepted only from the account's own devices it allows.
    public enum RoomKeyPolicy: String, Sendable, Hashable, CaseIterable {
        /// Only devices their owner cross-signed: a user without a cross-signing identity gets
        /// nothing, and a message from a device its owner did not cross-sign is not shown
        /// (`UnableToDecryptReason.senderNotCrossSigned`). The specification's recommendation
        /// (Matrix 1.18, MSC4153) and the default.
        case crossSignedOnly
        /// A user with a cross-signing identity (ever seen: it is pinned) gets keys on the devices
        /// it cross-signed only; a user who never set one up gets them on every device. A device
        /// the server adds to an account with an identity gets nothing. Messages from devices not
        /// cross-signed are shown, marked (`EncryptionInfo.isFromDeviceNotCrossSigned`).
        case crossSignedWhenAvailable
        /// Every device with valid self-signed keys (before cross-signing): for peers without
        /// cross-signing (matrix-nio). Messages from devices not cross-signed are shown, marked.
        case allDevices
    }

    /// Media settings.
    public struct Media: Sendable, Hashable {
        /// The most bytes each account's media cache keeps on disk (`media.cacheBytes`,
        /// default 256 MiB, at least 1 MiB).
        public var cacheBytes: Int64
        /// Media settings.
        public init(cacheBytes: Int64 = Media.defaultCacheBytes) { self.cacheBytes = cacheBytes }
        /// 256 MiB.
        public static let defaultCacheBytes: Int64 = 256 << 20
    }

    /// How chat syncs with the homeserver.
    public struct Sync: Sendable, Hashable {
        /// Which protocol chat uses (`sync.mode`).
        public enum Mode: String, Sendable, Hashable {
            /// Simplified sliding sync (MSC4186) when the homeserver's `/versions` advertises
            /// `org.matrix.simplified_msc3575`, `/sync` v2 otherwise (`"auto"`, the default).
            case automatic = "auto"
            /// Always simplified sliding sync (`"sliding"`), whatever `/versions` says.
            case sliding
            /// Always `/sync` v2 (`"v2"`).
            case v2
        }

        /// Which protocol chat uses.
        public var mode: Mode
        /// Sync settings.
        public init(mode: Mode = .automatic) { self.mode = mode }
    }

    /// A configuration built in code (tests, embedding without a file); not validated beyond its types.
    public init(
        community: Community, homeserver: Homeserver, services: Services, modules: Modules,
        encryption: Encryption = Encryption(isEnabledByDefault: false), media: Media = Media(), sync: Sync = Sync()
    ) {
        self.version = 1
        self.community = community
        self.homeserver = homeserver
        self.services = services
        self.modules = modules
        self.encryption = encryption
        self.media = media
        self.sync = sync
    }

    /// The manifest versions this SDK reads.
    public static let supportedVersions: ClosedRange<Int> = 1...1

    /// Reads and validates the manifest at `url`.
    public static func load(from url: URL) throws(ConfigurationError) -> SymorvaConfiguration {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw .unreadable(path: url.path, reason: (error as NSError).localizedDescription)
        }
        return try SymorvaConfiguration(jsonData: data)
    }

    /// Validates a manifest given as JSON bytes.
    public init(jsonData: Data) throws(ConfigurationError) {
        let root: JSONValue
        do {
            root = try JSONValue(parsing: jsonData)
        } catch {
            throw .malformedJSON(line: error.line, column: error.column, reason: error.reason)
        }
        try self.init(validating: ManifestReader(root: root))
    }

    private init(validating reader: ManifestReader) throws(ConfigurationError) {
        let root = try reader.object(at: [])
        let version = try reader.integer(at: ["version"], in: root)
        guard Self.supportedVersions.contains(version) else { throw .unsupportedVersion(version) }
        self.version = version

        let community = try reader.object(at: ["community"], in: root)
        let name = try reader.nonEmptyString(at: ["community", "name"], in: community)
        guard name.trimmingCharacters(in: .whitespacesAndNewlines).count <= 100 else {
            throw .invalidField("community.name", reason: "longer than 100 characters")
        }
        let space = try reader.optionalString(at: ["community", "space"], in: community)
        // A room ID is `!` and an opaque part (room version 12's have no `:server`); an alias
        // always names its server.
        if let space, !(space.hasPrefix("!") && space.count > 1), !(space.hasPrefix("#") && space.contains(":")) {
            throw .invalidField("community.space", reason: "not a room ID (!…) or alias (#…:server)")
        }
        self.community = Community(
            name: name, description: try reader.optionalString(at: ["community", "description"], in: community),
            avatarURL: try reader.optionalString(at: ["community", "avatarUrl"], in: community), space: space)

        let homeserver = try reader.object(at: ["homeserver"], in: root)
        let homeserverText = try reader.string(at: ["homeserver", "url"], in: homeserver)
        let homeserverURL = try Self.checkedURL(homeserverText, field: "homeserver.url")
        let serverName = try reader.string(at: ["homeserver", "serverName"], in: homeserver)
        guard MatrixServerName.isValid(serverName) else {
            throw .invalidField("homeserver.serverName", reason: "not a Matrix server name")
        }
        self.homeserver = Homeserver(url: homeserverURL, serverName: serverName)

        let services = try reader.object(at: ["services"], in: root)
        let servicesText = try reader.string(at: ["services", "url"], in: services)
        _ = try Self.checkedURL(servicesText, field: "services.url")
        guard let servicesURL = URL(string: servicesText) else {
            throw .invalidField("services.url", reason: "not an absolute http(s) URL")
        }
        self.services = Services(url: servicesURL)

        let modules = try reader.optionalObject(at: ["modules"], in: root) ?? [:]
        try reader.checkModuleSwitches(in: modules)
        self.modules = Modules(
            meetings: try reader.moduleSwitch("meetings", in: modules),
            aiStudio: try reader.moduleSwitch("aiStudio", in: modules),
            wallet: try reader.wallet(in: modules),
            directory: try reader.moduleSwitch("directory", in: modules))

        let encryption = try reader.optionalObject(at: ["encryption"], in: root) ?? [:]
        let enabled = try reader.optionalBool(at: ["encryption", "defaultEnabled"], in: encryption) ?? false
        var sharing = RoomKeyPolicy.crossSignedOnly
        if let text = try reader.optionalString(at: ["encryption", "roomKeySharing"], in: encryption) {
            guard let value = RoomKeyPolicy(rawValue: text) else {
                throw .invalidField(
                    "encryption.roomKeySharing",
                    reason: "not one of \(RoomKeyPolicy.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            sharing = value
        }
        var bootstrap = CrossSigningBootstrap.automatic
        if let text = try reader.optionalString(at: ["encryption", "crossSigningBootstrap"], in: encryption) {
            guard let value = CrossSigningBootstrap(rawValue: text) else {
                throw .invalidField(
                    "encryption.crossSigningBootstrap",
                    reason: "not one of \(CrossSigningBootstrap.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            bootstrap = value
        }
        self.encryption = Encryption(
            isEnabledByDefault: enabled, roomKeyPolicy: sharing, crossSigningBootstrap: bootstrap)

        let media = try reader.optionalObject(at: ["media"], in: root) ?? [:]
        var cacheBytes: Int?
        if media["cacheBytes"] != nil { cacheBytes = try reader.integer(at: ["media", "cacheBytes"], in: media) }
        if let cacheBytes, cacheBytes < 1 << 20 {
            throw .invalidField("media.cacheBytes", reason: "less than 1 MiB (1048576)")
        }
        self.media = Media(cacheBytes: cacheBytes.map(Int64.init) ?? Media.defaultCacheBytes)

        let sync = try reader.optionalObject(at: ["sync"], in: root) ?? [:]
        let modeText = try reader.optionalString(at: ["sync", "mode"], in: sync) ?? Sync.Mode.automatic.rawValue
        guard let mode = Sync.Mode(rawValue: modeText) else {
            throw .invalidField("sync.mode", reason: "not one of auto, sliding, v2")
        }
        self.sync = Sync(mode: mode)
    }

    /// Validates the URL of `field`: absolute `http(s)`, plain `http` only for a loopback host.
    private static func checkedURL(_ text: String, field: String) throws(ConfigurationError) -> HomeserverURL {
        switch HomeserverURL.validate(text) {
        case .success(let url): return url
        case .failure(.plainHTTP): throw .insecureURL(field)
        case .failure(.notAbsoluteHTTPURL): throw .invalidField(field, reason: "not an absolute http(s) URL")
        }
    }
}
