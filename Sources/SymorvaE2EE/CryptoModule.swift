import SymorvaFeatureKit
import SymorvaMachines
import SymorvaRuntime

extension AccountModuleFactory {
    /// End-to-end encryption: the account's ``AccountCrypto`` (its Olm account, device keys,
    /// tracked devices and room keys), started as soon as the session is restored. Chat's sync
    /// hands it each committed batch's device changes. Its tables are versioned as feature `e2ee`
    /// (declared here, applied when the account's database opens); its pickle key is sealed with
    /// the account's secrets-at-rest key.
    public static let crypto = AccountModuleFactory(
        name: "crypto", schema: AccountMigrations.Feature(name: CryptoStore.feature, migrations: CryptoStore.migrations)
    ) { context in
        let logger = Logger(category: "crypto", center: context.logCenter)
        let deviceID: DeviceID
        switch context.session.states.value {
        case .signedIn(let session), .authorizing(let session, _), .softLoggedOut(let session, _):
            deviceID = session.deviceID
        default:
            logger.error("crypto not started: no session account=\(context.userID)")
            return nil
        }
        do {
            let key = try context.keyProvider.key(for: context.userID.rawValue)
            let crypto = try await AccountCrypto(
                userID: context.userID, deviceID: deviceID, database: context.database.database, secretsKey: key,
                requester: context.requester, scope: context.scope, clock: context.clock,
                wallClock: context.wallClock, tracer: context.tracer, logCenter: context.logCenter,
                roomKeyPolicy: context.configuration.encryption.roomKeyPolicy,
                crossSigningBootstrap: context.configuration.encryption.crossSigningBootstrap)
            await crypto.start()
            return crypto
        } catch {
            logger.error("crypto did not open account=\(context.userID) error=\(error)")
            return nil
        }
    }
}

extension AccountCrypto: AccountModule {}
