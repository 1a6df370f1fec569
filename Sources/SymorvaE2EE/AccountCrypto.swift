import SymorvaCrypto
import SymorvaCryptoDriver
import SymorvaFeatureKit
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore
import Synchronization

/// End-to-end encryption for one signed-in account: its Olm account and device keys, the
/// devices of the users it shares encrypted rooms with, and the room keys other devices send
/// it. The work is the crypto machine's (`CryptoMachine`), hosted in the account's scope.
///
/// Built by the crypto module when the account's session starts; ``start()`` loads (or
/// creates) the account and publishes its keys. Chat's sync hands it what each committed batch
/// says about devices and keys.
public final class AccountCrypto: Sendable {
    /// The account.
    public let userID: UserID
    /// This device.
    public let deviceID: DeviceID
    let engine: CryptoEngine
    package let store: CryptoStore
    let host: MachineHost<CryptoMachine>
    /// This device asking its own other devices for secrets (`SecretRequestMachine`), started
    /// from the round the store kept.
    let secretRequests: MachineHost<SecretRequestMachine>
    /// Answering the secret requests of the account's other devices (their requests kept in the
    /// crypto store until answered, refused or cancelled).
    let secretAnswers: MachineHost<SecretAnswerMachine>
    let interpreter: CryptoInterpreter
    /// The account's interactive verifications.
    let verifications: VerificationCenter
    let requester: any MatrixRequester
    let wallClock: any WallClock
    let logger: Logger
    private let seed: UInt64
    /// The last ticket drawn for a request of a room's key.
    let shareTickets = Lock<UInt64>(0)
    /// Setting up, restoring and resetting recovery run one at a time.
    let recoveryLock = AsyncLock()
    /// When the account gets its cross-signing identity (the manifest's
    /// `encryption.crossSigningBootstrap`).
    let crossSigningBootstrap: SymorvaConfiguration.CrossSigningBootstrap
    /// What this run's automatic bootstrap did (tests and fixtures wait on it).
    package let automaticBootstrap = ObservableValue<AutomaticBootstrap>.Publisher(.pending)
    /// The run's automatic bootstrap, cancelled by ``stop()``.
    private let bootstrapTask = Lock<Task<Void, Never>?>(nil)

    /// The crypto machine's state: `ready` once this device's keys are published.
    public var state: ObservableValue<CryptoState> { host.states }

    package init(
        userID: UserID, deviceID: DeviceID, database: SQLiteDatabase, secretsKey: Secret<[UInt8]>,
        requester: any MatrixRequester, scope: AccountScope, clock: any RuntimeClock, wallClock: any WallClock,
        tracer: Tracer, logCenter: LogCenter, driver: any CryptoDriver = OlmCryptoDriver(),
        roomKeyPolicy: SymorvaConfiguration.RoomKeyPolicy = .crossSignedOnly,
        crossSigningBootstrap: SymorvaConfiguration.CrossSigningBootstrap = .manual,
        jitterSeed: UInt64 = UInt64.random(in: 0...UInt64.max)
    ) async throws(CryptoStoreError) {
        self.userID = userID
        self.deviceID = deviceID
        let logger = Logger(category: "crypto", center: logCenter)
        self.logger = logger
        let store = try await CryptoStore.open(on: database, userID: userID, key: secretsKey)
        self.store = store
        let engine = CryptoEngine(
            driver: driver, store: store, userID: userID, deviceID: deviceID.rawValue, roomKeyPolicy: roomKeyPolicy)
        self.engine = engine
        self.seed = jitterSeed
        self.crossSigningBootstrap = crossSigningBootstrap
        self.requester = requester
        self.wallClock = wallClock
        let verifications = VerificationCenter(
            userID: userID, deviceID: deviceID, engine: engine, store: store, requester: requester,
            wallClock: wallClock, clock: clock, logger: logger)
        self.verifications = verifications
        let interpreter = CryptoInterpreter(
            engine: engine, requester: requester, wallClock: wallClock, logger: logger, verifications: verifications)
        self.interpreter = interpreter
        host = MachineHost(
            machine: CryptoMachine(), initial: .idle,
            interpreter: interpreter,
            instance: userID.rawValue, scope: scope, clock: clock, wallClock: wallClock, tracer: tracer)
        secretRequests = MachineHost(
            machine: SecretRequestMachine(), initial: try await store.secretRequestState(),
            interpreter: SecretRequestInterpreter(
                store: store, crypto: interpreter, userID: userID, deviceID: deviceID, logger: logger),
            instance: userID.rawValue, scope: scope, clock: clock, wallClock: wallClock, tracer: tracer)
        let answering = SecretAnswerInterpreter.AccountReference()
        secretAnswers = MachineHost(
            machine: SecretAnswerMachine(), initial: try await store.secretAnswerState(),
            interpreter: SecretAnswerInterpreter(store: store, account: answering, logger: logger),
            instance: userID.rawValue, scope: scope, clock: clock, wallClock: wallClock, tracer: tracer)
        answering.set(self)
    }

