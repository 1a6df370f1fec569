import SymorvaMachines
import SymorvaRuntime
import SymorvaTesting
import Testing

/// A simulated world around one send queue: the store, the encryptor, an idempotent server
/// and the host's key rules (a keyed effect replaces the one under its key; `cancel` drops it).
/// Each step picks, from a seeded stream, either a user action or the completion of a pending
/// effect with a random outcome, and checks the queue's invariants after every transition.
struct SendQueueWorld {
    typealias Machine = SendQueueMachine
    let machine = SendQueueMachine()
    var state: Machine.State
    var random: JitterSource

    // Pending effects, as the host would run them.
    var request: Machine.Effect?
    var retryTimer = false
    var persisting: [TransactionID] = []
    var discarding: [TransactionID] = []
    var refreshing = false

    // The server: accepted transaction IDs, idempotent by transaction ID.
    var accepted: [TransactionID: EventID] = [:]
    var acceptedOrder: [TransactionID] = []
    var echoesPending: [TransactionID] = []

    // History for the invariants.
    var enqueueOrder: [TransactionID] = []
    var persisted: Set<TransactionID> = []
    var cancelled: Set<TransactionID> = []
    var firstContent: [TransactionID: MessageContent] = [:]
    var recordedSent: [TransactionID] = []
    var nextID = 0
    var visited: [Machine.State] = []

    // Attachments: the URI each item's reservation stored, and the items whose bytes are up.
    var attachments: Set<TransactionID> = []
    var reservedURI: [TransactionID: MediaURI] = [:]
    var uploadedItems: Set<TransactionID> = []
    var reservations = 0
    // Attachments queued with their thumbnail to make, and those whose thumbnail is stored.
    var thumbnailsWanted: Set<TransactionID> = []
    var thumbnailed: Set<TransactionID> = []

    init(seed: UInt64, encrypted: Bool) {
        state = Machine.State(roomIsEncrypted: encrypted, jitter: JitterSource(seed: seed ^ 0xABCD))
        random = JitterSource(seed: seed)
    }

    mutating func pick(_ count: Int) -> Int { min(count - 1, Int(random.next() * Double(count))) }
    mutating func chance(_ probability: Double) -> Bool { random.next() < probability }

    mutating func send(_ event: Machine.Event, sourceLocation: SourceLocation = #_sourceLocation) {
        let transition = machine.transition(from: state, on: event)
        state = transition.nextState(after: state)
        visited.append(state)
        if case .cancelRequested(let id) = event,
            state.items.contains(where: { $0.transactionID == id && $0.status == .cancelled })
        {
            cancelled.insert(id)
        }
        if case .persisted(let id) = event, !transition.isIgnored { persisted.insert(id) }
        for effect in transition.effects { launch(effect, sourceLocation: sourceLocation) }
        checkInvariants(sourceLocation: sourceLocation)
    }

