import Foundation
import SymorvaFeatureKit
import SymorvaMachines
import Testing

@Suite("Community manifest")
struct SymorvaConfigurationTests {
    static let valid = """
        {
          "version": 1,
          "community": {"name": "Orbit Dev"},
          "homeserver": {"url": "http://127.0.0.1:8008", "serverName": "localhost"},
          "services": {"url": "http://127.0.0.1:8090"},
          "modules": {
            "meetings": {"enabled": true},
            "aiStudio": {"enabled": true},
            "wallet": {"enabled": true, "assets": [{"code": "ORB", "precision": 2}]},
            "directory": {"enabled": true}
          },
          "encryption": {"defaultEnabled": false}
        }
        """

    /// The valid manifest with one edit applied to its JSON object.
    static func manifest(_ edit: (inout [String: Any]) -> Void) throws -> Data {
        var object = try #require(JSONSerialization.jsonObject(with: Data(valid.utf8)) as? [String: Any])
        edit(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    static func expectError(
        _ expected: ConfigurationError, _ edit: (inout [String: Any]) -> Void,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let data = try manifest(edit)
        #expect(throws: expected, sourceLocation: sourceLocation) { try SymorvaConfiguration(jsonData: data) }
    }

    @Test("The reference manifest decodes completely")
    func validManifest() throws {
        let configuration = try SymorvaConfiguration(jsonData: Data(Self.valid.utf8))
        #expect(configuration.version == 1)
        #expect(configuration.community.name == "Orbit Dev")
        #expect(configuration.homeserver.url == HomeserverURL("http://127.0.0.1:8008"))
        #expect(configuration.homeserver.serverName == "localhost")
        #expect(
            configuration.homeserver.address
                == .homeserverURL(HomeserverURL("http://127.0.0.1:8008")!, serverName: "localhost"))
        #expect(configuration.services.url == URL(string: "http://127.0.0.1:8090"))
        #expect(configuration.modules.meetings.isEnabled)
        #expect(configuration.modules.aiStudio.isEnabled)
        #expect(configuration.modules.directory.isEnabled)
        #expect(configuration.modules.wallet.isEnabled)
        #expect(configuration.modules.wallet.assets == [.init(code: "ORB", precision: 2)])
        #expect(!configuration.encryption.isEnabledByDefault)
    }

    @Test("load(from:) reads a file")
    func loadFromFile() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("symorva-\(UUID()).config.json")
        try Data(Self.valid.utf8).write(to: url)
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(try SymorvaConfiguration.load(from: url).community.name == "Orbit Dev")
    }

