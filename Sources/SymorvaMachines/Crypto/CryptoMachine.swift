import SymorvaRuntime

/// The account-level end-to-end encryption work of one account, in the style of
/// matrix-rust-sdk's `OlmMachine`: publishing the device's keys, keeping one-time keys and the
/// fallback key topped up, tracking the devices of the users the account shares encrypted
/// rooms with, and processing the to-device messages that sync delivers.
///
/// The machine holds no key material and does no cryptography: it decides which requests
/// leave and when, and the interpreter (with the crypto driver and the crypto store) performs
/// them. Every input it reacts to is already durable when it arrives — the sync ingest commits
/// to-device events, device-list changes and key counts with the sync token, and the
/// interpreter persists the account (with any keys it generates) **before** a `keys/upload`
/// leaves — so a crash between any two steps loses nothing: the next start reloads the same
/// state and sends the same request again.
package struct CryptoMachine: ChartedMachine {
    package static let name = "Crypto"

    /// The key of the running `keys/upload`.
    package static let uploadKey: EffectKey = "crypto.upload"
    /// The key of the running `keys/query`.
    package static let queryKey: EffectKey = "crypto.query"
    /// The key of the running to-device processing.
    package static let toDeviceKey: EffectKey = "crypto.toDevice"
    /// The key of the running sending of room key requests and their cancellations.
    package static let keyRequestsKey: EffectKey = "crypto.keyRequests"
    /// The key of the running answering of other own devices' room key requests.
    package static let keyAnswersKey: EffectKey = "crypto.keyAnswers"
    /// The key of the running unwedging of Olm sessions.
    package static let unwedgeKey: EffectKey = "crypto.unwedge"
    /// The key of the running upload of a batch of room keys to the key backup.
    package static let backupKey: EffectKey = "crypto.backup"
    /// The key of a round of sharing a room's key (one per room at a time; the round's number
    /// is the machine's own count, never data).
    package static func shareKey(_ round: UInt64) -> EffectKey { EffectKey("crypto.share.\(round)") }
    /// The key of the retry timer (not the state timeout: results arriving while backing off
    /// move the machine without re-arming it).
    package static let retryKey: EffectKey = "crypto.retry"

    /// Delays between failed attempts.
    package var backoff: RetryBackoff

    /// The machine.
    package init(backoff: RetryBackoff = .crypto) {
        self.backoff = backoff
    }

    /// The machine state: ``CryptoState`` (public: an app observes it, `AccountCrypto.state`).
    package typealias State = CryptoState

    /// What happened.
    package enum Event: Sendable, Equatable, CaseNameListing {
        /// The session is signed in: load the account and start.
        case started(CryptoStart)
        /// The store answered ``Effect/loadAccount``.
        case accountLoaded(Result<CryptoAccountStatus, CryptoError>)
        /// A sync response was committed (with its to-device events, device lists and key counts).
        case syncCommitted(CryptoSyncSummary)
        /// Users newly sharing an encrypted room with the account (persisted as outdated): their
        /// devices must be queried.
        case usersTracked([UserID])
        /// `keys/upload` answered: the server's one-time key count, or why not.
        case keysUploaded(Result<Int, CryptoRequestError>)
        /// `keys/query` answered for the users of ``Effect/queryKeys(_:)`` (their devices stored,
        /// no longer outdated), or why not.
        case keysQueried(Result<KeyQueryReport, CryptoRequestError>)
        /// The stored to-device messages were processed (decrypted, room keys stored, key
        /// requests of other own devices stored, removed).
        case toDeviceProcessed(Result<ToDeviceReport, CryptoError>)
        /// Decryption met events whose room key is missing and recorded a request for each new
        /// session (persisted): they go to the account's other devices.
        case roomKeysMissing
        /// ``Effect/sendKeyRequests`` answered: how many requests and cancellations left, or why not.
        case keyRequestsSent(Result<Int, CryptoRequestError>)
        /// ``Effect/answerKeyRequests`` answered: what was forwarded and what waits, or why not.
        case keyRequestsAnswered(Result<KeyRequestAnswers, CryptoRequestError>)
        /// ``Effect/unwedgeSessions`` answered: how many devices got a new session, or why not.
        case sessionsUnwedged(Result<Int, CryptoRequestError>)
        /// A send needs the room's key to reach every recipient device (the caller waits for
        /// ``CryptoWork/shareOutcomes`` to hold the ticket's outcome). Taken only when `ready`.
        case roomKeyNeeded(EncryptedRoom, ShareTicket)
        /// ``Effect/loadRoomKeyFacts(_:round:)`` answered.
        case roomKeyFactsLoaded(RoomID, round: UInt64, Result<RoomKeyFacts, CryptoError>)
        /// ``Effect/claimOneTimeKeys(_:round:_:)`` answered: the devices that have an Olm session
        /// now (the others had no usable one-time key), or why not.
        case oneTimeKeysClaimed(RoomID, round: UInt64, Result<[ShareDevice], CryptoRequestError>)
        /// ``Effect/sendRoomKey(_:round:_:)`` answered.
        case roomKeySent(RoomID, round: UInt64, Result<RoomKeySent, CryptoRequestError>)
        /// The caller read the ticket's outcome: forget it.
        case shareOutcomeTaken(ShareTicket)
        /// Room keys entered the key backup's outbox outside the machine's own work (a backup was
        /// created or enabled): upload them.
        case backupKeysWaiting
        /// ``Effect/uploadBackup`` answered: how many keys still wait (or that the backup is no
        /// longer in use), or why not.
        case backupUploaded(Result<BackupUploadReport, CryptoRequestError>)
        /// A timer of this machine fired.
        case timerFired(CryptoTimer)
        /// Stop (sign-out, account switch).
        case stopped

        package static let allCaseNames = [
            "started", "accountLoaded", "syncCommitted", "usersTracked", "keysUploaded", "keysQueried",
            "toDeviceProcessed", "roomKeysMissing", "keyRequestsSent", "keyRequestsAnswered", "sessionsUnwedged",
            "roomKeyNeeded", "roomKeyFactsLoaded", "oneTimeKeysClaimed", "roomKeySent", "shareOutcomeTaken",
            "backupKeysWaiting", "backupUploaded", "timerFired", "stopped",
        ]

        package var caseNameLiteral: StaticString? {
            switch self {
            case .started: "started"
            case .accountLoaded: "accountLoaded"
            case .syncCommitted: "syncCommitted"
            case .usersTracked: "usersTracked"
            case .keysUploaded: "keysUploaded"
            case .keysQueried: "keysQueried"
            case .toDeviceProcessed: "toDeviceProcessed"
            case .roomKeysMissing: "roomKeysMissing"
            case .keyRequestsSent: "keyRequestsSent"
            case .keyRequestsAnswered: "keyRequestsAnswered"
            case .sessionsUnwedged: "sessionsUnwedged"
            case .roomKeyNeeded: "roomKeyNeeded"
            case .roomKeyFactsLoaded: "roomKeyFactsLoaded"
            case .oneTimeKeysClaimed: "oneTimeKeysClaimed"
            case .roomKeySent: "roomKeySent"
            case .shareOutcomeTaken: "shareOutcomeTaken"
            case .backupKeysWaiting: "backupKeysWaiting"
            case .backupUploaded: "backupUploaded"
            case .timerFired: "timerFired"
            case .stopped: "stopped"
            }
        }
    }

    /// What the interpreter must do.
    package enum Effect: MachineEffect, Equatable {
        /// Read the account (create and store one when there is none) and the tracking state;
        /// answer ``Event/accountLoaded(_:)``.
        case loadAccount
        /// Generate what `plan` asks for, store the account with it, then `POST keys/upload`;
        /// mark the keys published and store the account again when it answers. Keyed by
        /// ``CryptoMachine/uploadKey``.
        case uploadKeys(KeyUploadPlan)
        /// `POST keys/query` for these users (sorted), store their verified devices and clear their
        /// outdated marks in one transaction. Keyed by ``CryptoMachine/queryKey``.
        case queryKeys([UserID])
        /// Decrypt and apply the stored to-device messages in arrival order, each removed in
        /// the transaction that applies it. Keyed by ``CryptoMachine/toDeviceKey``.
        case processToDevice
        /// Send the stored room key requests not sent yet (`m.room_key_request` to every device of
        /// the account) and the cancellations of those whose key has arrived, each marked in the
        /// store once the server took it. Keyed by ``CryptoMachine/keyRequestsKey``.
        case sendKeyRequests
        /// Answer the stored requests of the account's other known devices with the sessions this
        /// device holds (`m.forwarded_room_key` over Olm, claiming one-time keys for devices
        /// without a session), removing what was answered or cannot be; requests of devices not
        /// known yet wait. Keyed by ``CryptoMachine/keyAnswersKey``.
        case answerKeyRequests
        /// Start a new Olm session with every device whose messages this device could not
        /// decrypt (a wedged session), at most once an hour per device: claim a one-time key for
        /// each in one `keys/claim`, and send each an `m.dummy` over the new session so that it
        /// uses it too. Keyed by ``CryptoMachine/unwedgeKey``.
        case unwedgeSessions
        /// Track the room's recipients and read what sharing its key depends on: their devices
        /// (and which lack an Olm session), who is outdated, the room's outbound session.
        /// Answers ``Event/roomKeyFactsLoaded(_:round:_:)``. Keyed by ``CryptoMachine/shareKey(_:)``.
        case loadRoomKeyFacts(EncryptedRoom, round: UInt64)
        /// `POST keys/claim` for these devices in one request, and create an Olm session from
        /// each signed one-time key that verifies. Answers ``Event/oneTimeKeysClaimed(_:round:_:)``.
        /// Keyed by ``CryptoMachine/shareKey(_:)``.
        case claimOneTimeKeys(RoomID, round: UInt64, [ShareDevice])
        /// Create the session (``SessionChoice/new``) or take the current one, Olm-encrypt its
        /// `m.room_key` for each device of the batch, send them in one `sendToDevice`, and record
        /// who has it. Answers ``Event/roomKeySent(_:round:_:)``. Keyed by ``CryptoMachine/shareKey(_:)``.
        case sendRoomKey(RoomID, round: UInt64, RoomKeyBatch)
        /// Upload the oldest batch of room keys waiting in the backup outbox (`PUT room_keys/keys`
        /// to the version in use), removing what the server took; a version deleted or replaced
        /// on the server is recorded as no longer in use. Answers ``Event/backupUploaded(_:)``.
        /// Keyed by ``CryptoMachine/backupKey``.
        case uploadBackup
        /// Fire ``Event/timerFired(_:)`` with ``CryptoTimer/retry`` after the delay.
        case scheduleRetry(after: Duration)
        /// Cancel the effect running under this key.
        case cancel(EffectKey)

        package var caseNameLiteral: StaticString? {
            switch self {
            case .loadAccount: "loadAccount"
            case .uploadKeys: "uploadKeys"
            case .queryKeys: "queryKeys"
            case .processToDevice: "processToDevice"
            case .sendKeyRequests: "sendKeyRequests"
            case .answerKeyRequests: "answerKeyRequests"
            case .unwedgeSessions: "unwedgeSessions"
            case .loadRoomKeyFacts: "loadRoomKeyFacts"
            case .claimOneTimeKeys: "claimOneTimeKeys"
            case .sendRoomKey: "sendRoomKey"
            case .uploadBackup: "uploadBackup"
            case .scheduleRetry: "scheduleRetry"
            case .cancel: "cancel"
            }
        }

        package var directive: EffectDirective {
            switch self {
            case .loadAccount: .perform
            case .uploadKeys: .keyed(CryptoMachine.uploadKey)
            case .queryKeys: .keyed(CryptoMachine.queryKey)
            case .processToDevice: .keyed(CryptoMachine.toDeviceKey)
            case .sendKeyRequests: .keyed(CryptoMachine.keyRequestsKey)
            case .answerKeyRequests: .keyed(CryptoMachine.keyAnswersKey)
            case .unwedgeSessions: .keyed(CryptoMachine.unwedgeKey)
            case .loadRoomKeyFacts(_, let round), .claimOneTimeKeys(_, let round, _), .sendRoomKey(_, let round, _):
                .keyed(CryptoMachine.shareKey(round))
            case .uploadBackup: .keyed(CryptoMachine.backupKey)
            case .scheduleRetry(let after): .timer(CryptoMachine.retryKey, .after(after))
            case .cancel(let key): .cancel(key)
            }
        }
    }

    /// Every ``State`` case name: the state ids of `StateCharts/Crypto.scxml`.
    package static var stateCaseNames: [String] { State.allCaseNames }

    /// Every ``Event`` case name: the event names of `StateCharts/Crypto.scxml`.
    package static var eventCaseNames: [String] { Event.allCaseNames }

    /// The event of the retry timer, which the host performs.
    package func event(firing timer: Effect) -> Event? {
        if case .scheduleRetry = timer { return .timerFired(.retry) }
        return nil
    }

    package func transition(from state: State, on event: Event) -> Transition<State, Effect> {
        switch state {
        case .idle, .failed:
            return idle(on: event)
        case .loading(let start):
            return loading(start, on: event)
        case .publishing(let work):
            return publishing(work, on: event)
        case .ready(let work):
            return ready(work, on: event)
        case .backingOff(let work):
            return backingOff(work, on: event)
        }
    }
}

