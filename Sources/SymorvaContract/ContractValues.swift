import SymorvaKit
import SymorvaMatrix

/// The SDK's product values as the contract's JSON (`contract/symorva.d.ts` declares each
/// shape): IDs as strings, amounts as decimal strings with their precision, enums as
/// `{"kind": caseName, …}` tagged unions, durations and instants in milliseconds.
package enum ContractValues {
    package static func account(_ account: Account) -> JSONValue {
        .object([
            "userID": .string(account.userID.rawValue), "deviceID": .string(account.deviceID.rawValue),
            "homeserverURL": .string(account.homeserverURL.rawValue),
        ])
    }

    package static func sessionState(_ state: SessionState) -> JSONValue {
        switch state {
        case .launching: .object(["kind": "launching"])
        case .signedOut: .object(["kind": "signedOut"])
        case .signingIn: .object(["kind": "signingIn"])
        case .restoring(let userID): .object(["kind": "restoring", "userID": .string(userID.rawValue)])
        case .signedIn(let account): .object(["kind": "signedIn", "account": Self.account(account)])
        case .softLoggedOut(let account): .object(["kind": "softLoggedOut", "account": Self.account(account)])
        case .switching(let userID): .object(["kind": "switching", "userID": .string(userID.rawValue)])
        case .signingOut(let userID): .object(["kind": "signingOut", "userID": .string(userID.rawValue)])
        case .unavailable(let userID, let error):
            .object([
                "kind": "unavailable", "userID": .string(userID.rawValue),
                "error": ContractError(error, domain: "session").json,
            ])
        }
    }

    package static func conversationList(_ list: ConversationList) -> JSONValue {
        .object([
            "status": .string(list.status.rawValue), "userID": list.userID.map { .string($0.rawValue) },
            "items": .array(list.items.map(conversationListItem)),
        ])
    }

    package static func conversationListItem(_ item: ConversationListItem) -> JSONValue {
        .object([
            "id": .string(item.id.rawValue), "name": .string(item.name), "topic": item.topic.map(JSONValue.string),
            "avatarURL": item.avatarURL.map(JSONValue.string),
            "lastMessage": item.lastMessage.map { preview in
                .object([
                    "eventID": .string(preview.eventID), "sender": .string(preview.sender),
                    "type": .string(preview.type),
                    "timestamp": .number(Double(preview.originServerTS)), "body": preview.body.map(JSONValue.string),
                    "messageType": preview.messageType.map(JSONValue.string), "isRedacted": .bool(preview.isRedacted),
                ])
            },
            "unreadCount": .int(item.unreadCount), "highlightCount": .int(item.highlightCount),
            "membership": .string(item.membership.rawValue), "isFavourite": .bool(item.isFavourite),
            "isLowPriority": .bool(item.isLowPriority), "isPinned": .bool(item.isPinned),
            "isMuted": .bool(item.isMuted),
            "isEncrypted": .bool(item.isEncrypted),
            "latestActivity": item.latestActivity.map { .number(Double($0.rawValue)) },
        ])
    }

    package static func timeline(_ items: [TimelineItem]) -> JSONValue { .array(items.map(timelineItem)) }

    package static func timelineItem(_ item: TimelineItem) -> JSONValue {
        let id: String =
            switch item.id {
            case .event(let eventID): eventID.rawValue
            case .local(let transactionID): transactionID.rawValue
            }
        return .object([
            "id": .string(id), "eventID": item.eventID.map { .string($0.rawValue) },
            "transactionID": item.transactionID.map { .string($0.rawValue) }, "sender": .string(item.sender.rawValue),
            "senderDisplayName": item.senderProfile.displayName.map(JSONValue.string), "isOwn": .bool(item.isOwn),
            "timestamp": item.timestamp.map { .number(Double($0.rawValue)) }, "content": content(item.content),
            "isEdited": .bool(item.isEdited),
            "reactions": .array(
                item.reactions.map { reaction in
                    .object([
                        "key": .string(reaction.key), "senders": .array(reaction.senders.map { .string($0.rawValue) }),
                        "includesOwn": .bool(reaction.includesOwn),
                    ])
                }),
            "inReplyTo": item.inReplyTo.map { .string($0.rawValue) },
            "readBy": .array(item.readBy.map { .string($0.rawValue) }), "sendState": item.sendState.map(sendState),
            "isEncrypted": .bool(item.encryption != nil),
        ])
    }

    package static func content(_ content: TimelineItemContent) -> JSONValue {
        switch content {
        case .message(let kind, let body):
            .object(["kind": "message", "messageKind": .string(kind.rawValue), "body": .string(body)])
        case .image(let media): .object(["kind": "image", "media": Self.media(media)])
        case .file(let media): .object(["kind": "file", "media": Self.media(media)])
        case .audio(let media): .object(["kind": "audio", "media": Self.media(media)])
        case .video(let media): .object(["kind": "video", "media": Self.media(media)])
        case .membership(let userID, let membership, let displayName):
            .object([
                "kind": "membership", "userID": .string(userID.rawValue),
                "membership": membership.map { .string(ContractError.caseName(of: $0)) },
                "displayName": displayName.map(JSONValue.string),
            ])
        case .stateChange(let change): .object(["kind": "stateChange", "sentence": .string(change.sentence)])
        case .redacted: .object(["kind": "redacted"])
        case .unableToDecrypt(let reason): .object(["kind": "unableToDecrypt", "reason": .string(reason.rawValue)])
        case .unsupported(let type): .object(["kind": "unsupported", "type": .string(type)])
        }
    }

    static func media(_ media: MediaInfo) -> JSONValue {
        .object([
            "body": .string(media.body), "url": media.url.map(JSONValue.string),
            "fileName": media.fileName.map(JSONValue.string),
            "durationMs": media.duration.map {
                .int(Int($0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000))
            },
            "mimeType": media.mimeType.map(JSONValue.string), "size": media.size.map(JSONValue.int),
            "width": media.width.map(JSONValue.int), "height": media.height.map(JSONValue.int),
            // An encrypted file has no url (its key travels in the event); the protocol has no
            // download yet, so a client can say what it is but not fetch it.
            "isEncrypted": .bool(media.isEncrypted), "hasThumbnail": .bool(media.hasThumbnail),
        ])
    }

    package static func sendState(_ state: SendState) -> JSONValue {
        switch state {
        case .sending: .object(["kind": "sending"])
        case .sent(let eventID): .object(["kind": "sent", "eventID": .string(eventID.rawValue)])
        case .failed(let reason):
            .object([
                "kind": "failed", "reason": .string(ContractError.caseName(of: reason)),
                "details": ContractError.caseDetails(of: reason),
            ])
        }
    }

    package static func amount(_ amount: Amount) -> JSONValue {
        .object(["value": .string(amount.formatted), "precision": .int(amount.precision)])
    }

    package static func asset(_ asset: Asset) -> JSONValue {
        .object(["code": .string(asset.code), "precision": .int(asset.precision)])
    }

    package static func summary(_ summary: TransferSummary) -> JSONValue {
        .object([
            "draftID": .string(summary.draftID.rawValue), "recipient": .string(summary.recipient.rawValue),
            "asset": asset(summary.asset), "amount": amount(summary.amount), "fee": amount(summary.fee),
            "total": amount(summary.total),
        ])
    }

    package static func transfer(_ transfer: Transfer) -> JSONValue {
        .object([
            "id": .string(transfer.id.rawValue), "commandID": .string(transfer.commandID.rawValue),
            "summary": summary(transfer.summary),
        ])
    }

    package static func failure(_ failure: TransferFailure) -> JSONValue {
        var members: [String: JSONValue] = ["kind": .string(ContractError.caseName(of: failure))]
        if case .object(let details)? = ContractError.caseDetails(of: failure) {
            members.merge(details) { current, _ in current }
        }
        return .object(members)
    }

    package static func balance(_ balance: Balance) -> JSONValue {
        .object(["asset": asset(balance.asset), "amount": amount(balance.amount)])
    }

    package static func ledgerEntry(_ entry: LedgerEntry) -> JSONValue {
        .object([
            "transferID": .string(entry.transferID.rawValue), "kind": .string(entry.kind.rawValue),
            "direction": .string(entry.direction.rawValue), "commandID": entry.commandID.map { .string($0.rawValue) },
            "sender": entry.sender.map { .string($0.rawValue) }, "recipient": .string(entry.recipient.rawValue),
            "asset": asset(entry.asset), "amount": amount(entry.amount), "fee": amount(entry.fee),
            "total": amount(entry.total), "createdAt": .number(Double(entry.createdAtMilliseconds)),
        ])
    }

    package static func transferState(_ state: TransferState) -> JSONValue {
        .object(["kind": .string(state.caseName)])
    }

    package static func participant(_ participant: MeetingParticipant) -> JSONValue {
        .object([
            "userID": .string(participant.userID.rawValue), "role": .string(participant.role.rawValue),
            "handRaised": .bool(participant.handRaised),
        ])
    }

    package static func grantInfo(_ info: GrantInfo) -> JSONValue {
        .object([
            "id": .string(info.id.rawValue), "roomID": .string(info.roomID.rawValue), "scope": scope(info.scope),
            "expiresAt": .number(Double(info.expiresAt.millisecondsSince1970)),
            "status": .string(ContractError.caseName(of: info.status)),
        ])
    }

    package static func scope(_ scope: GrantScope) -> JSONValue {
        switch scope {
        case .selectedMessages(let ids):
            .object(["kind": "selectedMessages", "eventIDs": .array(ids.map { .string($0.rawValue) })])
        case .conversation(let since): .object(["kind": "conversation", "since": .string(since.rawValue)])
        }
    }

    package static func consentSheet(_ sheet: ConsentSheet) -> JSONValue {
        .object([
            "roomID": .string(sheet.roomID.rawValue), "scope": scope(sheet.scope),
            "purpose": .string(sheet.purpose.rawValue),
            "recipient": .string(sheet.recipient), "lifetime": .number(Double(sheet.lifetime.wholeMilliseconds)),
            "text": .string(sheet.text),
        ])
    }

    package static func studioSummary(_ summary: Summary) -> JSONValue {
        .object([
            "grantID": .string(summary.grantID.rawValue), "backend": .string(summary.backend),
            "itemCount": .int(summary.itemCount),
            "points": .array(
                summary.points.map { point in
                    .object([
                        "text": .string(point.text), "eventIDs": .array(point.eventIDs.map { .string($0.rawValue) }),
                    ])
                }),
            "citedEventIDs": .array(summary.citedEventIDs.map { .string($0.rawValue) }),
        ])
    }
}

extension JSONValue: ExpressibleByStringLiteral {
    /// A string literal as a JSON string (the tags of the contract's unions).
    package init(stringLiteral value: String) { self = .string(value) }
}
