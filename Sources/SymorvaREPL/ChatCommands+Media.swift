import Foundation
import SymorvaChat
import SymorvaKit
import SymorvaMachines

// The media commands: `attach` and `download` in the open conversation, `profile name|avatar`
// for the account, `room topic|avatar` for the open conversation's room.

extension ChatCommands {
    /// `attach <path> [--caption <text>…]`: sends the file, printing the upload's progress in
    /// quarters and `sent <event>` once the server has the event.
    static let attach = REPLCommand(
        "attach", usage: "attach <path> [--caption <text> …]",
        summary: "send a file to the open conversation (an image when it is one)",
        parse: { arguments throws(REPLError) -> (String, String?) in
            let path = try arguments.next()
            var caption: String?
            if let flag = arguments.optional() {
                guard flag == "--caption" else { throw arguments.usageError }
                caption = try arguments.rest(minimum: 1).joined(separator: " ")
            }
            return (path, caption)
        },
        run: { arguments, context async throws(REPLError) in
            let conversation = try current(context)
            let attachment = OutgoingAttachment(
                path: arguments.0, contentType: contentType(ofFileNamed: arguments.0), caption: arguments.1)
            let receipt = try await failing { () async throws(ChatError) in try await conversation.send(attachment) }
            let transactionID = receipt.transactionIDs[0]
            let output = context.output
            let printed = Lock(0)
            let stop = conversation.uploads.subscribe { uploads in
                guard let fraction = uploads[transactionID]?.fractionCompleted else { return }
                let quarter = Int(fraction * 4)
                let due = printed.withLock { last -> Bool in
                    guard quarter > last else { return false }
                    last = quarter
                    return true
                }
                if due { output.print("upload \(quarter * 25)%") }
            }
            defer { stop() }
            for await state in receipt.state.values {
                switch state {
                case .sent(let eventID):
                    output.print("sent \(eventID)")
                    return
                case .failed(let reason): throw .commandFailed("not sent: \(reason)")
                case .sending: continue
                }
            }
            throw .commandFailed("cancelled (queued \(transactionID))")
        })

    /// `download <message> <path>`: saves an attachment of the open conversation, printing its
    /// size, and `sha256 ok` for an encrypted file (decrypted after its hash was checked).
    static let download = REPLCommand(
        "download", usage: "download <message> <path>", summary: "save an attachment of the open conversation",
        parse: { arguments throws(REPLError) in (try arguments.next(), try arguments.next()) },
        run: { arguments, context async throws(REPLError) in
            let conversation = try current(context)
            let eventID = try resolveEvent(arguments.0, context)
            // The synced row, or our own local echo the server has accepted as that event.
            let found = conversation.timeline.value.first { item in
                item.id == .event(eventID) || item.sendState == .sent(eventID)
            }
            guard let item = found else {
                throw .invalidArgument("message '\(arguments.0)' is not in the loaded timeline")
            }
            let info: MediaInfo
            switch item.content {
            case .image(let media), .file(let media), .audio(let media), .video(let media): info = media
            default: throw .invalidArgument("message '\(arguments.0)' has no attachment")
            }
            guard info.source != nil || info.isEncrypted else {
                throw .commandFailed("the attachment has no downloadable source")
            }
            let size = try await failing { () async throws(ChatError) -> Int64 in
                do throws(MediaError) {
                    return try await conversation.media.download(info, toFileAt: arguments.1)
                } catch {
                    throw .media(error)
                }
            }
            context.output.print("saved \(size) bytes")
            // An encrypted file is written only after its ciphertext's hash matched the event's.
            if info.isEncrypted { context.output.print("sha256 ok") }
        })

    /// `profile name <text…>` or `profile avatar <path>`.
    static let profile = REPLCommand(
        "profile", usage: "profile name <text> … | profile avatar <path>",
        summary: "set your display name or avatar",
        parse: { arguments throws(REPLError) in
            let what = try arguments.next(oneOf: ["name", "avatar"])
            return (what, what == "name" ? try arguments.rest(minimum: 1).joined(separator: " ") : try arguments.next())
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            if arguments.0 == "name" {
                try await failing { () async throws(ChatError) in try await chat.setDisplayName(arguments.1) }
                context.output.print("display name set")
            } else {
                let uri = try await failing { () async throws(ChatError) in
                    try await chat.setAvatar(fileAt: arguments.1, contentType: contentType(ofFileNamed: arguments.1))
                }
                context.output.print("avatar set \(uri.uriString)")
            }
        })

    /// `room topic <text…>` or `room avatar <path>`, for the open conversation's room.
    static let room = REPLCommand(
        "room", usage: "room topic <text> … | room avatar <path>",
        summary: "set the open conversation's topic or avatar (power levels checked first)",
        parse: { arguments throws(REPLError) in
            let what = try arguments.next(oneOf: ["topic", "avatar"])
            return (
                what, what == "topic" ? try arguments.rest(minimum: 1).joined(separator: " ") : try arguments.next()
            )
        },
        run: { arguments, context async throws(REPLError) in
            let chat = try client(context)
            let roomID = try current(context).id
            if arguments.0 == "topic" {
                try await failing { () async throws(ChatError) in try await chat.setRoomTopic(arguments.1, in: roomID) }
                context.output.print("topic set")
            } else {
                let uri = try await failing { () async throws(ChatError) in
                    try await chat.setRoomAvatar(
                        fileAt: arguments.1, contentType: contentType(ofFileNamed: arguments.1), in: roomID)
                }
                context.output.print("room avatar set \(uri.uriString)")
            }
        })

    /// The MIME type a file's extension suggests (`application/octet-stream` otherwise).
    static func contentType(ofFileNamed name: String) -> String {
        let types = [
            "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
            "mp3": "audio/mpeg", "ogg": "audio/ogg", "m4a": "audio/mp4", "wav": "audio/wav", "mp4": "video/mp4",
            "webm": "video/webm", "mov": "video/quicktime", "pdf": "application/pdf", "txt": "text/plain",
        ]
        let suffix = name.split(separator: ".").last.map { $0.lowercased() } ?? ""
        return types[suffix] ?? "application/octet-stream"
    }
}