// MARK: - Values

extension RetryBackoff {
    /// End-to-end encryption requests: 2 s doubling to 5 min.
    package static let crypto = RetryBackoff(initialDelay: .seconds(2), maximumDelay: .seconds(300))
}

/// What the machine starts from.
public struct CryptoStart: Sendable, Equatable {
    /// Randomness for retry jitter, drawn by the caller (machines draw none).
    package var jitterSeed: UInt64

    /// A start.
    package init(jitterSeed: UInt64) { self.jitterSeed = jitterSeed }
}

/// What the store knows when the account is loaded.
package struct CryptoAccountStatus: Sendable, Equatable {
    /// Whether the server has accepted this device's keys (a `keys/upload` answered 200).
    package var deviceKeysPublished: Bool
    /// How many one-time keys the account can hold (libolm: 100).
    package var maxOneTimeKeys: Int
    /// The server's last reported `signed_curve25519` one-time key count, if known.
    package var serverOneTimeKeyCount: Int?
    /// Tracked users whose device lists are outdated (persisted), to query.
    package var outdatedUsers: [UserID]
    /// Whether to-device messages wait in the store.
    package var hasPendingToDevice: Bool
    /// Whether room key requests (or their cancellations) wait to be sent.
    package var hasKeyRequestsToSend: Bool
    /// Whether other own devices' room key requests wait to be answered.
    package var hasKeyRequestsToAnswer: Bool
    /// Whether devices with wedged Olm sessions wait for new ones.
    package var hasWedgedSessions: Bool
    /// Whether room keys wait in the backup outbox (a backup is in use).
    package var hasBackupKeysWaiting: Bool

    /// A status.
    package init(
        deviceKeysPublished: Bool, maxOneTimeKeys: Int = 100, serverOneTimeKeyCount: Int? = nil,
        outdatedUsers: [UserID] = [], hasPendingToDevice: Bool = false, hasKeyRequestsToSend: Bool = false,
        hasKeyRequestsToAnswer: Bool = false, hasWedgedSessions: Bool = false, hasBackupKeysWaiting: Bool = false
    ) {
        self.hasBackupKeysWaiting = hasBackupKeysWaiting
        self.hasWedgedSessions = hasWedgedSessions
        self.hasKeyRequestsToSend = hasKeyRequestsToSend
        self.hasKeyRequestsToAnswer = hasKeyRequestsToAnswer
        self.deviceKeysPublished = deviceKeysPublished
        self.maxOneTimeKeys = maxOneTimeKeys
        self.serverOneTimeKeyCount = serverOneTimeKeyCount
        self.outdatedUsers = outdatedUsers
        self.hasPendingToDevice = hasPendingToDevice
    }
}

