import SymorvaMachines
import SymorvaStore

extension CryptoStore {
    /// A room key this device asked (or will ask) the account's other devices for.
    package struct OutgoingKeyRequest: Sendable, Equatable {
        package var requestID: String
        package var roomID: String
        package var sessionID: String
        package var senderKey: String
        /// The key arrived after the request left: the cancellation is what is left to send.
        package var isCancellation: Bool
    }

    /// A room key request of another device of this account.
    package struct IncomingKeyRequest: Sendable, Equatable {
        package var deviceID: String
        package var requestID: String
        package var roomID: String
        package var sessionID: String
    }

    /// How many requests for sessions of one sender's events may be open in one room: a member
    /// who posts events with made-up session IDs cannot make this device (and every device of
    /// the account it asks) send and keep requests without end. An event beyond the bound is
    /// requested when it is tried again after a key arrived and an open request was answered.
    package static let openKeyRequestsPerSender = 8

    /// Records a request for the session (one per room and session); `false` when one exists.
    package func recordKeyRequest(
        requestID: String, roomID: String, sessionID: String, senderKey: String, sender: UserID
    ) async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.transaction { db throws(StoreError) -> Bool in
                let open =
                    try db.queryOne(
                        """
                        SELECT COUNT(*) FROM e2ee_outgoing_key_requests
                        WHERE room_id = ? AND sender_user = ? AND state IN (0, 1)
                        """, [.text(roomID), .text(sender.rawValue)]
                    ) { $0.int(0) } ?? 0
                guard open < Self.openKeyRequestsPerSender else { return false }
                try db.execute(
                    """
                    INSERT OR IGNORE INTO e2ee_outgoing_key_requests(
                        request_id, room_id, session_id, sender_key, state, sender_user)
                    VALUES (?, ?, ?, ?, 0, ?)
                    """, [.text(requestID), .text(roomID), .text(sessionID), .text(senderKey), .text(sender.rawValue)])
                return db.changes > 0
            }
        } catch {
            throw .store(error)
        }
    }

    /// Makes the sent, unanswered requests of `roomID` go out again, each under a new request ID
    /// from `newRequestID` (another device may have dropped the first: it did not know this
    /// device yet). An answer to the old ID is still taken (answers match by room and session).
    ///
    /// - Returns: how many go out again.
    package func resendKeyRequests(roomID: String, newRequestID: @escaping @Sendable () -> String)
        async throws(CryptoStoreError) -> Int
    {
        do {
            return try await database.transaction { db throws(StoreError) -> Int in
                let sent = try db.queryAll(
                    "SELECT request_id FROM e2ee_outgoing_key_requests WHERE room_id = ? AND state = 1 ORDER BY rowid",
                    [.text(roomID)]
                ) { $0.string(0) }
                for requestID in sent {
                    try db.execute(
                        "UPDATE e2ee_outgoing_key_requests SET request_id = ?, state = 0 WHERE request_id = ?",
                        [.text(newRequestID()), .text(requestID)])
                }
                return sent.count
            }
        } catch {
            throw .store(error)
        }
    }

    /// The requests not sent yet and the cancellations to send, oldest first.
    package func keyRequestsToSend() async throws(CryptoStoreError) -> [OutgoingKeyRequest] {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    """
                    SELECT request_id, room_id, session_id, sender_key, state FROM e2ee_outgoing_key_requests
                    WHERE state IN (0, 2) ORDER BY rowid
                    """
                ) {
                    OutgoingKeyRequest(
                        requestID: $0.string(0), roomID: $0.string(1), sessionID: $0.string(2), senderKey: $0.string(3),
                        isCancellation: $0.int(4) == 2)
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The server took the request (it is now sent) or its cancellation (it is done).
    package func keyRequestLeft(_ request: OutgoingKeyRequest) async throws(CryptoStoreError) {
        do {
            try await database.transaction { db throws(StoreError) in
                if request.isCancellation {
                    try db.execute(
                        "DELETE FROM e2ee_outgoing_key_requests WHERE request_id = ? AND state = 2",
                        [.text(request.requestID)])
                } else {
                    try db.execute(
                        "UPDATE e2ee_outgoing_key_requests SET state = 1 WHERE request_id = ? AND state = 0",
                        [.text(request.requestID)])
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Whether this device has an open request (not yet answered) for the session: a forwarded
    /// key is accepted only as the answer to one.
    package func hasOpenKeyRequest(roomID: String, sessionID: String) async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne(
                    """
                    SELECT EXISTS (SELECT 1 FROM e2ee_outgoing_key_requests
                    WHERE room_id = ? AND session_id = ? AND state IN (0, 1))
                    """, [.text(roomID), .text(sessionID)]
                ) { $0.int(0) != 0 } ?? false
            }
        } catch {
            throw .store(error)
        }
    }

    /// How many of this device's requests are not finished (to send, sent, or to cancel).
    package func openKeyRequestCount() async throws(CryptoStoreError) -> Int {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT COUNT(*) FROM e2ee_outgoing_key_requests") { Int($0.int(0)) } ?? 0
            }
        } catch {
            throw .store(error)
        }
    }

    /// Whether requests or cancellations wait to be sent.
    package func hasKeyRequestsToSend() async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT EXISTS (SELECT 1 FROM e2ee_outgoing_key_requests WHERE state IN (0, 2))") {
                    $0.int(0) != 0
                } ?? false
            }
        } catch {
            throw .store(error)
        }
    }

    /// The other own devices' requests waiting for an answer.
    package func incomingKeyRequests() async throws(CryptoStoreError) -> [IncomingKeyRequest] {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    "SELECT device_id, request_id, room_id, session_id FROM e2ee_incoming_key_requests ORDER BY device_id, request_id"
                ) {
                    IncomingKeyRequest(
                        deviceID: $0.string(0), requestID: $0.string(1), roomID: $0.string(2), sessionID: $0.string(3))
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// How many requests of the account's other devices are kept at most (the newest).
    package static let incomingKeyRequestLimit = 256
    /// How long a request waits for its device to become known (or reachable) before it is
    /// dropped: a day.
    package static let incomingKeyRequestLifetimeMilliseconds: Int64 = 24 * 3_600_000

    /// Removes the requests received before `cutoff` (wall clock, milliseconds); how many.
    package func removeIncomingKeyRequests(receivedBefore cutoff: Int64) async throws(CryptoStoreError) -> Int {
        do {
            return try await database.run { db throws(StoreError) in
                try db.execute("DELETE FROM e2ee_incoming_key_requests WHERE received_at_ms < ?", [.integer(cutoff)])
                return db.changes
            }
        } catch {
            throw .store(error)
        }
    }

    /// Removes requests that were answered or cannot be.
    package func removeIncomingKeyRequests(_ requests: [IncomingKeyRequest]) async throws(CryptoStoreError) {
        guard !requests.isEmpty else { return }
        do {
            try await database.transaction { db throws(StoreError) in
                for request in requests {
                    try db.execute(
                        "DELETE FROM e2ee_incoming_key_requests WHERE device_id = ? AND request_id = ?",
                        [.text(request.deviceID), .text(request.requestID)])
                }
            }
        } catch {
            throw .store(error)
        }
    }

    /// Whether other own devices' requests wait for an answer.
    package func hasKeyRequestsToAnswer() async throws(CryptoStoreError) -> Bool {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryOne("SELECT EXISTS (SELECT 1 FROM e2ee_incoming_key_requests)") { $0.int(0) != 0 } ?? false
            }
        } catch {
            throw .store(error)
        }
    }
}
