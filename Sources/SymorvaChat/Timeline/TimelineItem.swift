import Foundation
import SymorvaChatStore
import SymorvaMachines
import SymorvaMatrix

/// One row of a conversation's timeline: a message, a membership or state change, or a message
/// of ours still on its way (a local echo).
///
/// Edits are applied (the latest `m.replace` from the original sender), redactions remove the
/// content, reactions are grouped by key. Bodies and names are user content: the description
/// shows the IDs only.
public struct TimelineItem: Sendable, Hashable, Identifiable, CustomStringConvertible {
    /// What identifies a row across updates: the event once the server has it, else the
    /// transaction of the local echo.
    public enum ID: Sendable, Hashable {
        /// A stored event.
        case event(EventID)
        /// A local echo.
        case local(TransactionID)
    }

    /// The row's identity.
    public var id: ID
    /// The event, once the server has it.
    public var eventID: EventID?
    /// The transaction of one of our own messages (local echo, or its remote echo).
    public var transactionID: TransactionID?
    /// Who sent it.
    public var sender: UserID
    /// The sender's profile in the room, when known.
    public var senderProfile: SenderProfile
    /// Whether the signed-in member sent it.
    public var isOwn: Bool
    /// When the server received it (`origin_server_ts`); `nil` for a local echo.
    public var timestamp: MatrixTimestamp?
    /// What it shows.
    public var content: TimelineItemContent
    /// Whether an edit replaced the original content.
    public var isEdited: Bool
    /// Reactions grouped by key, in order of the first reaction.
    public var reactions: [ReactionSummary]
    /// The event this one replies to.
    public var inReplyTo: EventID?
    /// Other members whose read receipt points at this event.
    public var readBy: [UserID]
    /// For our own messages on their way: sending, sent or failed. `nil` for synced events.
    public var sendState: SendState?
    /// For an event that was end-to-end encrypted and decrypted on this device: which device
    /// sent it and whether that device is known. `nil` for plaintext events and for events that
    /// could not be decrypted (``TimelineItemContent/unableToDecrypt(_:)``).
    public var encryption: EncryptionInfo? = nil
    /// Whether it mentions the signed-in member (its `m.mentions` names them or the room; a
    /// message without `m.mentions`, their user ID or name in the body): views highlight it.
    public var mentionsMe: Bool = false
    /// For a thread's root: the thread's reply count, latest reply and unread counts.
    public var thread: ThreadSummary? = nil
    /// For a reply in a thread: the thread's root.
    public var threadRootID: EventID? = nil

    /// The IDs only.
    public var description: String { "TimelineItem(\(id))" }
}

/// What a timeline row shows.
public enum TimelineItemContent: Sendable, Hashable {
    /// `m.text`, `m.notice` or `m.emote`.
    case message(MessageKind, body: String)
    /// `m.image`.
    case image(MediaInfo)
    /// `m.file`.
    case file(MediaInfo)
    /// `m.audio`.
    case audio(MediaInfo)
    /// `m.video`.
    case video(MediaInfo)
    /// An `m.room.member` change of `userID`.
    case membership(userID: UserID, membership: Membership?, displayName: String?)
    /// Another state event (creation, name, topic, encryption, power levels…), read as what it
    /// changed.
    case stateChange(RoomStateChange)
    /// Redacted: the content is gone.
    case redacted
    /// End-to-end encrypted and not decrypted on this device, for this reason. A missing key
    /// that arrives later turns the row into its message in place.
    case unableToDecrypt(UnableToDecryptReason)
    /// A type this SDK does not show.
    case unsupported(type: String)
}

/// The kinds of text message.
public enum MessageKind: String, Sendable, Hashable {
    /// `m.text`.
    case text
    /// `m.notice` (bots).
    case notice
    /// `m.emote` (`/me`).
    case emote
}