/// What the machine learns from a committed sync response.
package struct CryptoSyncSummary: Sendable, Equatable {
    /// `device_one_time_keys_count.signed_curve25519`, when the response has it.
    package var oneTimeKeyCount: Int?
    /// `device_unused_fallback_key_types`, when the response has it.
    package var unusedFallbackKeyTypes: [String]?
    /// Tracked users in `device_lists.changed` (persisted as outdated by the ingest).
    package var changedUsers: [UserID]
    /// How many to-device events the response carried.
    package var toDeviceEvents: Int

    /// A summary.
    package init(
        oneTimeKeyCount: Int? = nil, unusedFallbackKeyTypes: [String]? = nil, changedUsers: [UserID] = [],
        toDeviceEvents: Int = 0
    ) {
        self.oneTimeKeyCount = oneTimeKeyCount
        self.unusedFallbackKeyTypes = unusedFallbackKeyTypes
        self.changedUsers = changedUsers
        self.toDeviceEvents = toDeviceEvents
    }
}

/// What one `keys/upload` carries.
package struct KeyUploadPlan: Sendable, Hashable {
    /// The device keys (signed): only until the server has accepted them once.
    package var deviceKeys: Bool
    /// How many unpublished one-time keys the upload carries: the interpreter generates only
    /// what the account lacks of this number, so a plan redone after a crash re-sends the keys
    /// generated (and stored) before it, instead of making more.
    package var newOneTimeKeys: Int
    /// Upload a new fallback key (generated unless an unpublished one is already stored): the
    /// first one, or a replacement for one the server has handed out.
    package var rotateFallbackKey: Bool

    /// A plan.
    package init(deviceKeys: Bool = false, newOneTimeKeys: Int = 0, rotateFallbackKey: Bool = false) {
        self.deviceKeys = deviceKeys
        self.newOneTimeKeys = newOneTimeKeys
        self.rotateFallbackKey = rotateFallbackKey
    }

    /// Whether there is anything to upload.
    package var isEmpty: Bool { !deviceKeys && newOneTimeKeys == 0 && !rotateFallbackKey }

    /// Both plans' content in one upload.
    package func merged(with other: KeyUploadPlan) -> KeyUploadPlan {
        KeyUploadPlan(
            deviceKeys: deviceKeys || other.deviceKeys, newOneTimeKeys: max(newOneTimeKeys, other.newOneTimeKeys),
            rotateFallbackKey: rotateFallbackKey || other.rotateFallbackKey)
    }
}

