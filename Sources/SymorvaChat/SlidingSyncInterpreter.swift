import SymorvaChatStore
import SymorvaHTTP
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime

/// Performs the ``SlidingSyncMachine``'s effects: the MSC4186 request over a
/// ``MatrixRequester`` (``SlidingSyncAPI``), decoding with ``SlidingSyncResponseDecoder``,
/// committing with ``SyncIngestor/ingest(sliding:)``.
///
/// The same rules as the v2 ``SyncInterpreter``: a response is decoded when it arrives (the
/// machine gets a real ``SlidingSyncSummary``) and waits here, keyed by `pos`, until the machine
/// asks to store it; an undecodable document is treated as no answer (`.network`); each commit
/// is reported to the delegate as the same ``SyncChanges`` v2 reports, then the WAL is
/// checkpointed. The to-device extension's `since` is read from the store before each request,
/// never from the machine: it moves only with the to-device events it covers. `M_UNKNOWN_POS`
/// becomes ``SlidingSyncMachine/Event/positionExpired``; `M_UNKNOWN_TOKEN` (after the
/// requester's own refresh) ``SlidingSyncMachine/Event/tokenRejected``.
///
/// Hosted by ``AccountChat`` when its ``ChatOptions/syncMode`` is `.sliding`.
final class SlidingSyncInterpreter: EffectInterpreter {
    typealias Machine = SlidingSyncMachine

    let requester: any MatrixRequester
    let store: ChatStore
    let options: SlidingSyncAPI.Options
    /// Reads `Retry-After` dates.
    let wallClock: any WallClock
    let logger: Logger
    private let pending = Lock<[String: SlidingSyncResponse]>([:])
    private let delegate = Lock<(any SyncInterpreterDelegate)?>(nil)
    /// The crypto module's inbox, once connected.
    private let inbox = Lock<SyncInboxWriter?>(nil)

    init(
        requester: any MatrixRequester, store: ChatStore, options: SlidingSyncAPI.Options = .init(),
        wallClock: any WallClock, logger: Logger
    ) {
        self.requester = requester
        self.store = store
        self.options = options
        self.wallClock = wallClock
        self.logger = logger
    }

    /// Sets the delegate.
    func setDelegate(_ newDelegate: any SyncInterpreterDelegate) { delegate.withLock { $0 = newDelegate } }

    /// Sets where each response's share for end-to-end encryption goes (in its transaction).
    func setInbox(_ writer: @escaping SyncInboxWriter) { inbox.withLock { $0 = writer } }

    func perform(
        _ effect: SlidingSyncMachine.Effect, context: EffectContext<SlidingSyncMachine.Event>
    ) async -> SlidingSyncMachine.Event? {
        switch effect {
        case .sendSlidingSync(let request):
            return await sync(request)
        case .storeSlidingSyncResponse(let pos):
            return await commit(pos)
        case .requestTokenRefresh:
            delegate.withLock { $0 }?.syncTokenRejected()
            return nil
        case .scheduleRetry, .cancel:
            // The retry timer and cancellations are performed by the host (their directives).
            return nil
        }
    }

    private func sync(_ request: SlidingSyncRequest) async -> SlidingSyncMachine.Event? {
        pending.withLock { $0.removeAll() }
        let endpoint: MatrixEndpoint
        do {
            let since = try await store.slidingSyncPosition().toDeviceSince
            endpoint = try SlidingSyncAPI.sync(request, toDeviceSince: since, options: options)
        } catch {
            logger.error("sliding sync request could not be built: \(error)")
            return .syncResponse(.failure(.storeFailed))
        }
        let response: HTTPResponse
        do {
            // The client waits longer than the server holds the request open, and a computed
            // response (a new connection's first window) as long as a large account needs.
            response = try await requester.send(
                endpoint, timeout: SyncRequestDeadline.clientTimeout(serverTimeout: request.timeout))
        } catch {
            if Task.isCancelled { return nil }
            return failure(error)
        }
        let decoded: SlidingSyncResponse
        do {
            decoded = try SlidingSyncResponseDecoder.decode(response.body, ownUserID: requester.userID.rawValue)
        } catch {
            logger.warning("sliding sync response unreadable: \(LogLabel(error.description)); retrying")
            return .syncResponse(.failure(.network))
        }
        pending.withLock { $0[decoded.pos] = decoded }
        let count = decoded.listCounts[SlidingSyncAPI.listName] ?? 0
        return .syncResponse(
            .success(
                SlidingSyncSummary(
                    pos: SlidingSyncPosition(decoded.pos), roomCount: count, roomsInResponse: decoded.body.rooms.count))
        )
    }

    private func failure(_ error: MatrixRequestError) -> SlidingSyncMachine.Event {
        if case .matrix(let matrix) = error, matrix.code.errcode == "M_UNKNOWN_POS" {
            logger.info("sliding sync position expired; opening a new connection")
            return .positionExpired
        }
        guard let syncError = RequestFailure.syncError(error, now: wallClock.now) else { return .tokenRejected }
        logger.info("sliding sync request failed: \(error)")
        return .syncResponse(.failure(syncError))
    }

    private func commit(_ pos: SlidingSyncPosition) async -> SlidingSyncMachine.Event? {
        guard let response = pending.withLock({ $0.removeValue(forKey: pos.rawValue) }) else {
            logger.error("sliding sync response to store is missing")
            return .persisted(.failure(.storeFailed))
        }
        let report: SyncIngestReport
        do {
            report = try await SyncIngestor(store: store, inbox: inbox.withLock { $0 }).ingest(sliding: response)
            if report.malformedEvents > 0 {
                logger.notice("sliding sync skipped \(report.malformedEvents) malformed event(s)")
            }
        } catch {
            logger.error("sliding sync commit failed: \(error)")
            return .persisted(.failure(SyncInterpreter.syncError(error)))
        }
        let changes = SyncChanges(response.body, continued: report.continuedTimelines)
        if changes.devices.toDeviceEvents > 0 { FaultPoint.toDeviceCommitted.reach() }
        await delegate.withLock { $0 }?.timelineCommitted(response.body)
        await delegate.withLock { $0 }?.syncCommitted(changes)
        do { try await store.checkpoint() } catch { logger.info("checkpoint after sync failed: \(error)") }
        return .persisted(.success(pos))
    }
}