    /// Loads (or creates) the account and starts publishing and tracking. With the manifest's
    /// `encryption.crossSigningBootstrap` `automatic`, an account without a cross-signing
    /// identity gets one once the device keys are published (``bootstrapCrossSigning()``).
    public func start() async {
        // Weakly: this object holds the center (a cycle would keep the account's database open
        // after shutdown: CommunityShutdownTests).
        await verifications.setRefresh { [weak self] users in _ = await self?.interpreter.query(users) }
        await verifications.setOwnDeviceVerified { [weak self] device in
            guard let self else { return }
            // Not on the center: the secrets take a round trip to the other device (seconds).
            Task { await self.takeSecretsAfterVerifying(device) }
        }
        engine.secretSharing.setIncomingHandler { [weak self] event in await self?.secretAnswers.send(event) }
        engine.secretSharing.setArrivalHandler { [weak self] requestID, crossSigned, secret in
            guard let self else { return }
            Task {
                await self.secretArrived(requestID: requestID, fromOwnCrossSignedDevice: crossSigned, secret: secret)
            }
        }
        await host.send(.started(CryptoStart(jitterSeed: seed)))
        // A round the store kept from the last run is sent again, waited for or cancelled.
        await secretRequests.send(.restored(now: wallClock.now))
        // Requests of our other devices stored but not answered in the last run are checked again.
        await secretAnswers.send(.restored)
        guard crossSigningBootstrap == .automatic else {
            automaticBootstrap.publish(.off)
            return
        }
        let task = Task<Void, Never> { [weak self] in await self?.runAutomaticBootstrap() }
        bootstrapTask.withLock { $0 = task }
    }

    /// This device's identity keys, once the account is loaded.
    public var identityKeys: IdentityKeys? {
        get async { await engine.identityKeys }
    }

    /// The account's own devices as last queried from the server (this one included once its
    /// keys are published).
    public func ownDevices() async throws(CryptoError) -> [CryptoDevice] {
        try await devices(of: userID)
    }

    /// The verified devices of `user` as last queried (only users sharing an encrypted room
    /// with the account, and the account itself, are tracked).
    public func devices(of user: UserID) async throws(CryptoError) -> [CryptoDevice] {
        do throws(CryptoStoreError) {
            return try await store.devices(of: user).map(CryptoDevice.init)
        } catch {
            throw CryptoInterpreter.cryptoError(error)
        }
    }

    /// The account's cross-signing identity: `none` until one exists, `needsRecovery` while
    /// this device does not hold its private keys, `ready`, or `identityChanged(user)` while a
    /// user's (or this account's) identity is not the pinned one and not acknowledged.
    public var identityState: ObservableValue<IdentityState> { engine.identityState.observable }

    /// Whether `user`'s cross-signing identity changed since it was pinned and the change was not
    /// acknowledged yet.
    public func identityChanged(of user: UserID) async throws(CryptoError) -> Bool {
        do throws(CryptoStoreError) {
            return try await store.identity(of: user)?.changedMasterKey != nil
        } catch {
            throw CryptoInterpreter.cryptoError(error)
        }
    }

    /// How `user`'s cross-signing identity changed since it was pinned (another master key, or
    /// none any more), while not acknowledged; `nil` when it did not. Under the default room key
    /// policy (`crossSignedOnly`) such a user's devices get no room key until the change is
    /// acknowledged.
    public func identityChange(of user: UserID) async throws(CryptoError) -> UserIdentityChange? {
        do throws(CryptoStoreError) {
            return try await store.identity(of: user)?.change
        } catch {
            throw CryptoInterpreter.cryptoError(error)
        }
    }

