// The send queue's rules, one helper per event. Each helper edits the next state in place and
// returns the effects. `nil` means the queue's status gives the event no meaning (the machine
// ignores it, and the chart has no arrow); `[]` for an event about an unknown, finished or
// busy item means it is understood and changes nothing (a targetless arrow in the chart).

extension SendQueueMachine {
    /// Items from an earlier run go in front of anything enqueued since, in their stored order.
    func restore(_ restored: [SendQueueItem], in state: inout State) -> [Effect]? {
        guard state.status == .idle else { return nil }
        var effects: [Effect] = []
        var fresh: [SendQueueItem] = []
        for var item in restored where state.index(of: item.transactionID) == nil {
            item.isPersisted = true
            // A request that was running when the app stopped is simply tried again.
            if item.status.isInFlight { item.status = .queued }
            if item.status == .cancelled { effects.append(.discard(item.transactionID)) }
            fresh.append(item)
        }
        state.items = fresh + state.items
        return effects + advance(&state)
    }

    func enqueue(
        _ transactionID: TransactionID, _ content: MessageContent, attachment: QueuedAttachment?, in state: inout State
    ) -> [Effect]? {
        guard state.index(of: transactionID) == nil else { return [] }
        let item = SendQueueItem(transactionID: transactionID, content: content, attachment: attachment)
        state.items.append(item)
        return [.persist(item)]
    }

    func persisted(_ transactionID: TransactionID, in state: inout State) -> [Effect]? {
        guard let index = state.index(of: transactionID), !state.items[index].isPersisted else { return [] }
        state.items[index].isPersisted = true
        // Cancelled before the row existed: delete it now that it does.
        if state.items[index].status == .cancelled { return [.discard(transactionID)] }
        return advance(&state)
    }

    /// An item the store never held is dropped: nothing of it was sent (only persisted items
    /// are), so the queue goes on with the next one instead of waiting for it.
    func persistFailed(_ transactionID: TransactionID, in state: inout State) -> [Effect]? {
        guard let index = state.index(of: transactionID), !state.items[index].isPersisted else { return [] }
        state.items.remove(at: index)
        return advance(&state)
    }