/// What a `keys/query` found.
package struct KeyQueryReport: Sendable, Equatable {
    /// Users whose devices are now up to date.
    package var users: [UserID]
    /// Devices refused: a bad self-signature, or a known device whose keys changed (flagged).
    package var refusedDevices: Int
    /// Users the answer did not speak for (their server is in `failures`, or they are not
    /// listed): still outdated in the store, with the devices they had; queried again when a send
    /// or a decryption needs them, or at the next start.
    package var unanswered: [UserID]
    /// Room keys held for devices not known yet were stored (the devices are now): they wait
    /// for the key backup.
    package var roomKeysReleased: Bool

    /// A report.
    package init(
        users: [UserID], refusedDevices: Int = 0, unanswered: [UserID] = [], roomKeysReleased: Bool = false
    ) {
        self.roomKeysReleased = roomKeysReleased
        self.users = users
        self.refusedDevices = refusedDevices
        self.unanswered = unanswered
    }
}

/// Everything in progress.
public struct CryptoWork: Sendable, Equatable {
    /// How many one-time keys the account can hold.
    package var maxOneTimeKeys: Int
    /// The server's last reported one-time key count.
    package var serverOneTimeKeyCount: Int?
    /// The `keys/upload` in flight, or the one to redo after a backoff.
    package var upload: KeyUploadPlan?
    /// Whether ``upload`` is in flight now (not waiting for a retry).
    package var isUploading: Bool
    /// The users of the `keys/query` in flight.
    package var querying: [UserID]?
    /// Users to query next (changed while a query ran, or after a failed one).
    package var outdated: Set<UserID>
    /// Whether to-device processing is in flight.
    package var isProcessingToDevice: Bool
    /// Whether to-device messages arrived (or a processing failed) and wait to be processed.
    package var toDevicePending: Bool
    /// Transient failures since the last success: the attempt number of the next retry.
    package var failures: Int
    /// The jitter stream of retry delays.
    package var jitter: JitterSource
    /// Room key requests or cancellations wait to be sent (recorded, or a sending failed).
    package var keyRequestsPending: Bool = false
    /// Whether ``CryptoMachine/Effect/sendKeyRequests`` is in flight.
    package var isSendingKeyRequests: Bool = false
    /// Other own devices' room key requests wait to be answered.
    package var keyAnswersPending: Bool = false
    /// Whether ``CryptoMachine/Effect/answerKeyRequests`` is in flight.
    package var isAnsweringKeyRequests: Bool = false
    /// Devices whose Olm sessions are wedged wait for new sessions (stored).
    package var unwedgePending: Bool = false
    /// ``CryptoMachine/Effect/unwedgeSessions`` is in flight.
    package var isUnwedging: Bool = false
    /// Room keys may wait in the backup outbox (stored, or an upload left some).
    package var backupPending: Bool = false
    /// ``CryptoMachine/Effect/uploadBackup`` is in flight.
    package var isUploadingBackup: Bool = false
    /// Some requests came from own devices not known yet: answered again after the next
    /// successful `keys/query`.
    package var answersAwaitDevices: Bool = false
    /// The rooms whose key is being shared: one round per room at a time.
    package var sharing: [RoomID: RoomKeyShare] = [:]
    /// How sends' requests for their room's key ended, until each caller takes its outcome.
    package var shareOutcomes: [ShareTicket: ShareOutcome] = [:]
    /// The number of the next round of sharing.
    package var nextShareRound: UInt64 = 1

