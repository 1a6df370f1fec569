// The Symorva client contract, language-neutral, in TypeScript notation: the source of truth for
// the JSON protocol that `libSymorvaFFI` (include/symorva.h) and `symorva serve --stdio` speak
// (docs/contract.md), and the interfaces every shell implements over it.
//
// Two halves:
// 1. The wire: `Methods` (every request method: its params and result), `Paths` (every
//    observable value a `subscribe` may name), the messages and the error shape. A unit test
//    (ContractSchemaTests) fails when the Swift engine and `Methods`/`Paths` disagree, and
//    `tsc --strict --noEmit` type-checks this file (Scripts/test).
// 2. The product interfaces (`CommunityClient` and its clients, `Observable<T>`,
//    `TransferOutcome`), as the client SDK page gives them, implemented by clients/node.

// ───────────────────────────── Values ─────────────────────────────

/** A Matrix user ID, `@alice:example.org`. */
export type UserID = string;
/** A room ID, `!abc:example.org`. */
export type RoomID = string;
/** An event ID, `$abc`. */
export type EventID = string;
/** An opaque handle: belongs to the account it was made for; `accountEnded` after. */
export type Handle = string;
/** Milliseconds since 1970 (instants) or milliseconds (durations). */
export type Milliseconds = number;

export interface Account {
  userID: UserID;
  deviceID: string;
  homeserverURL: string;
}

export type SessionState =
  | { kind: "launching" }
  | { kind: "signedOut" }
  | { kind: "signingIn" }
  | { kind: "restoring"; userID: UserID }
  | { kind: "signedIn"; account: Account }
  | { kind: "softLoggedOut"; account: Account }
  | { kind: "switching"; userID: UserID }
  | { kind: "signingOut"; userID: UserID }
  | { kind: "unavailable"; userID: UserID; error: ContractError };

export interface MessagePreview {
  eventID: EventID;
  sender: UserID;
  type: string;
  timestamp: Milliseconds;
  body?: string;
  messageType?: string;
  isRedacted: boolean;
}

export interface ConversationListItem {
  id: RoomID;
  name: string;
  topic?: string;
  avatarURL?: string;
  lastMessage?: MessagePreview;
  unreadCount: number;
  highlightCount: number;
  membership: "joined" | "invited";
  isFavourite: boolean;
  isLowPriority: boolean;
  isPinned: boolean;
  isMuted: boolean;
  isEncrypted: boolean;
  latestActivity?: Milliseconds;
}

export interface ConversationList {
  status: "signedOut" | "loading" | "loaded";
  userID?: UserID;
  items: ConversationListItem[];
}

export interface MediaInfo {
  body: string;
  url?: string;
  fileName?: string;
  durationMs?: number;
  mimeType?: string;
  size?: number;
  width?: number;
  height?: number;
  /** The file is encrypted (an encrypted room's `file`): it has no `url`. */
  isEncrypted: boolean;
  /** The sender attached a thumbnail (`info.thumbnail_url` or `info.thumbnail_file`). */
  hasThumbnail: boolean;
}

export type TimelineItemContent =
  | { kind: "message"; messageKind: "text" | "notice" | "emote"; body: string }
  | { kind: "image"; media: MediaInfo }
  | { kind: "file"; media: MediaInfo }
  | { kind: "audio"; media: MediaInfo }
  | { kind: "video"; media: MediaInfo }
  | { kind: "membership"; userID: UserID; membership?: string; displayName?: string }
  | { kind: "stateChange"; sentence: string }
  | { kind: "redacted" }
  | { kind: "unableToDecrypt"; reason: string }
  | { kind: "unsupported"; type: string };

export type SendState =
  | { kind: "sending" }
  | { kind: "sent"; eventID: EventID }
  | { kind: "failed"; reason: string; details?: Record<string, unknown> };

export interface TimelineItem {
  id: string;
  eventID?: EventID;
  transactionID?: string;
  sender: UserID;
  senderDisplayName?: string;
  isOwn: boolean;
  timestamp?: Milliseconds;
  content: TimelineItemContent;
  isEdited: boolean;
  reactions: { key: string; senders: UserID[]; includesOwn: boolean }[];
  inReplyTo?: EventID;
  readBy: UserID[];
  sendState?: SendState;
  isEncrypted: boolean;
}

export interface TimelinePagination {
  isObserved: boolean;
  isPaginating: boolean;
  hasReachedStart: boolean;
  lastError?: ContractError;
}

/** How far an attachment's upload has come (`totalBytes` when known). */
export interface UploadProgress {
  transactionID: string;
  completedBytes: number;
  totalBytes?: number;
}

export interface SendReceipt {
  receipt: Handle;
  roomID: RoomID;
  transactionIDs: string[];
  state: SendState;
}

/** A decimal amount at its precision: `{"value": "25.00", "precision": 2}`. */
export interface Amount {
  value: string;
  precision: number;
}
export interface Asset {
  code: string;
  precision: number;
}
export interface Balance {
  asset: Asset;
  amount: Amount;
}
export interface TransferSummary {
  draftID: string;
  recipient: UserID;
  asset: Asset;
  amount: Amount;
  fee: Amount;
  total: Amount;
}
export interface Transfer {
  id: string;
  commandID: string;
  summary: TransferSummary;
}
/** Why a transfer did not happen: the case name, with its values (`attemptsLeft`, …). */
export interface FailureReason {
  kind:
    | "wrongPIN" | "lockedOut" | "insufficientFunds" | "draftExpired" | "recipientUnknown" | "invalidAmount"
    | "assetUnknown" | "invalidDraft" | "notReceived" | "verification" | "commandIDReused" | "storeUnavailable"
    | "serviceUnreachable" | "rateLimited" | "rejected";
  attemptsLeft?: number;
  retryAfter?: Milliseconds | null;
  code?: string;
  [detail: string]: unknown;
}
export interface PendingCommand {
  pending: Handle;
  commandID: string;
  summary: TransferSummary;
}
/** How a confirmation or a query ended; `unknown` is queried (`pending.query`), never resent. */
export type TransferOutcome =
  | { kind: "settled"; transfer: Transfer }
  | { kind: "failed"; reason: FailureReason }
  | { kind: "unknown"; pending: PendingCommand };

