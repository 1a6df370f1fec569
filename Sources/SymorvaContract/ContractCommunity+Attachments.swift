import SymorvaKit
import SymorvaMatrix

extension ContractCommunity {
    /// Attachments of a conversation handle: a file of the host's sent through the room's send
    /// queue (``Conversation/send(_:)-(OutgoingAttachment)``: copied, reserved, uploaded, sent;
    /// encrypted first in an encrypted room), its upload's progress as the path
    /// `conversation.uploads`, cancelled with `chat.conversation.cancelSend`; and a received
    /// message's file (or its sender's thumbnail) saved to a path of the host's through the
    /// conversation's ``MediaClient`` (an encrypted file's hash checked before it is decrypted).
    var attachmentMethods: ContractMethods {
        var methods = ContractMethods()
        methods.asynchronous["chat.conversation.sendAttachment"] = { [weak self] call in
            let target = try Self.conversation(call)
            let attachment = try Self.attachment(call.params)
            let account = self?.activeUserID
            let receipt = try await mapping("chat") { try await target.send(attachment) }
            return Self.receipt(receipt, call.handles.issue(receipt, kind: "receipt", account: account))
        }
        methods.asynchronous["chat.conversation.download"] = { call in
            let target = try Self.conversation(call)
            let eventID = try call.params.eventID("eventID")
            let path = try call.params.string("path")
            guard !path.isEmpty else { throw ContractError.invalidParams("path", "a non-empty file path") }
            let thumbnail = try call.params.optionalBool("thumbnail") ?? false
            guard let media = Self.media(of: eventID, in: target.timeline.value) else {
                throw ContractError(ChatError.unknownEvent(eventID), domain: "chat")
            }
            let client = target.media
            let size = try await mapping("media") { () async throws -> Int64 in
                thumbnail
                    ? try await client.downloadThumbnail(media, toFileAt: path)
                    : try await client.download(media, toFileAt: path)
            }
            return .object(["size": .int(Int(size))])
        }
        methods.subscriptions["conversation.uploads"] = { call in
            ContractSource(try Self.conversation(call).uploads) { uploads in
                .array(
                    uploads.sorted { $0.key.rawValue < $1.key.rawValue }.map { transactionID, progress in
                        .object([
                            "transactionID": .string(transactionID.rawValue),
                            "completedBytes": .int(Int(progress.completedBytes)),
                            "totalBytes": progress.totalBytes.map { .int(Int($0)) },
                        ])
                    })
            }
        }
        return methods
    }

    private static func conversation(_ call: ContractCall) throws(ContractError) -> Conversation {
        try call.handles.resolve(
            call.params, "conversation", kind: "conversation", as: Conversation.self, domain: "chat")
    }

    /// The attachment `params` describe: `path`, `contentType`, and optionally `kind`,
    /// `fileName`, `caption`, `width`, `height`, `durationMs`.
    private static func attachment(_ params: ContractParams) throws(ContractError) -> OutgoingAttachment {
        let path = try params.string("path")
        guard !path.isEmpty else { throw ContractError.invalidParams("path", "a non-empty file path") }
        let contentType = try params.string("contentType")
        guard contentType.contains("/") else { throw ContractError.invalidParams("contentType", "a MIME type") }
        let kind: OutgoingAttachment.Kind?
        switch try params.optionalString("kind") {
        case nil: kind = nil
        case let name?:
            guard let named = OutgoingAttachment.Kind(rawValue: name) else {
                throw ContractError.invalidParams("kind", "image, file, audio or video")
            }
            kind = named
        }
        let fileName = try params.optionalString("fileName")
        if fileName?.isEmpty == true { throw ContractError.invalidParams("fileName", "a non-empty string") }
        let pixels = 1...100_000
        return OutgoingAttachment(
            path: path, contentType: contentType, kind: kind, fileName: fileName,
            caption: try params.optionalString("caption"), width: try params.optionalInt("width", in: pixels),
            height: try params.optionalInt("height", in: pixels),
            duration: try params.optionalInt("durationMs", in: 0...86_400_000).map { .milliseconds($0) })
    }

    /// The media of the timeline item of `eventID`, if it is an image, a file, audio or video.
    private static func media(of eventID: EventID, in items: [TimelineItem]) -> MediaInfo? {
        guard let item = items.last(where: { $0.eventID == eventID }) else { return nil }
        switch item.content {
        case .image(let media), .file(let media), .audio(let media), .video(let media): return media
        default: return nil
        }
    }
}