    /// Work.
    package init(
        maxOneTimeKeys: Int, serverOneTimeKeyCount: Int? = nil, upload: KeyUploadPlan? = nil, isUploading: Bool = false,
        querying: [UserID]? = nil, outdated: Set<UserID> = [], isProcessingToDevice: Bool = false,
        toDevicePending: Bool = false, failures: Int = 0, jitter: JitterSource
    ) {
        self.maxOneTimeKeys = maxOneTimeKeys
        self.serverOneTimeKeyCount = serverOneTimeKeyCount
        self.upload = upload
        self.isUploading = isUploading
        self.querying = querying
        self.outdated = outdated
        self.isProcessingToDevice = isProcessingToDevice
        self.toDevicePending = toDevicePending
        self.failures = failures
        self.jitter = jitter
    }

    /// The one-time keys to add so that the server holds half of what the account can hold.
    package var oneTimeKeysToTopUp: Int {
        guard let count = serverOneTimeKeyCount else { return 0 }
        let target = maxOneTimeKeys / 2
        return count < target ? target - count : 0
    }
}

/// The crypto machine's timers.
package enum CryptoTimer: Sendable, Equatable, CaseNamed {
    /// The backoff delay is over.
    case retry
}

/// Why a crypto request failed.
package enum CryptoRequestError: Error, Sendable, Hashable, CaseNamed {
    /// No usable answer (offline, reset, timeout). Retried.
    case network
    /// A 5xx answer. Retried.
    case server(status: Int)
    /// 429; the next attempt waits at least `retryAfter` (clamped).
    case rateLimited(retryAfter: Duration?)
    /// The access token was refused: retried after the backoff (the session refreshes it).
    case unauthorized
    /// Another 4xx. Not retried.
    case rejected(status: Int, errorCode: String)
    /// The store could not record what the request needs before it leaves, for a reason that
    /// passes (full, busy). Retried.
    case storeUnavailable(StoreFailure)
    /// The store or the crypto driver failed for good.
    case local(CryptoError)

    /// Whether retrying later can succeed.
    package var isRetryable: Bool {
        switch self {
        case .network, .server, .rateLimited, .unauthorized, .storeUnavailable: true
        case .rejected, .local: false
        }
    }

    var retryAfter: Duration? {
        if case .rateLimited(let retryAfter) = self { return retryAfter }
        return nil
    }
}