    /// Acknowledges a change of `user`'s identity: the new master key is pinned, and the user no
    /// longer shows as changed. Returns whether there was a change to acknowledge.
    @discardableResult
    public func acknowledgeIdentityChange(of user: UserID) async throws(CryptoError) -> Bool {
        do throws(CryptoStoreError) {
            let acknowledged = try await store.acknowledgeIdentity(of: user)
            try await engine.refreshIdentityState()
            return acknowledged
        } catch {
            throw CryptoInterpreter.cryptoError(error)
        }
    }

    /// Takes in a committed sync response: applies its device-list changes to the tracked
    /// users (durably, before the machine hears of them), starts tracking new members of
    /// encrypted rooms, and hands the machine what it needs.
    package func syncCommitted(_ changes: SyncDeviceChanges) async {
        var changed: [UserID] = []
        do throws(CryptoStoreError) {
            if changes.hasDeviceListChanges { changed = try await store.applyDeviceListChanges() }
            if let members = changes.encryptedRoomMembers {
                let tracked = try await store.track(members)
                if !tracked.isEmpty { await host.send(.usersTracked(tracked)) }
            }
        } catch {
            logger.error("device tracking not updated error=\(error)")
        }
        await host.send(
            .syncCommitted(
                CryptoSyncSummary(
                    oneTimeKeyCount: changes.oneTimeKeyCount, unusedFallbackKeyTypes: changes.unusedFallbackKeyTypes,
                    changedUsers: changed, toDeviceEvents: changes.toDeviceEvents)))
    }

    /// Starts tracking `members`, the joined and invited members of an encrypted room this
    /// account joined, as chat read them with `/members` (the sync that brought the join
    /// lazy-loaded most of them out): the new ones enter as outdated and the machine queries
    /// their devices. Returns whether they are stored as tracked; when not, chat keeps the
    /// room waiting and hands them over again later.
    package func trackMembers(_ members: [UserID]) async -> Bool {
        do throws(CryptoStoreError) {
            let tracked = try await store.track(members)
            if !tracked.isEmpty { await host.send(.usersTracked(tracked)) }
            return true
        } catch {
            logger.error("members of a joined room not tracked error=\(error)")
            return false
        }
    }

    /// The sender key and claimed signing key of the stored inbound Megolm session `sessionID`
    /// of `roomID`, if the account has received it.
    package func roomKey(roomID: RoomID, sessionID: String) async throws(CryptoStoreError)
        -> (senderKey: String, signingKey: String, forwarded: Bool)?
    {
        try await store.inboundSession(roomID: roomID.rawValue, sessionID: sessionID).map {
            ($0.senderKey, $0.signingKey, $0.forwarded)
        }
    }

    /// Stops the machine.
    public func stop() async {
        engine.secretSharing.setIncomingHandler(nil)
        engine.secretSharing.setArrivalHandler(nil)
        engine.devicesQueried.withLock { $0 = nil }
        bootstrapTask.withLock { task in
            task?.cancel()
            task = nil
        }
        await host.send(.stopped)
    }
}

/// A device of a Matrix user, as verified from its self-signed keys.
public struct CryptoDevice: Sendable, Hashable {
    /// The user.
    public var userID: UserID
    /// The device ID.
    public var deviceID: String
    /// Its Curve25519 identity key.
    public var curve25519: String
    /// Its Ed25519 signing key.
    public var ed25519: String
    /// The display name the owner gave it.
    public var displayName: String?
    /// The server once showed other keys for this known device: they were refused, and the
    /// device is not trusted until a human looks (a compromised server or a re-used device ID).
    public var keysChanged: Bool
    /// How far this device trusts it: cross-signed by its owner (``DeviceTrustLevel/crossSigned``),
    /// and its owner verified by us (``DeviceTrustLevel/verified``), or neither.
    public var trust: DeviceTrustLevel

    init(_ device: CryptoStore.Device) {
        userID = device.userID
        deviceID = device.deviceID
        curve25519 = device.curve25519
        ed25519 = device.ed25519
        displayName = device.displayName
        keysChanged = device.keyChanged
        trust = device.trust
    }
}