export interface TransferDraft {
  draft: Handle;
  summary: TransferSummary;
  verificationMethods: string[];
}
export interface LedgerEntry {
  transferID: string;
  kind: string;
  direction: string;
  commandID?: string;
  sender?: UserID;
  recipient: UserID;
  asset: Asset;
  amount: Amount;
  fee: Amount;
  total: Amount;
  createdAt: Milliseconds;
}
/** The transfer machine's state by case name (`drafted`, `confirming`, `unknown`, `settled`, …). */
export interface TransferState {
  kind: string;
}

export type ParticipantRole = "stage" | "listener";
export interface MeetingRoom {
  room: Handle;
  roomID: RoomID;
  meetingID: string;
  role: ParticipantRole;
}
/** A direction's audio level: RMS of the last 100 ms in dBFS (−100 silence), speaking above −45. */
export interface AudioLevel {
  decibels: number;
  isSpeaking: boolean;
}
export interface MeetingParticipant {
  userID: UserID;
  role: ParticipantRole;
  handRaised: boolean;
}

export type GrantScope =
  | { kind: "selectedMessages"; eventIDs: EventID[] }
  | { kind: "conversation"; since: EventID };
export type GrantStatus =
  | "awaitingConsent" | "declined" | "requesting" | "active" | "summarizing" | "revoking" | "revoked" | "expired"
  | "failed";
export interface GrantInfo {
  id: string;
  roomID: RoomID;
  scope: GrantScope;
  expiresAt: Milliseconds;
  status: GrantStatus;
}
export interface DirectoryMember {
  userID: UserID;
  displayName?: string;
  avatarURL?: string;
  roles: string[];
}
/** An HTTP pusher: where the homeserver posts this installation's notifications. */
export interface Pusher {
  pushkey: string;
  appID: string;
  appDisplayName: string;
  deviceDisplayName: string;
  profileTag: string;
  language: string;
  gatewayURL: string;
  format: "event_id_only" | "full";
}
export type PusherState =
  | { kind: "unregistered" }
  | { kind: "registering" | "registered" | "removing"; pusher: Pusher }
  | { kind: "failed"; pusher: Pusher; error: ContractError };
/** One of the account's devices, as the homeserver lists it joined with what this device's encryption verified. */
export interface AccountDevice {
  deviceID: string;
  displayName?: string;
  lastSeen?: Milliseconds;
  isCurrent: boolean;
  /** Absent for a device without end-to-end encryption, or not queried yet. */
  ed25519Key?: string;
  /** The server once showed other keys for this known device: refused, not trusted until a human looks. */
  keysChanged: boolean;
  /** Absent while its keys are not known here. */
  trust?: DeviceTrustLevel;
}
export type DeviceTrustLevel = "verified" | "crossSigned" | "unverified";
export type HistoryVisibility = "world_readable" | "shared" | "invited" | "joined";
/** The account's cross-signing identity as this device sees it. */
export type IdentityState =
  | { kind: "none" } | { kind: "needsRecovery" } | { kind: "ready" } | { kind: "identityChanged"; userID: UserID };
/** Where the server-side key backup is. */
export type KeyBackupState =
  | { kind: "disabled" } | { kind: "uploading"; remaining: number } | { kind: "upToDate" }
  | { kind: "restoring"; imported: number; total: number };
export interface KeyBackupStatus {
  /** The backup version this device uploads to, if any. */
  version: string | null;
  /** Room keys stored and not yet in the backup. */
  waiting: number;
  stopReason: "deleted" | "replaced" | null;
}
export interface RestoredKeys { imported: number; total: number }
/** One emoji of the short authentication string (the spec's table; `description` its English name). */
export interface VerificationEmoji { character: string; description: string }
/**
 * Where an interactive verification is: `showingCode` carries the 7 emoji and 3 decimals both devices show
 * (the person compares, then `verification.confirm` or `verification.mismatch`); `otherDeviceScanned` that the
 * other device scanned this device's QR code and waits for the person here to confirm it (QR flows are not in
 * this protocol yet: a flow reaches it only when the Swift API showed the code); `cancelled` the spec's code
 * (`m.user`, `m.timeout`, `m.mismatched_sas`, …) and whether this side cancelled.
 */
export type VerificationState =
  | { kind: "requested" }
  | { kind: "incoming" }
  | { kind: "ready" }
  | { kind: "exchangingKeys" }
  | { kind: "showingCode"; emoji: VerificationEmoji[]; decimals: number[] }
  | { kind: "confirmed" }
  | { kind: "otherDeviceScanned" }
  | { kind: "verified" }
  | { kind: "cancelled"; code: string; byUs: boolean };