    /// The thumbnail is made and stored with the content naming it (or none could be made): the
    /// item goes on to its encryption or reservation.
    func thumbnailed(
        _ transactionID: TransactionID, _ result: Result<ThumbnailedAttachment, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        guard let head = inFlightHead(transactionID, .thumbnailing, in: state) else { return [] }
        switch result {
        case .success(let made):
            state.items[head].content = made.content
            state.items[head].attachment?.thumbnail = made.thumbnail
            state.items[head].attachment?.needsThumbnail = false
            return nextStep(head, in: &state)
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    /// The URI is stored with the content that names it: the upload may start.
    func reserved(
        _ transactionID: TransactionID, _ result: Result<MediaReservation, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        guard let head = inFlightHead(transactionID, .reservingMedia, in: state) else { return [] }
        switch result {
        case .success(let reservation):
            state.items[head].content = reservation.content
            state.items[head].attachment?.mediaURI = reservation.uri
            if let thumbnailURI = reservation.thumbnailURI {
                state.items[head].attachment?.thumbnail?.uri = thumbnailURI
            }
            return nextStep(head, in: &state)
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    /// The bytes are up and that is stored with the content the event is made of (an encrypted
    /// file's with its ciphertext's hash): the event (encrypted first in an encrypted room) goes next.
    func uploaded(
        _ transactionID: TransactionID, _ result: Result<MessageContent, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        guard let head = inFlightHead(transactionID, .uploading, in: state) else { return [] }
        switch result {
        case .success(let content):
            state.items[head].content = content
            state.items[head].attachment?.isUploaded = true
            return nextStep(head, in: &state)
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    /// The plain copy is now ciphertext and stored so: the URI is reserved next (a new one: the
    /// old reservation, if any, may already hold the plain bytes and is left unused).
    func attachmentEncrypted(
        _ transactionID: TransactionID, _ result: Result<EncryptedAttachmentCopy, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        guard let head = inFlightHead(transactionID, .encrypting, in: state),
            let attachment = state.items[head].attachment, !attachment.isUploaded
        else { return [] }
        switch result {
        case .success(let copy):
            state.items[head].content = copy.content
            state.items[head].attachment = copy.attachment
            return nextStep(head, in: &state)
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    /// The head finished one step of its way: it starts the next, as a retry would.
    private func nextStep(_ head: Int, in state: inout State) -> [Effect] {
        state.items[head].status = .queued
        state.status = .idle
        return advance(&state)
    }

    func encrypted(
        _ transactionID: TransactionID, _ result: Result<MessageContent, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        // An attachment's copy being encrypted is not its event being encrypted.
        guard let head = inFlightHead(transactionID, .encrypting, in: state),
            state.items[head].attachment?.isUploaded ?? true
        else { return [] }
        switch result {
        case .success(let content):
            state.items[head].encryptedContent = content
            state.items[head].status = .sending
            return [.sendEvent(transactionID, content)]
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    func responded(
        _ transactionID: TransactionID, _ result: Result<EventID, SendError>, in state: inout State
    ) -> [Effect]? {
        guard state.status == .sending else { return nil }
        guard let head = inFlightHead(transactionID, .sending, in: state) else { return [] }
        switch result {
        case .success(let eventID):
            state.items[head].status = .sent(eventID)
            state.status = .idle
            return [.recordSent(transactionID, eventID)] + advance(&state)
        case .failure(let error):
            return fail(head, error, in: &state)
        }
    }

    /// The remote echo proves the server has the event, whatever the queue believed.
    func echoed(_ transactionID: TransactionID, _ eventID: EventID, in state: inout State) -> [Effect]? {
        guard let index = state.index(of: transactionID) else { return [] }
        let item = state.items[index]
        switch item.status {
        case .sent:
            // The PUT answered first; the remote echo now replaces the local one.
            state.items.remove(at: index)
            return []
        case .cancelled:
            // An earlier attempt reached the server before the cancel; sync shows it anyway.
            return []
        case .queued, .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending, .failed:
            let isHead = index == state.headIndex
            var effects: [Effect] = item.status.isInFlight ? [.cancel(Self.requestKey)] : []
            state.items.remove(at: index)
            effects.append(.recordSent(transactionID, eventID))
            guard isHead else { return effects }
            return effects + headLeft(&state)
        }
    }

    /// The retry timer fired, or the network came back while waiting for it.
    func retryNow(in state: inout State, cancellingTimer: Bool) -> [Effect]? {
        guard case .waitingRetry = state.status else { return nil }
        state.status = .idle
        return (cancellingTimer ? [.cancel(Self.retryKey)] : []) + advance(&state)
    }

    func tokenRefreshed(in state: inout State) -> [Effect]? {
        guard state.status == .waitingToken else { return nil }
        state.status = .idle
        return advance(&state)
    }

    func resend(_ transactionID: TransactionID, in state: inout State) -> [Effect]? {
        guard case .blocked = state.status else { return nil }
        guard let index = state.index(of: transactionID), case .failed = state.items[index].status else { return [] }
        state.items[index].status = .queued
        state.items[index].failedAttempts = 0
        var effects: [Effect] = [.clearFailure(transactionID)]
        if state.status == .blocked(transactionID) {
            state.status = .idle
            effects += advance(&state)
        }
        return effects
    }

    /// Cancels an item that is not in flight, or whose request can still be recalled: its
    /// encryption, its attachment's thumbnail, reservation or upload (no event names the media yet). A PUT
    /// in flight cannot be recalled (the server may already have the event), so cancelling a
    /// `sending` item is ignored; redact it once sent.
    func cancel(_ transactionID: TransactionID, in state: inout State) -> [Effect]? {
        guard let index = state.index(of: transactionID) else { return [] }
        let item = state.items[index]
        switch item.status {
        case .sending, .sent, .cancelled:
            return []
        case .queued, .thumbnailing, .reservingMedia, .uploading, .encrypting, .failed:
            let isHead = index == state.headIndex
            state.items[index].status = .cancelled
            var effects: [Effect] = item.status.isInFlight ? [.cancel(Self.requestKey)] : []
            // Not yet in the store: the discard follows its `persisted`.
            if item.isPersisted { effects.append(.discard(transactionID)) }
            guard isHead else { return effects }
            return effects + headLeft(&state)
        }
    }

    func discarded(_ transactionID: TransactionID, in state: inout State) -> [Effect]? {
        guard let index = state.index(of: transactionID), state.items[index].status == .cancelled else { return [] }
        state.items.remove(at: index)
        return []
    }

    func enableEncryption(in state: inout State) -> [Effect]? {
        guard !state.roomIsEncrypted else { return [] }
        state.roomIsEncrypted = true
        return []
    }

    // MARK: Shared rules

    /// Starts the head if the queue is idle and the head may start: the first active item, once
    /// persisted, is encrypted (encrypted rooms, first time) or sent; a failed head blocks.
    func advance(_ state: inout State) -> [Effect] {
        guard state.status == .idle, let head = state.headIndex else { return [] }
        let item = state.items[head]
        switch item.status {
        case .failed:
            state.status = .blocked(item.transactionID)
            return []
        case .queued:
            guard item.isPersisted else { return [] }
            state.status = .sending
            // The thumbnail first, from the copy as it was queued (plain or ciphertext): it
            // travels with the file, through the encryption below when the room became encrypted.
            if let attachment = item.attachment, attachment.needsThumbnail, !attachment.isUploaded {
                state.items[head].status = .thumbnailing
                return [.makeThumbnail(item.transactionID, item.content, attachment)]
            }
            // Whether the file goes up encrypted is decided now, from the room as it is when its
            // upload starts: a copy queued in the clear is encrypted first in a room that is
            // encrypted by now.
            if let attachment = item.attachment, !attachment.isUploaded, !attachment.isEncrypted,
                state.roomIsEncrypted
            {
                state.items[head].status = .encrypting
                return [.encryptAttachment(item.transactionID, item.content, attachment)]
            }
            if let attachment = item.attachment, attachment.mediaURI == nil {
                state.items[head].status = .reservingMedia
                return [.reserveMedia(item.transactionID, item.content)]
            }
            if let attachment = item.attachment, !attachment.isUploaded {
                state.items[head].status = .uploading
                return [.uploadMedia(item.transactionID, item.content, attachment)]
            }
            if state.roomIsEncrypted && item.encryptedContent == nil {
                state.items[head].status = .encrypting
                return [.encrypt(item.transactionID, item.content)]
            }
            state.items[head].status = .sending
            return [.sendEvent(item.transactionID, item.encryptedContent ?? item.content)]
        case .thumbnailing, .reservingMedia, .uploading, .encrypting, .sending, .sent, .cancelled:
            // An idle queue never has its head in flight; nothing to start.
            return []
        }
    }

    /// The head was removed (echoed or cancelled) while the queue waited on it: stop waiting
    /// and start the next item. A queue waiting for a token keeps waiting: the token is still bad.
    func headLeft(_ state: inout State) -> [Effect] {
        switch state.status {
        case .waitingToken:
            return []
        case .waitingRetry:
            state.status = .idle
            return [.cancel(Self.retryKey)] + advance(&state)
        case .sending, .blocked, .idle:
            state.status = .idle
            return advance(&state)
        }
    }

    /// The head's index when `transactionID` is the head and in `status`, the queue sending.
    func inFlightHead(_ transactionID: TransactionID, _ status: SendItemStatus, in state: State) -> Int? {
        guard state.status == .sending, let head = state.headIndex else { return nil }
        let item = state.items[head]
        guard item.transactionID == transactionID, item.status == status else { return nil }
        return head
    }

    /// Classifies a failed attempt of the head.
    func fail(_ head: Int, _ error: SendError, in state: inout State) -> [Effect] {
        let transactionID = state.items[head].transactionID
        switch error {
        case .network, .server, .rateLimited:
            state.items[head].status = .queued
            state.items[head].failedAttempts += 1
            let attempt = state.items[head].failedAttempts
            var retryAfter: Duration?
            if case .rateLimited(let after) = error { retryAfter = after }
            let delay = state.jitter.delay(attempt: attempt, backoff: backoff, retryAfter: retryAfter)
            state.status = .waitingRetry(attempt: attempt)
            return [.scheduleRetry(after: delay)]
        case .unknownToken:
            state.items[head].status = .queued
            state.status = .waitingToken
            return [.requestTokenRefresh]
        case .permanent(let reason):
            state.items[head].status = .failed(reason)
            state.status = .blocked(transactionID)
            return [.recordFailure(transactionID, reason)]
        }
    }
}
