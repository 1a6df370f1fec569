import Foundation
import SymorvaHTTP
import SymorvaRuntime
import Testing

/// The running dev servers, as `Scripts/dev-server` describes them in its env file.
///
/// `Scripts/test` starts the servers and exports the variables; integration tests are enabled
/// only when they are present (`swift test` alone runs the unit tiers).
struct DevEnvironment: Sendable {
    let homeserverURL: URL
    let servicesURL: URL
    let serverName: String
    let manifestPath: String?
    /// The services' rate limit profile (`SYMORVA_SERVICES_RATE_LIMIT`): `low` under
    /// `Scripts/test`, where a burst of one member's requests meets the limit.
    let servicesRateLimit: String?

    static let current: DevEnvironment? = {
        let variables = ProcessInfo.processInfo.environment
        guard
            let homeserver = variables["SYMORVA_HOMESERVER_URL"].flatMap(URL.init(string:)),
            let services = variables["SYMORVA_SERVICES_URL"].flatMap(URL.init(string:)),
            let serverName = variables["SYMORVA_SERVER_NAME"]
        else { return nil }
        return DevEnvironment(
            homeserverURL: homeserver, servicesURL: services, serverName: serverName,
            manifestPath: variables["SYMORVA_MANIFEST"], servicesRateLimit: variables["SYMORVA_SERVICES_RATE_LIMIT"])
    }()

    static var isAvailable: Bool { current != nil }

    /// Whether a missing server or binary fails the integration tests instead of skipping them
    /// (`SYMORVA_REQUIRE_SERVERS=1`, which the full `Scripts/test` run sets).
    static let serversRequired = ProcessInfo.processInfo.environment["SYMORVA_REQUIRE_SERVERS"] == "1"

    /// Whether the services run with the `low` rate limit profile (what the rate limit tests need).
    static var hasLowServicesRateLimits: Bool { current?.servicesRateLimit == "low" }

    /// A user name nobody has used yet on this homeserver.
    static func uniqueUsername(_ prefix: String) -> String {
        "\(prefix)-\(UInt64(Date().timeIntervalSince1970 * 1000))-\(UInt32.random(in: 0...UInt32.max))"
    }
}

/// A Matrix account registered for a test through the homeserver's client API, with the
/// project's own transport. (The SDK's session feature has its own registration flow; this one
/// is the minimal, independent path the services tests stand on.)
struct RegisteredAccount: Sendable {
    let userID: String
    let accessToken: Secret<String>
    /// The device the registration signed in.
    var deviceID: String = ""

    static func register(
        _ username: String, password: String = "correct horse battery staple", in environment: DevEnvironment,
        transport: any HTTPTransport
    ) async throws -> RegisteredAccount {
        let url = environment.homeserverURL.appending(path: "/_matrix/client/v3/register")
        // User-interactive auth: the first call returns the session, the second completes the dummy stage.
        let first = try await transport.send(
            .json(.post, url: url, body: Array(try JSONEncoder().encode(["username": username, "password": password]))))
        struct Challenge: Decodable { let session: String }
        let challenge = try JSONDecoder().decode(Challenge.self, from: Data(first.body))
        struct Registration: Encodable {
            struct Auth: Encodable {
                let type = "m.login.dummy"
                let session: String
            }
            let username: String
            let password: String
            let auth: Auth
        }
        let second = try await transport.send(
            .json(
                .post, url: url,
                body: Array(
                    try JSONEncoder().encode(
                        Registration(username: username, password: password, auth: .init(session: challenge.session))))
            ))
        struct Registered: Decodable {
            let user_id: String
            let access_token: String
            let device_id: String
        }
        guard second.isSuccess else { throw IntegrationFailure("register answered \(second.status)") }
        let registered = try JSONDecoder().decode(Registered.self, from: Data(second.body))
        return RegisteredAccount(
            userID: registered.user_id, accessToken: Secret(registered.access_token), deviceID: registered.device_id)
    }
}

extension Trait where Self == ConditionTrait {
    /// Runs a test or suite only when `requirement` holds. When it does not, the test is skipped
    /// (a plain `swift test` runs the unit tiers), or, with `SYMORVA_REQUIRE_SERVERS=1`, fails
    /// with a message that names what is missing: a full `Scripts/test` run never passes with
    /// integration tests that did not run.
    static func requires(_ requirement: @autoclosure @escaping @Sendable () -> Bool, _ missing: String) -> Self {
        .enabled(Comment(rawValue: missing)) {
            if requirement() { return true }
            if DevEnvironment.serversRequired {
                throw IntegrationFailure("SYMORVA_REQUIRE_SERVERS=1 but this test \(missing)")
            }
            return false
        }
    }
}

struct IntegrationFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The shared log center raised to `.trace` and captured, for the canary tests (no secret may
/// reach a log): `finish()` puts the threshold back and removes the capture.
final class SharedLogCapture: Sendable {
    private let sink = CapturingLogSink()
    private let threshold: LogLevel
    private let remove: @Sendable () -> Void

    init() {
        remove = LogCenter.shared.addSink(sink)
        threshold = LogCenter.shared.threshold
        LogCenter.shared.threshold = .trace
    }

    /// Everything logged so far.
    var text: String { sink.text }

    func finish() {
        LogCenter.shared.threshold = threshold
        remove()
    }
}