/** A verification flow: its handle (of the account it was made for), the other side, its state now. */
export interface VerificationInfo {
  verification: Handle;
  transactionID: string;
  otherUserID: UserID;
  /** Known once a device answered (a request to every device of the user learns it then). */
  otherDeviceID: string | null;
  state: VerificationState;
}
/** A device of a user, as verified from its self-signed keys, and how far this device trusts it. */
export interface CryptoDevice {
  userID: UserID;
  deviceID: string;
  ed25519Key: string;
  displayName: string | null;
  keysChanged: boolean;
  trust: DeviceTrustLevel;
}
export type RoomEncryptionState = "unknown" | "notEncrypted" | "encrypted";
/** A room a space links to (`m.space.child`). */
export interface SpaceChildLink { roomID: RoomID; via: string[]; isSuggested: boolean }
/** A room or space of a space's hierarchy, as the server summarizes it. */
export interface SpaceRoom {
  id: RoomID;
  name?: string;
  topic?: string;
  canonicalAlias?: string;
  avatarURL?: string;
  joinedMembers: number;
  joinRule?: string;
  isSpace: boolean;
  isWorldReadable: boolean;
  children: SpaceChildLink[];
}
/** A space's hierarchy as loaded so far (the path `hierarchy.state`). */
export interface HierarchyState {
  rooms: SpaceRoom[];
  isComplete: boolean;
  isLoading: boolean;
  failure?: ContractError;
}
export interface SpaceHierarchyInfo { hierarchy: Handle; spaceID: RoomID; pageSize: number }
export type PushRuleKind = "override" | "content" | "room" | "sender" | "underride";
export interface PushRule {
  kind: PushRuleKind;
  ruleID: string;
  isEnabled: boolean;
  isDefault: boolean;
  pattern?: string;
  notifies: boolean;
}
/** The event a push names, fetched for display; an encrypted one has no body. */
export interface PushedEvent {
  eventID: EventID;
  roomID: RoomID;
  sender: UserID;
  type: string;
  originServerTimestamp?: Milliseconds;
  body?: string;
  isEncrypted: boolean;
}
export interface NotificationCounts {
  notifications: number;
  highlights: number;
  rooms: Record<RoomID, { notifications: number; highlights: number }>;
}
/** An entry of the homeserver's user directory. */
export interface DirectoryUser {
  userID: UserID;
  displayName?: string;
  avatarURL?: string;
}
/** A room listed in a homeserver's public room directory. */
export interface PublicRoom {
  roomID: RoomID;
  name?: string;
  topic?: string;
  canonicalAlias?: string;
  avatarURL?: string;
  joinedMemberCount: number;
  isPubliclyJoinable: boolean;
  guestCanJoin: boolean;
  isWorldReadable: boolean;
}
/** The results of a search so far: every page loaded for its latest term. */
export interface SearchResults<T> {
  term: string;
  items: T[];
  hasMore: boolean;
  totalEstimate?: number;
  pageCount: number;
  /** The failure of the last `loadMore`, the pages before it kept. */
  lastError?: ContractError;
}
/** A search's state; an answer for an older term is dropped, never shown. */
export type SearchState<T> =
  | { kind: "idle" }
  | { kind: "searching"; term: string }
  | { kind: "loaded"; results: SearchResults<T> }
  | { kind: "loadingMore"; results: SearchResults<T> }
  | { kind: "failed"; term: string; error: ContractError };

export interface Grant extends GrantInfo {
  grant: Handle;
}
export interface ConsentSheet {
  roomID: RoomID;
  scope: GrantScope;
  purpose: string;
  recipient: string;
  lifetime: Milliseconds;
  /** An English sentence a shell without its own design shows. */
  text: string;
}
export interface Summary {
  grantID: string;
  backend: string;
  itemCount: number;
  points: { text: string; eventIDs: EventID[] }[];
  citedEventIDs: EventID[];
}

// ───────────────────────────── Errors ─────────────────────────────

/** The error of an answer. `code` is the Swift error's case name, stable across releases. */
export interface ContractError {
  domain:
    | "contract" | "session" | "chat" | "media" | "wallet" | "meetings" | "studio" | "directory" | "push"
    | "encryption" | "verification" | "amount";
  code: string;
  message: string;
  details?: Record<string, unknown>;
}
/** The protocol's own codes (`domain: "contract"`). */
export type ContractErrorCode =
  | "parseError" | "invalidRequest" | "requestTooLarge" | "methodNotFound" | "invalidParams" | "invalidHandle"
  | "unknownID" | "moduleDisabled" | "invalidManifest" | "closed" | "internal";
/** Every handle's feature answers this once its account was signed out or switched away from. */
export type AccountEnded = ContractError & { code: "accountEnded" };

// ───────────────────────────── The wire ─────────────────────────────

type Empty = Record<string, never>;

/** Every request method: `params` and `result`. */
export interface Methods {
  /** Which optional modules the manifest enables: a disabled one's client is absent. */
  "community.modules": {
    params: Empty;
    result: { meetings: boolean; wallet: boolean; aiStudio: boolean; directory: boolean };
  };
  "session.signIn": { params: { username: string; password: string }; result: Account };
  "session.register": { params: { username: string; password: string }; result: Account };
  "session.reauthenticate": { params: { password: string }; result: Account };
  "session.signOut": { params: Empty; result: Empty };
  "session.switchAccount": { params: { userID: UserID }; result: Account };
  "session.removeAccount": { params: { userID: UserID }; result: Empty };
  /** The account's devices, this one first, then by when they were last seen. */
  "session.devices": { params: Empty; result: AccountDevice[] };
  "session.renameDevice": { params: { deviceID: string; name: string }; result: Empty };
  /** Behind the password stage: `session.invalidCredentials` for a wrong password (the device stays). */
  "session.removeDevice": { params: { deviceID: string; password: string }; result: Empty };