    mutating func launch(_ effect: Machine.Effect, sourceLocation: SourceLocation) {
        switch effect {
        case .persist(let item):
            persisting.append(item.transactionID)
        case .reserveMedia(let id, _), .uploadMedia(let id, _, _), .encrypt(let id, _), .sendEvent(let id, _),
            .encryptAttachment(let id, _, _), .makeThumbnail(let id, _, _):
            #expect(persisted.contains(id), "request for \(id) before it was persisted", sourceLocation: sourceLocation)
            #expect(!cancelled.contains(id), "request for \(id) after it was cancelled", sourceLocation: sourceLocation)
            if case .reserveMedia = effect {
                #expect(reservedURI[id] == nil, "\(id) reserved a second URI", sourceLocation: sourceLocation)
            }
            if case .makeThumbnail = effect {
                #expect(thumbnailsWanted.contains(id), "\(id) thumbnailed unasked", sourceLocation: sourceLocation)
                #expect(!thumbnailed.contains(id), "\(id) thumbnailed twice", sourceLocation: sourceLocation)
                #expect(
                    reservedURI[id] == nil, "\(id) thumbnailed after its reservation", sourceLocation: sourceLocation)
            }
            if thumbnailsWanted.contains(id), !thumbnailed.contains(id) {
                switch effect {
                case .makeThumbnail: break
                default:
                    Issue.record("\(id) went on before its thumbnail was stored", sourceLocation: sourceLocation)
                }
            }
            if case .encryptAttachment(_, _, let attachment) = effect {
                #expect(state.roomIsEncrypted, "\(id) encrypted in a plain room", sourceLocation: sourceLocation)
                #expect(!attachment.isEncrypted, "\(id) encrypted twice", sourceLocation: sourceLocation)
                #expect(!uploadedItems.contains(id), "\(id) encrypted after its upload", sourceLocation: sourceLocation)
            }
            if case .uploadMedia(_, _, let attachment) = effect {
                // The decision to encrypt is the room's when the upload starts.
                #expect(
                    !state.roomIsEncrypted || attachment.isEncrypted, "\(id) uploads in the clear to an encrypted room",
                    sourceLocation: sourceLocation)
                #expect(!uploadedItems.contains(id), "\(id) uploaded twice", sourceLocation: sourceLocation)
                #expect(
                    attachment.mediaURI != nil && attachment.mediaURI == reservedURI[id],
                    "\(id) uploads to a URI that was not stored", sourceLocation: sourceLocation)
            }
            if attachments.contains(id), case .encrypt = effect {
                #expect(uploadedItems.contains(id), "\(id) encrypted before its upload", sourceLocation: sourceLocation)
            }
            if attachments.contains(id), case .sendEvent(_, let content) = effect {
                #expect(uploadedItems.contains(id), "\(id) sent before its upload", sourceLocation: sourceLocation)
                if content.eventType != "m.room.encrypted", let uri = reservedURI[id] {
                    #expect(
                        content.json.contains(uri.uriString), "\(id) sent without its URI",
                        sourceLocation: sourceLocation)
                }
            }
            if case .sendEvent(_, let content) = effect {
                // A retry sends the same bytes; the one allowed change is plaintext to ciphertext when
                // the room turned on encryption between two attempts.
                var first = firstContent[id, default: content]
                if first.eventType != "m.room.encrypted" && content.eventType == "m.room.encrypted" { first = content }
                firstContent[id] = first
                #expect(first == content, "content of \(id) changed across retries", sourceLocation: sourceLocation)
            }
            request = effect
        case .scheduleRetry:
            retryTimer = true
        case .requestTokenRefresh:
            refreshing = true
        case .recordSent(let id, let eventID):
            #expect(!recordedSent.contains(id), "\(id) recorded sent twice", sourceLocation: sourceLocation)
            #expect(
                accepted[id] == eventID, "\(id) recorded sent but the server does not have it",
                sourceLocation: sourceLocation)
            recordedSent.append(id)
        case .discard(let id):
            discarding.append(id)
        case .recordFailure, .clearFailure:
            break
        case .cancel(let key):
            if key == SendQueueMachine.requestKey { request = nil }
            if key == SendQueueMachine.retryKey { retryTimer = false }
        }
    }

    func checkInvariants(sourceLocation: SourceLocation) {
        let inFlight = state.items.filter(\.status.isInFlight)
        #expect(inFlight.count <= 1, "more than one item in flight", sourceLocation: sourceLocation)
        if let item = inFlight.first {
            #expect(
                state.headIndex.map { state.items[$0] } == item, "in-flight item is not the head",
                sourceLocation: sourceLocation)
            #expect(state.status == .sending, sourceLocation: sourceLocation)
        }
        // Items keep enqueue order (transaction IDs never change, never reorder).
        let order = state.items.map(\.transactionID)
        let positions = order.compactMap { enqueueOrder.firstIndex(of: $0) }
        #expect(
            positions == positions.sorted(), "queue order differs from enqueue order", sourceLocation: sourceLocation)
        // The server accepted events in enqueue order, and sent was recorded in that order too.
        let acceptedPositions = acceptedOrder.compactMap { enqueueOrder.firstIndex(of: $0) }
        #expect(acceptedPositions == acceptedPositions.sorted(), "server order differs", sourceLocation: sourceLocation)
        let sentPositions = recordedSent.compactMap { enqueueOrder.firstIndex(of: $0) }
        #expect(sentPositions == sentPositions.sorted(), "sent order differs", sourceLocation: sourceLocation)
        if case .blocked(let id) = state.status {
            #expect(state.headIndex.map { state.items[$0].transactionID } == id, sourceLocation: sourceLocation)
        }
    }

    /// One random step. `calm` turns off failures so that the queue can drain.
    mutating func step(calm: Bool = false) {
        switch pick(10) {
        case 0 where !calm || enqueueOrder.count < 3:
            nextID += 1
            let id = TransactionID("t\(nextID)")
            enqueueOrder.append(id)
            let content = MessageContent(eventType: "m.room.message", json: "{\"n\":\(nextID)}")
            if chance(0.4) {
                attachments.insert(id)
                let wantsThumbnail = chance(0.5)
                if wantsThumbnail { thumbnailsWanted.insert(id) }
                let attachment = QueuedAttachment(
                    localPath: "/account/attachments/\(id.rawValue)", contentType: "image/png", size: 10,
                    needsThumbnail: wantsThumbnail)
                send(.attachmentEnqueued(id, content, attachment))
            } else {
                send(.enqueued(id, content))
            }
        case 1 where !persisting.isEmpty:
            send(.persisted(persisting.remove(at: pick(persisting.count))))
        case 2 where request != nil:
            completeRequest(calm: calm)
        case 3 where retryTimer:
            retryTimer = false
            send(.timerFired(.retry))
        case 4 where refreshing:
            refreshing = false
            send(.tokenRefreshed)
        case 5 where !echoesPending.isEmpty:
            let id = echoesPending.remove(at: pick(echoesPending.count))
            send(.remoteEchoReceived(id, accepted[id]!))
        case 6 where !discarding.isEmpty:
            send(.discarded(discarding.removeFirst()))
        case 7 where !state.items.isEmpty:
            let item = state.items[pick(state.items.count)]
            if case .failed = item.status, calm || chance(0.6) {
                send(.resendRequested(item.transactionID))
            } else if !calm && chance(0.3) {
                send(.cancelRequested(item.transactionID))
            }
        case 8 where !calm:
            send(chance(0.8) ? .networkChanged : .encryptionEnabled)
        default:
            if calm, case .blocked(let id) = state.status { send(.resendRequested(id)) }
        }
    }

    mutating func completeRequest(calm: Bool) {
        guard let effect = request else { return }
        request = nil
        switch effect {
        case .makeThumbnail(let id, let content, _):
            switch calm ? 0 : pick(6) {
            case 0, 1, 2:
                thumbnailed.insert(id)  // the interpreter stores it before answering
                let made = ThumbnailedAttachment(
                    content: content,
                    thumbnail: QueuedThumbnail(
                        localPath: "/account/attachments/\(id.rawValue).thumb", contentType: "image/jpeg"))
                send(.thumbnailMade(id, .success(made)))
            case 3:
                // None could be made: the content is unchanged, and the item goes on without one.
                thumbnailed.insert(id)
                send(.thumbnailMade(id, .success(ThumbnailedAttachment(content: content, thumbnail: nil))))
            case 4: send(.thumbnailMade(id, .failure(.network)))
            default: send(.thumbnailMade(id, .failure(.permanent(.encryptionFailed))))
            }
        case .reserveMedia(let id, _):
            switch calm ? 0 : pick(6) {
            case 0, 1, 2:
                reservations += 1
                let uri = MediaURI("mxc://example.org/m\(reservations)")!
                reservedURI[id] = uri  // the interpreter stores it before answering
                let content = MessageContent(eventType: "m.room.message", json: "{\"url\":\"\(uri.uriString)\"}")
                send(.mediaReserved(id, .success(MediaReservation(uri: uri, content: content))))
            case 3: send(.mediaReserved(id, .failure(.network)))
            case 4: send(.mediaReserved(id, .failure(.unknownToken)))
            default: send(.mediaReserved(id, .failure(.rateLimited(retryAfter: nil))))
            }
        case .uploadMedia(let id, let content, _):
            switch calm ? 0 : pick(6) {
            case 0, 1, 2:
                uploadedItems.insert(id)
                send(.mediaUploaded(id, .success(content)))
            case 3: send(.mediaUploaded(id, .failure(.network)))
            case 4: send(.mediaUploaded(id, .failure(.server(status: 503))))
            default: send(.mediaUploaded(id, .failure(.permanent(.tooLarge))))
            }
        case .encryptAttachment(let id, _, var attachment):
            switch calm ? 0 : pick(6) {
            case 0, 1, 2, 3:
                // The interpreter stores the ciphertext copy and its content, no reservation.
                reservedURI[id] = nil
                attachment.isEncrypted = true
                attachment.mediaURI = nil
                attachment.contentType = "application/octet-stream"
                let content = MessageContent(eventType: "m.room.message", json: "{\"file\":{}}")
                send(
                    .attachmentEncrypted(
                        id, .success(EncryptedAttachmentCopy(content: content, attachment: attachment))))
            case 4: send(.attachmentEncrypted(id, .failure(.network)))
            default: send(.attachmentEncrypted(id, .failure(.permanent(.encryptionFailed))))
            }
        case .encrypt(let id, _):
            let failed = !calm && chance(0.1)
            send(
                .encrypted(
                    id,
                    failed
                        ? .failure(.permanent(.encryptionFailed))
                        : .success(MessageContent(eventType: "m.room.encrypted", json: "{}"))))
        case .sendEvent(let id, _):
            let roll = calm ? 0 : pick(8)
            switch roll {
            case 0, 1, 2: send(.sendResponse(id, .success(accept(id))))
            case 3:
                _ = accept(id)  // the server stored it, the response was lost
                send(.sendResponse(id, .failure(.network)))
            case 4: send(.sendResponse(id, .failure(.server(status: 502))))
            case 5: send(.sendResponse(id, .failure(.rateLimited(retryAfter: chance(0.5) ? .seconds(3) : nil))))
            case 6: send(.sendResponse(id, .failure(.unknownToken)))
            default:
                if let eventID = accepted[id] {
                    send(.sendResponse(id, .success(eventID)))
                } else {
                    send(.sendResponse(id, .failure(.permanent(.forbidden))))
                }
            }
        default:
            break
        }
    }

    /// The server accepts `id`, once: a repeated PUT returns the same event ID.
    mutating func accept(_ id: TransactionID) -> EventID {
        if let eventID = accepted[id] { return eventID }
        let eventID = EventID("$\(id.rawValue)")
        accepted[id] = eventID
        acceptedOrder.append(id)
        echoesPending.append(id)
        return eventID
    }
}