/// The metadata of an image, file, audio or video message. The media stays on the server until
/// asked for: ``source`` is what ``MediaClient/cachedFile(for:progress:)``,
/// ``MediaClient/download(_:toFileAt:maximumBytes:progress:)`` and the thumbnails take.
public struct MediaInfo: Sendable, Hashable {
    /// `body`: the file name or a description (a caption when ``fileName`` is given).
    public var body: String
    /// `filename`: the file's name when ``body`` is a caption.
    public var fileName: String?
    /// `url` (`mxc://`), absent for encrypted media.
    public var url: String?
    /// `info.duration` of audio and video.
    public var duration: Duration?
    /// The media to download, when ``url`` is a valid `mxc://` URI (plain media; encrypted
    /// media has none: download it with ``MediaClient/download(_:toFileAt:progress:)``, which
    /// checks and decrypts it).
    public var source: MediaURI? { url.flatMap(MediaURI.init) }
    /// Whether the file is encrypted (`file` in an encrypted room's event): its key, IV and hash
    /// travel with it, and ``MediaClient/download(_:toFileAt:progress:)`` checks the hash of
    /// the ciphertext before decrypting.
    public var isEncrypted: Bool { encryptedFile != nil }
    /// `info.mimetype`.
    public var mimeType: String?
    /// `info.size` in bytes.
    public var size: Int?
    /// `info.w` and `info.h` for images.
    public var width: Int?
    /// See ``width``.
    public var height: Int?
    /// `file`: where the ciphertext is and how to check and decrypt it.
    package var encryptedFile: EncryptedFile? = nil
    /// `info.thumbnail_url` (`mxc://`) of a plain thumbnail.
    public var thumbnailURL: String? = nil
    /// `info.thumbnail_info.mimetype`.
    public var thumbnailMimeType: String? = nil
    /// `info.thumbnail_info.w` and `.h`.
    public var thumbnailWidth: Int? = nil
    /// See ``thumbnailWidth``.
    public var thumbnailHeight: Int? = nil
    /// `info.thumbnail_file`: an encrypted thumbnail.
    package var thumbnailEncryptedFile: EncryptedFile? = nil
    /// Whether the sender attached a thumbnail (`info.thumbnail_url`, or `info.thumbnail_file`
    /// in an encrypted room): ``MediaClient/downloadThumbnail(_:toFileAt:)`` gets it, checked
    /// and decrypted when it is encrypted.
    public var hasThumbnail: Bool {
        thumbnailEncryptedFile?.uri != nil || thumbnailURL.flatMap(MediaURI.init) != nil
    }
}

/// The reactions with one key on an item.
public struct ReactionSummary: Sendable, Hashable {
    /// The key (usually an emoji).
    public var key: String
    /// Who reacted, in order.
    public var senders: [UserID]
    /// Whether the signed-in member is one of them.
    public var includesOwn: Bool
    /// How many reacted.
    public var count: Int { senders.count }

    /// A reaction group.
    public init(key: String, senders: [UserID], includesOwn: Bool) {
        self.key = key
        self.senders = senders
        self.includesOwn = includesOwn
    }
}

/// Where one of our messages is on its way.
public enum SendState: Sendable, Hashable {
    /// Queued or in flight (also while waiting to retry after a network error).
    case sending
    /// The server has it as this event.
    case sent(EventID)
    /// Refused for good; later messages of the room wait until it is resent or cancelled.
    case failed(SendFailureReason)
}

/// The fields of event content the timeline shows, read leniently.
struct ShownContent: Decodable {
    struct Info: Decodable {
        struct Thumbnail: Decodable {
            var mimetype: String?
            var w: Int?
            var h: Int?
        }
        var mimetype: String?
        var size: Int?
        var w: Int?
        var h: Int?
        var duration: Int?
        var thumbnail_url: String?
        var thumbnail_file: EncryptedFile.Wire?
        var thumbnail_info: Thumbnail?

        private enum CodingKeys: String, CodingKey {
            case mimetype, size, w, h, duration, thumbnail_url, thumbnail_file, thumbnail_info
        }

        /// The file's fields as before; a thumbnail member that does not read is left out, never
        /// the message.
        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            mimetype = try container.decodeIfPresent(String.self, forKey: .mimetype)
            size = try container.decodeIfPresent(Int.self, forKey: .size)
            w = try container.decodeIfPresent(Int.self, forKey: .w)
            h = try container.decodeIfPresent(Int.self, forKey: .h)
            duration = try container.decodeIfPresent(Int.self, forKey: .duration)
            thumbnail_url = (try? container.decodeIfPresent(String.self, forKey: .thumbnail_url)) ?? nil
            thumbnail_file = (try? container.decodeIfPresent(EncryptedFile.Wire.self, forKey: .thumbnail_file)) ?? nil
            thumbnail_info = (try? container.decodeIfPresent(Thumbnail.self, forKey: .thumbnail_info)) ?? nil
        }
    }
    var msgtype: String?
    var body: String?
    var filename: String?
    var url: String?
    var file: EncryptedFile.Wire?
    var info: Info?
    var membership: String?
    var displayname: String?

    static func read(_ bytes: [UInt8]) -> ShownContent? {
        WireJSON.decodeIfValid(ShownContent.self, from: bytes)
    }
}