  "chat.refresh": { params: Empty; result: Empty };
  "chat.createRoom": {
    params: { name?: string; topic?: string; invitees?: UserID[]; isDirect?: boolean; isEncrypted?: boolean };
    result: { roomID: RoomID };
  };
  "chat.join": { params: { roomIDOrAlias: string }; result: { roomID: RoomID } };
  "chat.leave": { params: { roomID: RoomID }; result: Empty };
  "chat.invite": { params: { roomID: RoomID; userID: UserID }; result: Empty };
  /** Power levels checked first. `allowedRooms` for the restricted rules (members of those may join). */
  "chat.setJoinRule": {
    params: {
      roomID: RoomID;
      rule: "public" | "invite" | "knock" | "restricted" | "knock_restricted";
      allowedRooms?: RoomID[];
    };
    result: Empty;
  };
  "chat.kick": { params: { roomID: RoomID; userID: UserID; reason?: string }; result: Empty };
  "chat.ban": { params: { roomID: RoomID; userID: UserID; reason?: string }; result: Empty };
  /** Optimistic: applied at once, rolled back on failure. */
  "chat.setFlag": {
    params: { roomID: RoomID; flag: "favourite" | "lowPriority" | "pinned" | "muted"; value: boolean };
    result: Empty;
  };
  // Room management: each checks the account's power level first (chat.insufficientPowerLevel) and waits for the server.
  "chat.setRoomName": { params: { roomID: RoomID; name: string }; result: Empty };
  "chat.setRoomTopic": { params: { roomID: RoomID; topic: string }; result: Empty };
  /** Uploads the image file at `path` (a path of the host's) and makes it the room's avatar. */
  "chat.setRoomAvatar": { params: { roomID: RoomID; path: string; contentType: string }; result: { avatarURL: string } };
  "chat.setHistoryVisibility": { params: { roomID: RoomID; visibility: HistoryVisibility }; result: Empty };
  "chat.setPowerLevel": { params: { roomID: RoomID; userID: UserID; level: number }; result: Empty };
  "chat.knock": { params: { roomIDOrAlias: string; reason?: string; via?: string[] }; result: { roomID: RoomID } };
  /** The users knocking on the room. */
  "chat.knocks": { params: { roomID: RoomID }; result: { userIDs: UserID[] } };
  "chat.acceptKnock": { params: { roomID: RoomID; userID: UserID }; result: Empty };
  "chat.denyKnock": { params: { roomID: RoomID; userID: UserID; reason?: string }; result: Empty };
  // One's own profile and the users one ignores.
  "chat.setDisplayName": { params: { name: string }; result: Empty };
  /** Uploads the image file at `path` (a path of the host's) and makes it the account's avatar. */
  "chat.setAvatar": { params: { path: string; contentType: string }; result: { avatarURL: string } };
  "chat.ignore": { params: { userID: UserID }; result: Empty };
  "chat.unignore": { params: { userID: UserID }; result: Empty };
  "chat.ignoredUsers": { params: Empty; result: { userIDs: UserID[] } };
  // Spaces: the joined ones and their links from the synced state; a hierarchy paged from the server as a handle.
  "chat.joinedSpaces": { params: Empty; result: { id: RoomID; name?: string }[] };
  /** From the synced state, which keeps no `suggested`: `isSuggested` is false here (the hierarchy carries it). */
  "chat.roomsOfSpace": { params: { spaceID: RoomID }; result: SpaceChildLink[] };
  "chat.createSpace": { params: { name: string; topic?: string; isPublic?: boolean }; result: { roomID: RoomID } };
  /** Power level for `m.space.child` checked first. `via` defaults to the account's server. */
  "chat.addToSpace": { params: { roomID: RoomID; spaceID: RoomID; via?: string[]; suggested?: boolean }; result: Empty };
  "chat.removeFromSpace": { params: { roomID: RoomID; spaceID: RoomID }; result: Empty };
  /** Joins a room through the servers a space's link names. */
  "chat.joinVia": { params: { roomID: RoomID; via: string[] }; result: { roomID: RoomID } };
  "chat.hierarchy": { params: { spaceID: RoomID; pageSize?: number }; result: SpaceHierarchyInfo };
  /** The community's space (the manifest's `community.space`). */
  "chat.communityRooms": { params: { pageSize?: number }; result: SpaceHierarchyInfo };
  /** The next page; answers the state after it. */
  "hierarchy.loadNextPage": { params: { hierarchy: Handle }; result: HierarchyState };
  "chat.conversation": { params: { roomID: RoomID }; result: { conversation: Handle; roomID: RoomID } };
  "chat.conversation.send": {
    params: { conversation: Handle; text: string; kind?: "text" | "notice" | "emote"; replyingTo?: EventID };
    result: SendReceipt;
  };
  "chat.conversation.edit": { params: { conversation: Handle; eventID: EventID; text: string }; result: SendReceipt };
  "chat.conversation.paginateBackwards": { params: { conversation: Handle; count?: number }; result: TimelinePagination };
  "chat.conversation.react": { params: { conversation: Handle; eventID: EventID; key: string }; result: Empty };
  "chat.conversation.redact": { params: { conversation: Handle; eventID: EventID }; result: Empty };
  "chat.conversation.markRead": { params: { conversation: Handle; eventID?: EventID }; result: Empty };
  /** A failed message again, with its transaction ID (idempotent), or dropped from the queue. */
  "chat.conversation.resend": { params: { conversation: Handle; transactionID: string }; result: Empty };
  "chat.conversation.cancelSend": { params: { conversation: Handle; transactionID: string }; result: Empty };
  /**
   * Sends the file at `path` (a path of the host's, copied when queued: it may change afterwards) through the
   * room's send queue: its URI reserved, its bytes uploaded (the path `conversation.uploads` shows the progress),
   * its event sent; encrypted first in an encrypted room. `kind` follows `contentType` and `fileName` the path
   * unless given; `caption` is the event's body. `chat.conversation.cancelSend` aborts a running upload.
   */
  "chat.conversation.sendAttachment": {
    params: {
      conversation: Handle;
      path: string;
      contentType: string;
      kind?: "image" | "file" | "audio" | "video";
      fileName?: string;
      caption?: string;
      width?: number;
      height?: number;
      durationMs?: number;
    };
    result: SendReceipt;
  };
  /**
   * Saves the file of the timeline's message `eventID` (an image, file, audio or video; `chat.unknownEvent`
   * when the loaded timeline has no such message) to `path`, replaced whole or left untouched; with
   * `thumbnail`, the sender's thumbnail instead (`media.notFound` when it has none). An encrypted file's
   * ciphertext is checked against the event's SHA-256 before it is decrypted (`media.hashMismatch`: nothing
   * written). Errors in the domain "media" (MediaError's cases). Answers the bytes written.
   */
  "chat.conversation.download": {
    params: { conversation: Handle; eventID: EventID; path: string; thumbnail?: boolean };
    result: { size: number };
  };

  /** Turns on end-to-end encryption for the room; final. Nothing happens when it is on. */
  "chat.conversation.enableEncryption": { params: { conversation: Handle }; result: Empty };

  // Encryption management of the active account (errors in the domain "encryption";
  // encryption.notReady without a signed-in account with encryption). Device verification is
  // not here (issue 29: verification.*).
  "encryption.identityState": { params: Empty; result: IdentityState };
  /** Creates the identity (if none), secret storage and a key backup; the recovery key: show it once. */
  "encryption.recovery.setUp": { params: { passphrase?: string }; result: { recoveryKey: string } };
  /** The identity from secret storage, then the key backup (`null` when secret storage holds no backup key). */
  "encryption.recovery.restore": {
    params: { recoveryKey: string; isPassphrase?: boolean };
    result: { backup: RestoredKeys | null };
  };
  /** "I lost my recovery key": a new identity and secret storage, behind the password stage. */
  "encryption.recovery.reset": { params: { password: string; passphrase?: string }; result: { recoveryKey: string } };
  "encryption.backup.status": { params: Empty; result: KeyBackupStatus };
  /** Compares with the server's current version; stops uploading when it was replaced or deleted. */
  "encryption.backup.check": { params: Empty; result: KeyBackupStatus };
  "encryption.backup.create": { params: Empty; result: { version: string } };
  /** The backup's private key in base64 (as secret storage holds it). */
  "encryption.backup.enable": { params: { privateKey: string }; result: { version: string } };
  "encryption.backup.restore": { params: Empty; result: RestoredKeys };
  "encryption.backup.delete": { params: Empty; result: Empty };
  /** The user's devices as last queried (users sharing an encrypted room with the account, and the account). */
  "encryption.devices": { params: { userID: UserID }; result: CryptoDevice[] };
  "encryption.identityChanged": { params: { userID: UserID }; result: { changed: boolean } };
  "encryption.acknowledgeIdentityChange": { params: { userID: UserID }; result: { acknowledged: boolean } };