    @Test("A missing file is unreadable, naming the path")
    func missingFile() {
        let url = URL(fileURLWithPath: "/nonexistent/symorva.config.json")
        #expect {
            try SymorvaConfiguration.load(from: url)
        } throws: { error in
            guard case .unreadable(let path, _) = error as? ConfigurationError else { return false }
            return path == "/nonexistent/symorva.config.json"
        }
    }

    @Test("Malformed JSON reports line and column")
    func malformedJSON() {
        let text = "{\n  \"version\": 1,\n  \"community\": {\"name\": \"Orbit\",}\n}"
        #expect(throws: ConfigurationError.malformedJSON(line: 3, column: 33, reason: "expected a key")) {
            try SymorvaConfiguration(jsonData: Data(text.utf8))
        }
    }

    @Test("Duplicate keys are malformed")
    func duplicateKeys() {
        let text = #"{"version": 1, "version": 2}"#
        #expect(throws: ConfigurationError.malformedJSON(line: 1, column: 16, reason: #"duplicate key "version""#)) {
            try SymorvaConfiguration(jsonData: Data(text.utf8))
        }
    }

    @Test("A root that is not an object is invalid")
    func rootNotObject() {
        #expect(throws: ConfigurationError.invalidField("(root)", reason: "expected an object, found array")) {
            try SymorvaConfiguration(jsonData: Data("[]".utf8))
        }
    }

    @Test("Version 2 is unsupported")
    func unsupportedVersion() throws {
        try Self.expectError(.unsupportedVersion(2)) { $0["version"] = 2 }
    }

    @Test("A version that is not an integer is invalid")
    func fractionalVersion() throws {
        try Self.expectError(.invalidField("version", reason: "expected an integer, found number")) {
            $0["version"] = 1.5
        }
    }

    @Test("A missing version is a missing field")
    func missingVersion() throws {
        try Self.expectError(.missingField("version")) { $0["version"] = nil }
    }

    @Test("A missing services.url names its path")
    func missingServicesURL() throws {
        try Self.expectError(.missingField("services.url")) { $0["services"] = [String: Any]() }
    }

    @Test("A relative homeserver.url is not an absolute http(s) URL")
    func relativeHomeserverURL() throws {
        try Self.expectError(.invalidField("homeserver.url", reason: "not an absolute http(s) URL")) {
            $0["homeserver"] = ["url": "matrix.example.org", "serverName": "example.org"]
        }
    }

    @Test("An ftp services.url is invalid")
    func ftpServicesURL() throws {
        try Self.expectError(.invalidField("services.url", reason: "not an absolute http(s) URL")) {
            $0["services"] = ["url": "ftp://127.0.0.1"]
        }
    }

    @Test("A plain-http homeserver.url to a non-loopback host is refused, naming the field")
    func plainHTTPHomeserverURL() throws {
        try Self.expectError(.insecureURL("homeserver.url")) {
            $0["homeserver"] = ["url": "http://matrix.example.org", "serverName": "example.org"]
        }
    }

    @Test("A plain-http services.url to a non-loopback host is refused, naming the field")
    func plainHTTPServicesURL() throws {
        try Self.expectError(.insecureURL("services.url")) { $0["services"] = ["url": "http://services.example.org"] }
    }

    @Test("Plain http stays allowed for loopback hosts (127.0.0.0/8, ::1, localhost)")
    func plainHTTPLoopbackAllowed() throws {
        for url in ["http://127.0.0.1:8008", "http://127.1.2.3", "http://[::1]:8008", "http://localhost:8008"] {
            let data = try Self.manifest {
                $0["homeserver"] = ["url": url, "serverName": "localhost"]
                $0["services"] = ["url": url]
            }
            let configuration = try SymorvaConfiguration(jsonData: data)
            #expect(configuration.homeserver.url.rawValue == url)
            #expect(configuration.services.url == URL(string: url))
        }
    }

    @Test("A bad serverName is invalid")
    func badServerName() throws {
        try Self.expectError(.invalidField("homeserver.serverName", reason: "not a Matrix server name")) {
            $0["homeserver"] = ["url": "http://127.0.0.1:8008", "serverName": "local host"]
        }
    }

    @Test("An empty community name is invalid")
    func emptyCommunityName() throws {
        try Self.expectError(.invalidField("community.name", reason: "must not be empty")) {
            $0["community"] = ["name": "  "]
        }
    }

    @Test("A wrongly typed homeserver is invalid")
    func homeserverWrongType() throws {
        try Self.expectError(.invalidField("homeserver", reason: "expected an object, found string")) {
            $0["homeserver"] = "http://127.0.0.1:8008"
        }
    }

    @Test("A module's enabled flag must be a boolean")
    func enabledNotBool() throws {
        try Self.expectError(.invalidField("modules.aiStudio.enabled", reason: "expected a boolean, found string")) {
            $0["modules"] = ["aiStudio": ["enabled": "yes"]]
        }
    }

    @Test("Absent modules are disabled")
    func absentModulesDisabled() throws {
        let data = try Self.manifest { $0["modules"] = ["meetings": ["enabled": true]] }
        let configuration = try SymorvaConfiguration(jsonData: data)
        #expect(configuration.modules.meetings.isEnabled)
        #expect(!configuration.modules.wallet.isEnabled)
        #expect(!configuration.modules.aiStudio.isEnabled)
        #expect(!configuration.modules.directory.isEnabled)
    }

    @Test("An enabled wallet may list no assets, like the reference validator allows")
    func walletWithoutAssets() throws {
        let data = try Self.manifest { $0["modules"] = ["wallet": ["enabled": true]] }
        #expect(try SymorvaConfiguration(jsonData: data).modules.wallet == .init(isEnabled: true, assets: []))
    }

    @Test("A future module still needs a boolean enabled")
    func futureModule() throws {
        try Self.expectError(.missingField("modules.polls.enabled")) {
            $0["modules"] = ["polls": ["question": "?"]]
        }
    }

    @Test("Modules may be left out: every optional module is off")
    func modulesOptional() throws {
        let configuration = try SymorvaConfiguration(jsonData: try Self.manifest { $0["modules"] = nil })
        #expect(!configuration.modules.meetings.isEnabled && !configuration.modules.wallet.isEnabled)
    }

    @Test("A community name over 100 characters is invalid")
    func longCommunityName() throws {
        try Self.expectError(.invalidField("community.name", reason: "longer than 100 characters")) {
            $0["community"] = ["name": String(repeating: "x", count: 101)]
        }
    }

    @Test("Optional community description and avatar are read")
    func communityExtras() throws {
        let data = try Self.manifest {
            $0["community"] = ["name": "Orbit", "description": "Dev community", "avatarUrl": "mxc://localhost/abc"]
        }
        #expect(
            try SymorvaConfiguration(jsonData: data).community
                == .init(name: "Orbit", description: "Dev community", avatarURL: "mxc://localhost/abc"))
    }

    @Test(
        "The community space is a room ID (with or without a server part: room version 12's have none) or an alias",
        arguments: ["!room:localhost", "!8Z_Z024MrS5mU413U_-74R6vXC1SF7CSIEkFGhMd6E4", "#lobby:localhost"])
    func communitySpace(space: String) throws {
        let data = try Self.manifest { $0["community"] = ["name": "Orbit", "space": space] }
        #expect(try SymorvaConfiguration(jsonData: data).community.space == space)
    }

    @Test(
        "A community space that is neither a room ID nor an alias with its server is invalid",
        arguments: ["!", "#lobby", "lobby"])
    func badCommunitySpace(space: String) throws {
        try Self.expectError(.invalidField("community.space", reason: "not a room ID (!…) or alias (#…:server)")) {
            $0["community"] = ["name": "Orbit", "space": space]
        }
    }

    @Test("An asset precision out of range names the asset's index")
    func assetPrecisionOutOfRange() throws {
        try Self.expectError(.invalidField("modules.wallet.assets[1].precision", reason: "must be between 0 and 18")) {
            $0["modules"] = [
                "wallet": [
                    "enabled": true, "assets": [["code": "ORB", "precision": 2], ["code": "GEM", "precision": 40]],
                ]
            ]
        }
    }

    @Test("A missing asset code names its path")
    func assetCodeMissing() throws {
        try Self.expectError(.missingField("modules.wallet.assets[0].code")) {
            $0["modules"] = ["wallet": ["enabled": true, "assets": [["precision": 2]]]]
        }
    }

    @Test("Duplicate asset codes are invalid")
    func duplicateAssetCodes() throws {
        try Self.expectError(.invalidField("modules.wallet.assets[1].code", reason: "duplicate asset code ORB")) {
            $0["modules"] = [
                "wallet": [
                    "enabled": true, "assets": [["code": "ORB", "precision": 2], ["code": "ORB", "precision": 0]],
                ]
            ]
        }
    }

    @Test("Encryption may be left out and defaults to off")
    func encryptionOptional() throws {
        let configuration = try SymorvaConfiguration(jsonData: try Self.manifest { $0["encryption"] = nil })
        #expect(!configuration.encryption.isEnabledByDefault)
    }

    @Test("encryption.defaultEnabled must be a boolean and defaults to false")
    func encryptionFlagType() throws {
        try Self.expectError(.invalidField("encryption.defaultEnabled", reason: "expected a boolean, found string")) {
            $0["encryption"] = ["defaultEnabled": "yes"]
        }
        let empty = try Self.manifest { $0["encryption"] = [String: Any]() }
        #expect(try !SymorvaConfiguration(jsonData: empty).encryption.isEnabledByDefault)
    }

    @Test("encryption.roomKeySharing names the room key policy: crossSignedOnly (MSC4153) when absent, one of three")
    func roomKeyPolicy() throws {
        #expect(
            try SymorvaConfiguration(jsonData: Data(Self.valid.utf8)).encryption.roomKeyPolicy
                == .crossSignedOnly)
        for policy in SymorvaConfiguration.RoomKeyPolicy.allCases {
            let set = try Self.manifest { $0["encryption"] = ["roomKeySharing": policy.rawValue] }
            #expect(try SymorvaConfiguration(jsonData: set).encryption.roomKeyPolicy == policy)
        }
        try Self.expectError(
            .invalidField(
                "encryption.roomKeySharing", reason: "not one of crossSignedOnly, crossSignedWhenAvailable, allDevices")
        ) {
            $0["encryption"] = ["roomKeySharing": "everyone"]
        }
    }

    @Test("encryption.crossSigningBootstrap: automatic when absent, or manual; anything else refused")
    func crossSigningBootstrap() throws {
        #expect(
            try SymorvaConfiguration(jsonData: Data(Self.valid.utf8)).encryption.crossSigningBootstrap == .automatic)
        for mode in SymorvaConfiguration.CrossSigningBootstrap.allCases {
            let set = try Self.manifest { $0["encryption"] = ["crossSigningBootstrap": mode.rawValue] }
            #expect(try SymorvaConfiguration(jsonData: set).encryption.crossSigningBootstrap == mode)
        }
        try Self.expectError(
            .invalidField("encryption.crossSigningBootstrap", reason: "not one of automatic, manual")
        ) {
            $0["encryption"] = ["crossSigningBootstrap": "later"]
        }
    }

    @Test("media.cacheBytes sets the media cache's cap: 256 MiB when absent, at least 1 MiB, an integer")
    func mediaCacheBytes() throws {
        #expect(try SymorvaConfiguration(jsonData: Data(Self.valid.utf8)).media.cacheBytes == 256 << 20)
        let set = try Self.manifest { $0["media"] = ["cacheBytes": 8_388_608] }
        #expect(try SymorvaConfiguration(jsonData: set).media.cacheBytes == 8_388_608)
        try Self.expectError(.invalidField("media.cacheBytes", reason: "less than 1 MiB (1048576)")) {
            $0["media"] = ["cacheBytes": 1000]
        }
        try Self.expectError(.invalidField("media.cacheBytes", reason: "expected an integer, found string")) {
            $0["media"] = ["cacheBytes": "big"]
        }
    }

    @Test("sync.mode chooses the sync protocol: auto when absent, auto, sliding or v2, nothing else")
    func syncMode() throws {
        #expect(try SymorvaConfiguration(jsonData: Data(Self.valid.utf8)).sync.mode == .automatic)
        for (text, mode) in [("auto", SymorvaConfiguration.Sync.Mode.automatic), ("sliding", .sliding), ("v2", .v2)] {
            let set = try Self.manifest { $0["sync"] = ["mode": text] }
            #expect(try SymorvaConfiguration(jsonData: set).sync.mode == mode)
        }
        try Self.expectError(.invalidField("sync.mode", reason: "not one of auto, sliding, v2")) {
            $0["sync"] = ["mode": "v3"]
        }
        try Self.expectError(.invalidField("sync.mode", reason: "expected a string, found number")) {
            $0["sync"] = ["mode": 2]
        }
    }

    @Test("Error descriptions name the field")
    func errorDescriptions() {
        #expect(
            ConfigurationError.invalidField("homeserver.url", reason: "not an absolute http(s) URL").description
                == "invalid field homeserver.url: not an absolute http(s) URL")
        #expect(ConfigurationError.missingField("services.url").description == "missing field services.url")
    }
}