extension TimelineItemContent {
    /// The content of an event of `type`, or of its redacted remains. A `queued` content is one
    /// of our own still in the send queue (the local echo): its encrypted file may not state its
    /// hash yet (taken while it uploads), and is read all the same, so that the echo is encrypted
    /// from the start, as the message will be sent.
    init(type: String, stateKey: String?, content: [UInt8], isRedacted: Bool, queued: Bool = false) {
        if isRedacted && type != "m.room.member" {
            self = .redacted
            return
        }
        let shown = ShownContent.read(content)
        switch type {
        case "m.room.message", "m.sticker":
            guard let shown, let body = shown.body else {
                self = .redacted
                return
            }
            switch shown.msgtype {
            case "m.notice": self = .message(.notice, body: body)
            case "m.emote": self = .message(.emote, body: body)
            case "m.image":
                self = .image(Self.media(shown, body: body, queued: queued))
            case "m.file": self = .file(Self.media(shown, body: body, queued: queued))
            case "m.audio": self = .audio(Self.media(shown, body: body, queued: queued))
            case "m.video": self = .video(Self.media(shown, body: body, queued: queued))
            default: self = .message(.text, body: body)
            }
        case "m.room.encrypted":
            self = .unableToDecrypt(.missingKey)
        case "m.room.member":
            self = .membership(
                userID: UserID(stored: stateKey ?? ""),
                membership: shown?.membership.flatMap(Membership.init(rawValue:)),
                displayName: shown?.displayname)
        default:
            if let stateKey {
                self = .stateChange(RoomStateChange(type: type, stateKey: stateKey, content: content))
            } else {
                self = .unsupported(type: type)
            }
        }
    }

    private static func media(_ shown: ShownContent, body: String, queued: Bool) -> MediaInfo {
        MediaInfo(
            body: body, fileName: shown.filename, url: shown.url,
            duration: shown.info?.duration.map { .milliseconds($0) }, mimeType: shown.info?.mimetype,
            size: shown.info?.size, width: shown.info?.w, height: shown.info?.h,
            encryptedFile: shown.file.flatMap { EncryptedFile(wire: $0, hashPending: queued) },
            thumbnailURL: shown.info?.thumbnail_url,
            thumbnailMimeType: shown.info?.thumbnail_info?.mimetype, thumbnailWidth: shown.info?.thumbnail_info?.w,
            thumbnailHeight: shown.info?.thumbnail_info?.h,
            thumbnailEncryptedFile: shown.info?.thumbnail_file.flatMap { EncryptedFile(wire: $0) })
    }
}

/// Turns stored items, the send queue and pending reactions into timeline rows.
enum TimelineAssembler {
    static func items(
        snapshot: WindowSnapshot, queue: [SendQueueItem], pending: [PendingReaction], ownUserID: UserID
    ) -> [TimelineItem] {
        var rows: [TimelineItem] = []
        var echoedTransactions: Set<String> = []
        var shownEvents: Set<String> = []
        for stored in snapshot.items {
            if let transactionID = stored.transactionID { echoedTransactions.insert(transactionID) }
            shownEvents.insert(stored.eventID)
            var reactions = stored.reactions.map { group in
                let senders = group.senders.map(UserID.init(stored:))
                return ReactionSummary(key: group.key, senders: senders, includesOwn: senders.contains(ownUserID))
            }
            for change in pending where change.target.rawValue == stored.eventID {
                apply(change, to: &reactions, ownUserID: ownUserID)
            }
            rows.append(
                TimelineItem(
                    id: .event(EventID(stored.eventID)), eventID: EventID(stored.eventID),
                    transactionID: stored.transactionID.map(TransactionID.init(rawValue:)),
                    sender: UserID(stored: stored.sender),
                    senderProfile: snapshot.profiles[stored.sender] ?? SenderProfile(),
                    isOwn: stored.sender == ownUserID.rawValue,
                    timestamp: MatrixTimestamp(milliseconds: stored.originServerTS),
                    content: stored.type == "m.room.encrypted" && stored.redactedBy == nil
                        ? .unableToDecrypt(UnableToDecryptReason(stored: stored.encryption?.failure))
                        : TimelineItemContent(
                            type: stored.type, stateKey: stored.stateKey, content: stored.content,
                            isRedacted: stored.redactedBy != nil),
                    isEdited: stored.replacedBy != nil, reactions: reactions,
                    inReplyTo: stored.inReplyTo.map(EventID.init(rawValue:)),
                    readBy: (snapshot.readers[stored.eventID] ?? []).filter { $0 != ownUserID.rawValue }.map(
                        UserID.init(stored:)),
                    sendState: nil, encryption: EncryptionInfo(stored: stored.encryption),
                    mentionsMe: stored.sender != ownUserID.rawValue && stored.redactedBy == nil
                        && stored.type == "m.room.message" && Mentions.mention(of: ownUserID, in: stored.content),
                    thread: stored.thread.map(ThreadSummary.init),
                    threadRootID: stored.threadRootID.map(EventID.init(rawValue:))))
        }
        for item in queue {
            guard !echoedTransactions.contains(item.transactionID.rawValue), let state = sendState(item.status) else {
                continue
            }
            if case .sent(let eventID) = state, shownEvents.contains(eventID.rawValue) { continue }
            let bytes = Array(item.content.json.utf8)
            // Edits and reactions change other rows; they are not rows of their own.
            if item.content.eventType != "m.room.message"
                || bytes.withUnsafeBytes({ RawJSON.value("m.new_content", in: $0) }) != nil
            {
                continue
            }
            rows.append(
                TimelineItem(
                    id: .local(item.transactionID), eventID: nil, transactionID: item.transactionID, sender: ownUserID,
                    senderProfile: SenderProfile(), isOwn: true, timestamp: nil,
                    content: TimelineItemContent(
                        type: item.content.eventType, stateKey: nil, content: bytes, isRedacted: false, queued: true),
                    isEdited: false, reactions: [], inReplyTo: nil, readBy: [], sendState: state,
                    threadRootID: item.content.threadRootID.map(EventID.init(rawValue:))))
        }
        return rows
    }