  // Interactive verification (emoji or decimals, to-device) of the active account; errors in the domain
  // "verification" (notReady without an account with encryption, unknownDevice, unavailable). A flow is a handle.
  /**
   * Asks `userID` (this account for one of its own devices) to verify: `deviceID`, else every device of the
   * user. With `startDirectly` (needs `deviceID`) the SAS starts at once, without a request. On success the
   * other device (or the other user's master key) is signed and the signature uploaded.
   */
  "verification.start": {
    params: { userID: UserID; deviceID?: string; startDirectly?: boolean };
    result: VerificationInfo;
  };
  /** An incoming request (sends `ready`) or an incoming start (sends `accept`). */
  "verification.accept": { params: { verification: Handle }; result: Empty };
  /** Starts the emoji comparison on a `ready` flow. */
  "verification.startSAS": { params: { verification: Handle }; result: Empty };
  /** Both devices show the same code. */
  "verification.confirm": { params: { verification: Handle }; result: Empty };
  /** The codes differ: cancelled with `m.mismatched_sas`. */
  "verification.mismatch": { params: { verification: Handle }; result: Empty };
  /** Cancels the flow (`m.user`). */
  "verification.cancel": { params: { verification: Handle }; result: Empty };

  "wallet.refreshBalances": { params: Empty; result: Balance[] };
  "wallet.history": { params: { limit?: number }; result: LedgerEntry[] };
  "wallet.prepareTransfer": { params: { recipient: UserID; asset: string; amount: string }; result: TransferDraft };
  "wallet.setPIN": { params: { pin: string; oldPIN?: string }; result: Empty };
  "wallet.resumePendingCommands": { params: Empty; result: PendingCommand[] };
  /** Without `pin`, the host is asked: a `hostRequest` of kind `pin`. */
  "draft.confirm": { params: { draft: Handle; pin?: string }; result: TransferOutcome };
  "draft.cancel": { params: { draft: Handle }; result: Empty };
  /** Queries the original command; never resubmits. */
  "pending.query": { params: { pending: Handle }; result: TransferOutcome };

  /** `tone`: a sine of that many hertz as the stage microphone (hosts without a capture device). */
  "meetings.join": { params: { roomID: RoomID; broadcast?: boolean; tone?: number }; result: MeetingRoom };
  /** Stage only (else `meetings.wrongRole`): connects the real-time media session; returns once audio flows. */
  "room.media.connect": { params: { room: Handle }; result: Empty };
  /** Stage only: off stops sending audio and shows the member muted; remembered while connecting. */
  "room.media.setMicrophoneEnabled": { params: { room: Handle; enabled: boolean }; result: Empty };
  "room.media.disconnect": { params: { room: Handle }; result: Empty };
  /** Listener only (else `meetings.wrongRole`): the playback stream of the meeting's mix. */
  "room.playback.play": { params: { room: Handle }; result: Empty };
  "room.playback.pause": { params: { room: Handle }; result: Empty };
  "room.playback.stop": { params: { room: Handle }; result: Empty };
  "room.raiseHand": { params: { room: Handle }; result: Empty };
  "room.lowerHand": { params: { room: Handle }; result: Empty };
  "room.leave": { params: { room: Handle }; result: Empty };
  "room.end": { params: { room: Handle }; result: Empty };
  "room.promote": { params: { room: Handle; userID: UserID }; result: Empty };
  "room.demote": { params: { room: Handle; userID: UserID }; result: Empty };

  /** Shows the consent sheet first: a `hostRequest` of kind `consent`. */
  "studio.requestGrant": { params: { roomID: RoomID; scope: GrantScope }; result: Grant };
  "studio.summarize": { params: { grant: Handle }; result: Summary };
  "studio.revoke": { params: { grant: Handle }; result: Empty };
  /** The service's audit of the member: counts and event IDs, never content. */
  "studio.audit": {
    params: Empty;
    result: { grantID?: string; action: string; outcome: string; itemCount: number; itemIDs: EventID[] }[];
  };

  "directory.member": { params: { userID: UserID }; result: DirectoryMember };
  "directory.refreshOwnProfile": { params: Empty; result: DirectoryMember };
  /** Community admins only. `changed` is false when the member already had (or lacked) it. */
  "directory.assignRole": { params: { role: string; userID: UserID }; result: { changed: boolean } };
  "directory.removeRole": { params: { role: string; userID: UserID }; result: { changed: boolean } };
  /** A new search of the community's members (with `role` only, when given). */
  "directory.searchMembers": { params: { role?: string; pageSize?: number }; result: { search: Handle } };
  /** A new search of the homeserver's user directory (a term is needed; one page). */
  "directory.searchUsers": { params: { pageSize?: number }; result: { search: Handle } };
  /** A new search of a room directory (this homeserver's, or `server`'s). */
  "publicRooms.search": { params: { server?: string; pageSize?: number }; result: { search: Handle } };
  "publicRooms.resolve": { params: { alias: string }; result: { roomID: RoomID } };
  "publicRooms.join": { params: { roomIDOrAlias: string }; result: { roomID: RoomID } };
  "publicRooms.isPublished": { params: { roomID: RoomID }; result: { published: boolean } };
  /** Power levels checked first (`directory.forbidden` with both levels, nothing sent). */
  "publicRooms.setPublished": { params: { roomID: RoomID; published: boolean }; result: Empty };
  /** Searches for `term` (default "") and answers its first page (at once when it is shown). */
  "search.run": { params: { search: Handle; term?: string }; result: SearchResults<unknown> };
  /** The next page; every result so far, or null when there is no search yet. */
  "search.loadMore": { params: { search: Handle }; result: SearchResults<unknown> | null };
  /** As the user types: answers at once; `search.results` shows the answer. */
  "search.update": { params: { search: Handle; term: string }; result: Empty };
  "search.refresh": { params: { search: Handle }; result: Empty };
  "search.clear": { params: { search: Handle }; result: Empty };