@Suite("SendQueueMachine random walk")
struct SendQueueRandomWalkTests {
    @Test(
        "Invariants hold on seeded random walks and every item ends sent or cancelled", arguments: Array(UInt64(1)...24)
    )
    func walk(seed: UInt64) {
        var world = SendQueueWorld(seed: seed, encrypted: seed % 3 == 0)
        for _ in 0..<400 { world.step() }
        for _ in 0..<4_000 where !(world.state.items.isEmpty && world.persisting.isEmpty && world.request == nil) {
            world.step(calm: true)
        }
        #expect(world.state.items.isEmpty, "queue did not drain: \(world.state.items.map(\.transactionID))")
        #expect(world.state.status == .idle)
        let sent = Set(world.recordedSent)
        #expect(sent.isDisjoint(with: world.cancelled), "an item was both cancelled and recorded sent")
        #expect(sent.union(world.cancelled) == Set(world.enqueueOrder), "every item ends recorded sent or cancelled")
    }

    @Test("Every (state, event) pair matches StateCharts/SendQueue.scxml")
    func chart() throws {
        var states: [SendQueueMachine.State] = []
        for seed in UInt64(1)...12 {
            var world = SendQueueWorld(seed: seed, encrypted: seed % 2 == 0)
            for _ in 0..<300 { world.step() }
            states += world.visited
        }
        // Keep the chart check quick: a few hundred distinct samples per status is plenty.
        var perStatus: [String: Int] = [:]
        states = states.filter { state in
            perStatus[state.caseName, default: 0] += 1
            return perStatus[state.caseName]! <= 100
        }
        // Corners the walks rarely reach: unencrypted waiting queues, a token wait whose head left.
        typealias F = SendQueueFixture
        states += [
            F.state([F.item(F.t1, F.hello)], .waitingToken),
            F.state([F.item(F.t1, F.hello, .cancelled)], .waitingToken),
            F.state([F.item(F.t1, F.hello, .failed(.forbidden))], .blocked(F.t1)),
            F.state([F.item(F.t1, F.hello, persisted: false), F.item(F.t2, F.hello)], .idle),
            F.state([F.attachmentItem(F.t1, .reservingMedia)], .sending),
            F.state([F.attachmentItem(F.t1, .uploading, uri: F.photoURI), F.item(F.t2, F.hello)], .sending),
            F.state([F.attachmentItem(F.t1, .queued, uri: F.photoURI)], .waitingRetry(attempt: 1)),
            F.state([F.attachmentItem(F.t1, .encrypting, uri: F.photoURI)], .sending, encrypted: true),
            F.state([F.attachmentItem(F.t1, .encrypting), F.item(F.t2, F.hello)], .sending, encrypted: true),
            F.state([F.thumbnailingItem(F.t1), F.item(F.t2, F.hello)], .sending),
            F.state([F.thumbnailingItem(F.t1)], .sending, encrypted: true),
            F.state([F.thumbnailingItem(F.t1, .queued)], .waitingRetry(attempt: 1)),
        ]
        let ids = (1...8).map { TransactionID("t\($0)") }
        var events: [SendQueueMachine.Event] = [
            .restored([]),
            .restored([
                SendQueueItem(transactionID: TransactionID("r1"), content: SendQueueFixture.hello, isPersisted: true)
            ]),
            .restored([
                SendQueueItem(
                    transactionID: TransactionID("r2"), content: SendQueueFixture.hello, status: .failed(.forbidden),
                    isPersisted: true)
            ]),
            .timerFired(.retry), .networkChanged, .tokenRefreshed, .encryptionEnabled,
            .enqueued(TransactionID("new"), SendQueueFixture.hello),
            .attachmentEnqueued(TransactionID("file"), SendQueueFixture.hello, SendQueueFixture.photo),
        ]
        for id in ids {
            events += [
                .enqueued(id, SendQueueFixture.hello), .persisted(id), .persistFailed(id, .full),
                .attachmentEnqueued(id, SendQueueFixture.hello, SendQueueFixture.photo),
                .mediaReserved(id, .success(SendQueueFixture.reservation)), .mediaReserved(id, .failure(.network)),
                .mediaReserved(id, .failure(.unknownToken)), .mediaReserved(id, .failure(.permanent(.forbidden))),
                .mediaUploaded(id, .success(SendQueueFixture.imageWithURL)), .mediaUploaded(id, .failure(.network)),
                .mediaUploaded(id, .failure(.unknownToken)), .mediaUploaded(id, .failure(.permanent(.tooLarge))),
                .encrypted(id, .success(SendQueueFixture.cipher)), .encrypted(id, .failure(.network)),
                .thumbnailMade(id, .success(SendQueueFixture.thumbnailed)), .thumbnailMade(id, .failure(.network)),
                .thumbnailMade(id, .failure(.unknownToken)),
                .thumbnailMade(id, .failure(.permanent(.encryptionFailed))),
                .attachmentEncrypted(id, .success(SendQueueFixture.encryptedCopy)),
                .attachmentEncrypted(id, .failure(.network)), .attachmentEncrypted(id, .failure(.unknownToken)),
                .attachmentEncrypted(id, .failure(.permanent(.encryptionFailed))),
                .encrypted(id, .failure(.unknownToken)), .encrypted(id, .failure(.permanent(.encryptionFailed))),
                .sendResponse(id, .success(EventID("$x"))), .sendResponse(id, .failure(.server(status: 500))),
                .sendResponse(id, .failure(.unknownToken)), .sendResponse(id, .failure(.permanent(.tooLarge))),
                .remoteEchoReceived(id, EventID("$x")), .resendRequested(id), .cancelRequested(id), .discarded(id),
            ]
        }
        try ChartChecker(machine: SendQueueMachine()).assertConforms(
            states: states, events: events, initial: SendQueueFixture.empty())
    }
}
