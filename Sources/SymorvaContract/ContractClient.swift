import Foundation
import SymorvaKit

/// One client of the contract: a community built from a manifest with its data in a folder,
/// launched, and the engine that serves it. What `symorva serve --stdio` and the C library's
/// `symorva_client_create` make.
package final class ContractClient: Sendable {
    /// The engine: send requests to it, receive from its outbox.
    package let engine: ContractEngine
    /// Where the SDK's and the engine's log lines go (level and sinks set by the host).
    package let logCenter: LogCenter
    private let binding: ContractCommunity

    private init(engine: ContractEngine, logCenter: LogCenter, binding: ContractCommunity) {
        self.engine = engine
        self.logCenter = logCenter
        self.binding = binding
    }

    /// Builds the community from the manifest at `manifestPath` with its accounts in
    /// `dataDirectory`, restores the last account (no network), and starts the engine.
    ///
    /// - Parameter logCenter: the SDK's and the engine's log lines; by default none (threshold
    ///   `error`, no sink).
    /// - Throws: `contract.invalidManifest` when the manifest cannot be read or used.
    package static func open(
        manifestPath: String, dataDirectory: String, logCenter: LogCenter = LogCenter(threshold: .error),
        deviceDisplayName: String = "Symorva contract client"
    ) async throws(ContractError) -> ContractClient {
        let configuration: SymorvaConfiguration
        do {
            configuration = try SymorvaConfiguration.load(from: URL(fileURLWithPath: manifestPath))
        } catch {
            throw ContractError(
                domain: "contract", code: "invalidManifest", message: "The manifest cannot be used: \(error).")
        }
        let environment = SymorvaEnvironment(
            dataDirectory: dataDirectory, logCenter: logCenter, deviceDisplayName: deviceDisplayName)
        let community = SymorvaCommunity(configuration: configuration, environment: environment)
        await community.launch()
        let logger = Logger(category: "contract", center: logCenter)
        let binding = ContractCommunity(community: community)
        let engine = binding.makeEngine { level, line in logger.log(level, "\(LogLabel(line))") }
        return ContractClient(engine: engine, logCenter: logCenter, binding: binding)
    }

    /// Ends the engine (`{"closed": true}` is its last message) and shuts the community down.
    package func close() async { await binding.close() }
}