  /** The community's reference gateway (development) and this installation's profile tag. */
  "push.gateway": { params: Empty; result: { communityGatewayURL: string; profileTag: string } };
  /** `gatewayURL` defaults to the community's; `format` to `event_id_only` (no content on the gateway). */
  "push.setPusher": {
    params: {
      pushkey: string;
      appID: string;
      appDisplayName: string;
      deviceDisplayName: string;
      language?: string;
      gatewayURL?: string;
      format?: "event_id_only" | "full";
    };
    result: Pusher;
  };
  "push.pushers": { params: Empty; result: Pusher[] };
  "push.pusherState": { params: Empty; result: PusherState };
  "push.removePusher": { params: Empty; result: Empty };
  "push.rules": { params: Empty; result: PushRule[] };
  "push.addKeyword": { params: { keyword: string }; result: Empty };
  "push.removeKeyword": { params: { keyword: string }; result: Empty };
  "push.setRuleEnabled": { params: { kind: PushRuleKind; ruleID: string; enabled: boolean }; result: Empty };
  "push.event": { params: { roomID: RoomID; eventID: EventID }; result: PushedEvent };

  /** Synchronous (also through `execute`): the long-message rule. */
  "message.split": { params: { text: string; limit?: number }; result: { parts: string[] } };
  /** Synchronous (also through `execute`): an amount as the wallet reads it. */
  "amount.parse": { params: { text: string; precision?: number }; result: Amount };

  subscribe: { params: { path: keyof Paths } & Record<string, unknown>; result: { subscription: string; value: unknown } };
  unsubscribe: { params: { subscription: string }; result: Empty };
  value: { params: { path: keyof Paths } & Record<string, unknown>; result: unknown };
  "host.answer": { params: { request: string; answer: unknown }; result: Empty };
  "handle.release": { params: { handle: Handle }; result: Empty };
  "contract.methods": { params: Empty; result: { methods: string[]; subscriptions: string[] } };
}

/** Every observable value: the extra `subscribe` params and the value type. */
export interface Paths {
  "session.state": { params: Empty; value: SessionState };
  "session.accounts": { params: Empty; value: Account[] };
  "chat.conversations": { params: Empty; value: ConversationList };
  "chat.syncState": { params: Empty; value: { kind: string } };
  "conversation.timeline": { params: { conversation: Handle }; value: TimelineItem[] };
  "conversation.pagination": { params: { conversation: Handle }; value: TimelinePagination };
  "conversation.outbox": { params: { conversation: Handle }; value: { transactionID: string; state: SendState }[] };
  /** The running uploads of the conversation's attachments, by transaction; an entry goes when sent, cancelled or failed for good. */
  "conversation.uploads": { params: { conversation: Handle }; value: UploadProgress[] };
  "receipt.state": { params: { receipt: Handle }; value: SendState };
  "wallet.balances": { params: Empty; value: Balance[] };
  "wallet.pendingCommands": { params: Empty; value: PendingCommand[] };
  "draft.state": { params: { draft: Handle }; value: TransferState };
  "pending.state": { params: { pending: Handle }; value: TransferState };
  "meeting.role": { params: { room: Handle }; value: { kind: ParticipantRole } };
  "meeting.participants": { params: { room: Handle }; value: MeetingParticipant[] };
  "meeting.state": { params: { room: Handle }; value: { kind: string } };
  /** Stage only: the media session (idle, connecting, negotiating, connected, reconnecting, closed, failed). */
  "meeting.media": { params: { room: Handle }; value: { kind: string } };
  "meeting.audioLevels": { params: { room: Handle }; value: { incoming: AudioLevel; outgoing: AudioLevel } };
  /** Listener only: idle, buffering, playing, paused, stalled, stopped. */
  "meeting.playback": { params: { room: Handle }; value: { kind: string } };
  "studio.grants": { params: Empty; value: GrantInfo[] };
  "search.results": { params: { search: Handle }; value: SearchState<unknown> };
  "push.counts": { params: Empty; value: NotificationCounts };
  /** The conversation's encryption. */
  "conversation.encryption": { params: { conversation: Handle }; value: { kind: RoomEncryptionState } };
  /** The identity of the account active when subscribed. */
  "encryption.identity": { params: Empty; value: IdentityState };
  /** The key backup of the account active when subscribed. */
  "encryption.backup": { params: Empty; value: KeyBackupState };
  /** A verification flow's state. */
  "verification.state": { params: { verification: Handle }; value: VerificationState };
  /** The last verification another device started with the account active when subscribed (`null` until one). */
  "verification.incoming": { params: Empty; value: VerificationInfo | null };
  "hierarchy.state": { params: { hierarchy: Handle }; value: HierarchyState };
}

export type MethodName = keyof Methods;
export type RequestID = string | number;

/** Host → SDK: one JSON object (one line over stdio). */
export interface Request<M extends MethodName = MethodName> {
  id: RequestID;
  method: M;
  params?: Methods[M]["params"];
}

/** SDK → host: exactly one answer per request, carrying its `id` (`null` if unreadable). */
export type Answer<M extends MethodName = MethodName> =
  | { id: RequestID | null; result: Methods[M]["result"] }
  | { id: RequestID | null; error: ContractError };
export interface Update {
  update: { subscription: string; value: unknown };
}
/** Asks the host; answered with `host.answer`. `consent`: "approved" | "declined" (anything else: unavailable). `pin`: the PIN string, or null to cancel. */
export type HostRequest =
  | { hostRequest: { id: string; kind: "consent"; sheet: ConsentSheet } }
  | { hostRequest: { id: string; kind: "pin"; draft: Handle; summary: TransferSummary } };