/// A permanent failure of the crypto work.
public enum CryptoError: Error, Sendable, Hashable, CaseNamed {
    /// The store failed (a transient failure retried by the caller did not pass).
    case store(StoreFailure)
    /// The account's pickle could not be read with its key (the key is lost or the data corrupt).
    case accountUnreadable
    /// The crypto driver failed.
    case driver(String)
    /// The server refused the device's keys for good.
    case keysRejected(status: Int, errorCode: String)
}

/// What a committed sync response says about devices and keys, as chat's sync loop hands it to
/// the crypto module after the commit (which turns it into a ``CryptoSyncSummary`` after
/// applying the device-list changes its inbox received in the sync's transaction).
package struct SyncDeviceChanges: Sendable, Equatable {
    /// `device_one_time_keys_count.signed_curve25519`, when present.
    package var oneTimeKeyCount: Int?
    /// `device_unused_fallback_key_types`, when present.
    package var unusedFallbackKeyTypes: [String]?
    /// Whether `device_lists.changed` or `.left` named anyone (stored for the crypto module).
    package var hasDeviceListChanges: Bool
    /// How many to-device events were stored.
    package var toDeviceEvents: Int
    /// Whether any room's state changed (members to track may have joined or left).
    package var roomsChanged: Bool
    /// The joined and invited members of the account's encrypted rooms, when rooms changed
    /// (read by chat from its room state after the commit): the users to track.
    package var encryptedRoomMembers: [UserID]?

    /// Changes.
    package init(
        oneTimeKeyCount: Int? = nil, unusedFallbackKeyTypes: [String]? = nil, hasDeviceListChanges: Bool = false,
        toDeviceEvents: Int = 0, roomsChanged: Bool = false, encryptedRoomMembers: [UserID]? = nil
    ) {
        self.encryptedRoomMembers = encryptedRoomMembers
        self.oneTimeKeyCount = oneTimeKeyCount
        self.unusedFallbackKeyTypes = unusedFallbackKeyTypes
        self.hasDeviceListChanges = hasDeviceListChanges
        self.toDeviceEvents = toDeviceEvents
        self.roomsChanged = roomsChanged
    }
}