    static func sendState(_ status: SendItemStatus) -> SendState? {
        switch status {
        case .queued, .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending: .sending
        case .sent(let eventID): .sent(eventID)
        case .failed(let reason): .failed(reason)
        case .cancelled: nil
        }
    }

    static func apply(_ change: PendingReaction, to reactions: inout [ReactionSummary], ownUserID: UserID) {
        let index = reactions.firstIndex { $0.key == change.key }
        if change.isAdded {
            guard let index else {
                reactions.append(ReactionSummary(key: change.key, senders: [ownUserID], includesOwn: true))
                return
            }
            guard !reactions[index].includesOwn else { return }
            reactions[index].senders.append(ownUserID)
            reactions[index].includesOwn = true
        } else {
            guard let index, reactions[index].includesOwn else { return }
            reactions[index].senders.removeAll { $0 == ownUserID }
            reactions[index].includesOwn = false
            if reactions[index].senders.isEmpty { reactions.remove(at: index) }
        }
    }
}

/// Why an encrypted event is not shown decrypted.
public enum UnableToDecryptReason: String, Sendable, Hashable {
    /// The room key has not reached this device (yet): the row is decrypted in place when it does.
    case missingKey
    /// The message index was already used by another event of the same session: a replay.
    case replayed
    /// Not `m.megolm.v1.aes-sha2`.
    case unsupportedAlgorithm
    /// The ciphertext does not belong where it was sent (another room's plaintext, a corrupt
    /// message): refused.
    case mismatched
    /// Sent by a device its owner has not cross-signed, under the room key policy
    /// `crossSignedOnly` (the default, MSC4153): not shown. Decided when the event was decrypted,
    /// after the sender's devices were brought up to date; not final: once the device is
    /// cross-signed (or verified by this account) the row turns into its message in place.
    case senderNotCrossSigned

    init(stored: String?) {
        self = stored.flatMap(UnableToDecryptReason.init(rawValue:)) ?? .missingKey
    }
}

/// How an end-to-end encrypted event was decrypted on this device.
public struct EncryptionInfo: Sendable, Hashable {
    /// The sending device's Curve25519 key.
    public var senderKey: String
    /// The sending device's ID, when it is known.
    public var senderDeviceID: String?
    /// Whether the sending device is one this account has verified keys for, unchanged.
    public var isDeviceKnown: Bool
    /// The sending device's trust when this device decrypted the event; `nil` when not recorded
    /// (this device's own messages, and events decrypted by an SDK before this was kept).
    public var senderTrust: SenderDeviceTrust?

    /// Whether the row is to be marked: its sending device was not cross-signed by its owner
    /// when the event was decrypted (MSC4153's "not cross-signed" warning).
    public var isFromDeviceNotCrossSigned: Bool { senderTrust == .notCrossSigned }

    init?(stored: StoredEncryption?) {
        guard let stored, stored.failure == nil else { return nil }
        senderKey = stored.senderKey
        senderDeviceID = stored.senderDevice
        isDeviceKnown = stored.deviceKnown
        senderTrust = stored.senderTrust.flatMap(SenderDeviceTrust.init(rawValue:))
    }
}

/// How far this device trusted the device that sent an encrypted event, when it decrypted it.
public enum SenderDeviceTrust: String, Sendable, Hashable {
    /// Cross-signed by its owner, whose identity this account verified.
    case verified
    /// Cross-signed by its owner (the owner's self-signing key signed it).
    case crossSigned
    /// Not cross-signed by its owner, or not known: the server alone vouches for it (a device
    /// the server injects looks like this). Views mark such messages.
    case notCrossSigned
}