export interface Closed {
  closed: true;
}
export type Message = Answer | Update | HostRequest | Closed;

// ───────────────────────── The product interfaces ─────────────────────────

export interface Observable<T> {
  readonly value: T;
  subscribe(listener: (value: T) => void): () => void; // returns unsubscribe
}

// Over the protocol, an observable's value lives in the SDK: observing it is a `subscribe` round
// trip, so the clients' observable members are functions that resolve to a live Observable<T>
// (its `value` current, kept so by the updates) with `close()` to unsubscribe.
export interface LiveObservable<T> extends Observable<T> {
  close(): Promise<void>;
}
export type Observe<T> = () => Promise<LiveObservable<T>>;

export interface Session {
  readonly state: Observe<SessionState>;
  readonly accounts: Observe<Account[]>;
  signIn(username: string, password: string): Promise<Account>;
  register(username: string, password: string): Promise<Account>;
  reauthenticate(password: string): Promise<Account>;
  signOut(): Promise<void>;
  switchAccount(userID: UserID): Promise<Account>;
  removeAccount(userID: UserID): Promise<void>;
  devices(): Promise<AccountDevice[]>;
  renameDevice(deviceID: string, name: string): Promise<void>;
  removeDevice(deviceID: string, password: string): Promise<void>;
}

export interface Conversation {
  readonly id: RoomID;
  readonly handle: Handle;
  readonly timeline: Observe<TimelineItem[]>;
  readonly pagination: Observe<TimelinePagination>;
  send(text: string, options?: { kind?: "text" | "notice" | "emote"; replyingTo?: EventID }): Promise<SendReceipt>;
  edit(eventID: EventID, text: string): Promise<SendReceipt>;
  paginateBackwards(count?: number): Promise<TimelinePagination>;
  react(eventID: EventID, key: string): Promise<void>;
  redact(eventID: EventID): Promise<void>;
  markRead(eventID?: EventID): Promise<void>;
  sendAttachment(
    path: string,
    contentType: string,
    options?: Omit<Methods["chat.conversation.sendAttachment"]["params"], "conversation" | "path" | "contentType">,
  ): Promise<SendReceipt>;
  readonly uploads: Observe<UploadProgress[]>;
  /** A failed message again (same transaction ID), or dropped from the queue (a running upload aborted). */
  resend(transactionID: string): Promise<void>;
  cancelSend(transactionID: string): Promise<void>;
  /** Saves a message's file (or, with `thumbnail`, its sender's thumbnail) to `path`; the bytes written. */
  download(eventID: EventID, path: string, options?: { thumbnail?: boolean }): Promise<number>;
  readonly encryption: Observe<{ kind: RoomEncryptionState }>;
  enableEncryption(): Promise<void>;
}

export interface ChatClient {
  readonly conversations: Observe<ConversationList>;
  refresh(): Promise<void>;
  conversation(roomID: RoomID): Promise<Conversation>;
  createRoom(options?: Methods["chat.createRoom"]["params"]): Promise<RoomID>;
  join(roomIDOrAlias: string): Promise<RoomID>;
  leave(roomID: RoomID): Promise<void>;
  invite(userID: UserID, roomID: RoomID): Promise<void>;
  kick(userID: UserID, roomID: RoomID, reason?: string): Promise<void>;
  ban(userID: UserID, roomID: RoomID, reason?: string): Promise<void>;
  setJoinRule(roomID: RoomID, rule: Methods["chat.setJoinRule"]["params"]["rule"], allowedRooms?: RoomID[]): Promise<void>;
  setRoomName(roomID: RoomID, name: string): Promise<void>;
  setRoomTopic(roomID: RoomID, topic: string): Promise<void>;
  setRoomAvatar(roomID: RoomID, path: string, contentType: string): Promise<string>;
  setHistoryVisibility(roomID: RoomID, visibility: HistoryVisibility): Promise<void>;
  setPowerLevel(roomID: RoomID, userID: UserID, level: number): Promise<void>;
  knock(roomIDOrAlias: string, options?: { reason?: string; via?: string[] }): Promise<RoomID>;
  knocks(roomID: RoomID): Promise<UserID[]>;
  acceptKnock(roomID: RoomID, userID: UserID): Promise<void>;
  denyKnock(roomID: RoomID, userID: UserID, reason?: string): Promise<void>;
  setDisplayName(name: string): Promise<void>;
  setAvatar(path: string, contentType: string): Promise<string>;
  ignore(userID: UserID): Promise<void>;
  unignore(userID: UserID): Promise<void>;
  ignoredUsers(): Promise<UserID[]>;
  joinedSpaces(): Promise<{ id: RoomID; name?: string }[]>;
  roomsOfSpace(spaceID: RoomID): Promise<SpaceChildLink[]>;
  createSpace(name: string, options?: { topic?: string; isPublic?: boolean }): Promise<RoomID>;
  addToSpace(roomID: RoomID, spaceID: RoomID, options?: { via?: string[]; suggested?: boolean }): Promise<void>;
  removeFromSpace(roomID: RoomID, spaceID: RoomID): Promise<void>;
  joinVia(roomID: RoomID, via: string[]): Promise<RoomID>;
  hierarchy(spaceID: RoomID, pageSize?: number): Promise<SpaceHierarchy>;
  communityRooms(pageSize?: number): Promise<SpaceHierarchy>;
}

/** A space's hierarchy, paged from the server. */
export interface SpaceHierarchy extends SpaceHierarchyInfo {
  readonly state: Observe<HierarchyState>;
  loadNextPage(): Promise<HierarchyState>;
}

export interface Draft extends TransferDraft {
  readonly handle: Handle;
  /** Without `pin`, the shell's `pinEntry` is asked. */
  confirm(pin?: string): Promise<TransferOutcome>;
  cancel(): Promise<void>;
}

export interface WalletClient {
  readonly balances: Observe<Balance[]>;
  refreshBalances(): Promise<Balance[]>;
  history(limit?: number): Promise<LedgerEntry[]>;
  prepareTransfer(recipient: UserID, asset: string, amount: string): Promise<Draft>;
  setPIN(pin: string, oldPIN?: string): Promise<void>;
  /** Queries a pending command; never resubmits. */
  query(pending: PendingCommand): Promise<TransferOutcome>;
}