/// Where the account's crypto work is.
public enum CryptoState: Sendable, Equatable, CaseNameListing {
    /// Not running (signed out, or not started yet).
    case idle
    /// Reading (or creating) the account and the tracking state from the store.
    case loading(CryptoStart)
    /// The device keys have never been accepted by the server: the first `keys/upload`
    /// (device keys, one-time keys, fallback key) is in flight. Nothing else leaves first.
    case publishing(CryptoWork)
    /// Published; topping up keys, querying devices and processing to-device messages as needed.
    case ready(CryptoWork)
    /// A request failed transiently (several in a row); what it was doing is
    /// redone when the retry timer fires. Results of requests still in flight are applied.
    case backingOff(CryptoWork)
    /// A permanent failure (the store cannot hold the account, the server refuses the keys):
    /// nothing is sent until the machine is started again.
    case failed(CryptoError)

    public static let allCaseNames = ["idle", "loading", "publishing", "ready", "backingOff", "failed"]

    public var caseNameLiteral: StaticString? {
        switch self {
        case .idle: "idle"
        case .loading: "loading"
        case .publishing: "publishing"
        case .ready: "ready"
        case .backingOff: "backingOff"
        case .failed: "failed"
        }
    }

    /// The work in progress, when there is any.
    package var work: CryptoWork? {
        switch self {
        case .publishing(let work), .ready(let work), .backingOff(let work): work
        case .idle, .loading, .failed: nil
        }
    }
}
