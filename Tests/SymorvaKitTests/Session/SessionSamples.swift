import Foundation
import SymorvaMachines
import SymorvaRuntime

@testable import SymorvaCrypto
@testable import SymorvaKit
@testable import SymorvaSession

/// A data folder of its own per test.
final class TestDataDirectory: Sendable {
    let path = NSTemporaryDirectory() + "symorva-kit-\(UUID().uuidString)"
    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// The accounts and stored sessions the community tests start from (SymorvaSessionTests has its
/// own, for the session feature alone).
enum SessionSamples {
    static let alice = UserID("@alice:example.org")
    static let bob = UserID("@bob:example.org")
    static let server = HomeserverInfo(
        baseURL: HomeserverURL("https://matrix.example.org")!, serverName: "example.org",
        versions: ServerVersions(versions: ["v1.11"], unstableFeatures: ["org.matrix.simplified_msc3575": true]))

    static func session(
        _ user: UserID = alice, access: String = "syt_access_CANARY_1234567890",
        refresh: String? = "syr_refresh_CANARY_0987654321"
    ) -> Session {
        Session(
            userID: user, deviceID: DeviceID("DEVICEA"), homeserver: server,
            tokens: SessionTokens(
                accessToken: Secret(access), refreshToken: refresh.map(Secret.init),
                expiry: TokenExpiry(issuedAt: Timestamp(millisecondsSince1970: 1_000), lifetime: .seconds(300))))
    }

    /// The storage of a community with the standard modules.
    static func storage(_ data: TestDataDirectory) -> AccountStorage {
        AccountStorage(
            dataDirectory: data.path, keyProvider: FileKeyProvider(directory: data.path + "/keys"),
            migrations: .standard, logger: Logger(category: "test", center: LogCenter(threshold: .error)))
    }
}