/** A stage member's real-time media session. */
export interface StageMedia {
  readonly state: Observe<{ kind: string }>;
  readonly audioLevels: Observe<{ incoming: AudioLevel; outgoing: AudioLevel }>;
  connect(): Promise<void>;
  setMicrophoneEnabled(enabled: boolean): Promise<void>;
  disconnect(): Promise<void>;
}

/** A listener's playback of the meeting's mix. */
export interface Playback {
  readonly state: Observe<{ kind: string }>;
  play(): Promise<void>;
  pause(): Promise<void>;
  stop(): Promise<void>;
}

export interface Room extends MeetingRoom {
  readonly handle: Handle;
  /** The role's media as it is now (`meetings.wrongRole` from the other kind's methods). */
  readonly media: StageMedia;
  readonly playback: Playback;
  raiseHand(): Promise<void>;
  lowerHand(): Promise<void>;
  leave(): Promise<void>;
}

export interface MeetingsClient {
  join(roomID: RoomID, options?: { broadcast?: boolean; tone?: number }): Promise<Room>;
}

export interface StudioClient {
  readonly grants: Observe<GrantInfo[]>;
  /** Rejects with `studio.declined` when the shell's `consent` says no. */
  requestGrant(roomID: RoomID, scope: GrantScope): Promise<Grant>;
  summarize(grant: Grant): Promise<Summary>;
  revoke(grant: Grant): Promise<void>;
}

/** A search of one directory: the latest term's results, paged. */
export interface DirectorySearch<T> {
  readonly handle: Handle;
  readonly results: Observe<SearchState<T>>;
  search(term?: string): Promise<SearchResults<T>>;
  update(term: string): Promise<void>;
  loadMore(): Promise<SearchResults<T> | null>;
  refresh(): Promise<void>;
  clear(): Promise<void>;
}

/** The member directory. */
export interface DirectoryClient {
  member(userID: UserID): Promise<DirectoryMember>;
  refreshOwnProfile(): Promise<DirectoryMember>;
  assignRole(role: string, userID: UserID): Promise<boolean>;
  removeRole(role: string, userID: UserID): Promise<boolean>;
  members(options?: { role?: string; pageSize?: number }): Promise<DirectorySearch<DirectoryMember>>;
  users(options?: { pageSize?: number }): Promise<DirectorySearch<DirectoryUser>>;
}

/** Push notifications (not a module: every community has them). */
export interface PushClient {
  readonly counts: Observe<NotificationCounts>;
  gateway(): Promise<{ communityGatewayURL: string; profileTag: string }>;
  setPusher(options: Methods["push.setPusher"]["params"]): Promise<Pusher>;
  pushers(): Promise<Pusher[]>;
  pusherState(): Promise<PusherState>;
  removePusher(): Promise<void>;
  rules(): Promise<PushRule[]>;
  addKeyword(keyword: string): Promise<void>;
  removeKeyword(keyword: string): Promise<void>;
  setRuleEnabled(kind: PushRuleKind, ruleID: string, enabled: boolean): Promise<void>;
  event(roomID: RoomID, eventID: EventID): Promise<PushedEvent>;
}

/** The homeserver's room directory (not a module: every community has it). */
export interface PublicRoomsClient {
  search(options?: { server?: string; pageSize?: number }): Promise<DirectorySearch<PublicRoom>>;
  resolve(alias: string): Promise<RoomID>;
  join(roomIDOrAlias: string): Promise<RoomID>;
  isPublished(roomID: RoomID): Promise<boolean>;
  setPublished(roomID: RoomID, published: boolean): Promise<void>;
}

/** Encryption management of the active account (not a module: every community has it; `notReady` without an account). */
export interface EncryptionClient {
  readonly identity: Observe<IdentityState>;
  readonly backup: Observe<KeyBackupState>;
  identityState(): Promise<IdentityState>;
  setUpRecovery(passphrase?: string): Promise<string>;
  restoreRecovery(recoveryKey: string, isPassphrase?: boolean): Promise<RestoredKeys | null>;
  resetRecovery(password: string, passphrase?: string): Promise<string>;
  backupStatus(): Promise<KeyBackupStatus>;
  checkBackup(): Promise<KeyBackupStatus>;
  createBackup(): Promise<string>;
  enableBackup(privateKey: string): Promise<string>;
  restoreBackup(): Promise<RestoredKeys>;
  deleteBackup(): Promise<void>;
  devices(userID: UserID): Promise<CryptoDevice[]>;
  identityChanged(userID: UserID): Promise<boolean>;
  acknowledgeIdentityChange(userID: UserID): Promise<boolean>;
  /** Starts an interactive verification (see `verification.start`). */
  verify(userID: UserID, options?: { deviceID?: string; startDirectly?: boolean }): Promise<Verification>;
  /** The last verification another device started, or null; `verification(info)` answers it. */
  readonly incomingVerification: Observe<VerificationInfo | null>;
  /** The flow a `VerificationInfo` names. */
  verification(info: VerificationInfo): Verification;
}

/** One interactive verification: observe its state, answer with the person's choices. */
export interface Verification {
  readonly handle: Handle;
  readonly transactionID: string;
  readonly otherUserID: UserID;
  readonly state: Observe<VerificationState>;
  accept(): Promise<void>;
  startSAS(): Promise<void>;
  confirm(): Promise<void>;
  mismatch(): Promise<void>;
  cancel(): Promise<void>;
}

export interface CommunityClient {
  readonly session: Session;
  readonly chat: ChatClient;
  readonly meetings: MeetingsClient;
  readonly aiStudio?: StudioClient;
  readonly wallet?: WalletClient;
  readonly directory?: DirectoryClient;
  readonly publicRooms: PublicRoomsClient;
  readonly push: PushClient;
  readonly encryption: EncryptionClient;
}

/** What the shell answers for the SDK: the consent sheet and PIN entry. */
export interface HostHandlers {
  consent?(sheet: ConsentSheet): Promise<"approved" | "declined">;
  pinEntry?(summary: TransferSummary): Promise<string | null>;
}
