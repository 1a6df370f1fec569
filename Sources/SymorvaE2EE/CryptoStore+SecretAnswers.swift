import SymorvaMachines
import SymorvaStore

// The secret requests of the account's other devices that this device has not answered yet
// (the SecretAnswer machine's work): stored in the transaction that takes in their to-device
// event, deleted with their cancellation or once the machine is done with them, so that a
// request that arrived before a restart is answered after it.

extension CryptoStore {
    /// Migration 13: the other devices' secret requests not answered yet.
    static let incomingSecretRequestTables = """
        -- Secret requests (m.secret.request) of the account's other devices that this device has
        -- not answered, refused or seen cancelled yet (SecretAnswerMachine), in arrival order.
        CREATE TABLE e2ee_incoming_secret_requests (
            device_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            name TEXT NOT NULL,
            received_at_ms INTEGER NOT NULL,
            PRIMARY KEY (device_id, request_id)
        ) STRICT, WITHOUT ROWID;
        """

    /// How many unanswered secret requests are kept: the newest (a device that floods them
    /// cannot grow the store).
    static let incomingSecretRequestLimit = 64

    /// Stores a request taken in (inside the to-device event's transaction); the same request
    /// again keeps its place.
    static func keepIncomingSecretRequest(
        _ request: IncomingSecretRequest, nowMilliseconds: Int64, in db: isolated SQLiteDatabase
    ) throws(StoreError) {
        try db.execute(
            """
            INSERT OR IGNORE INTO e2ee_incoming_secret_requests(device_id, request_id, name, received_at_ms)
            VALUES (?, ?, ?, ?)
            """,
            [.text(request.deviceID), .text(request.requestID), .text(request.name), .integer(nowMilliseconds)])
        try db.execute(
            """
            DELETE FROM e2ee_incoming_secret_requests WHERE (device_id, request_id) NOT IN (
                SELECT device_id, request_id FROM e2ee_incoming_secret_requests
                ORDER BY received_at_ms DESC, device_id, request_id LIMIT ?)
            """,
            [.integer(Int64(Self.incomingSecretRequestLimit))])
    }

    /// Deletes request `requestID` of `deviceID` (its cancellation arrived).
    static func forgetIncomingSecretRequest(deviceID: String, requestID: String, in db: isolated SQLiteDatabase)
        throws(StoreError)
    {
        try db.execute(
            "DELETE FROM e2ee_incoming_secret_requests WHERE device_id = ? AND request_id = ?",
            [.text(deviceID), .text(requestID)])
    }

    /// The stored requests, oldest first (the SecretAnswer machine's work at start).
    package func incomingSecretRequests() async throws(CryptoStoreError) -> [IncomingSecretRequest] {
        do {
            return try await database.run { db throws(StoreError) in
                try db.queryAll(
                    """
                    SELECT device_id, request_id, name FROM e2ee_incoming_secret_requests
                    ORDER BY received_at_ms, device_id, request_id
                    """, []
                ) { IncomingSecretRequest(deviceID: $0.string(0), requestID: $0.string(1), name: $0.string(2)) }
            }
        } catch {
            throw .store(error)
        }
    }

    /// The SecretAnswer machine's state at start: the stored requests to check again, or idle.
    package func secretAnswerState() async throws(CryptoStoreError) -> SecretAnswerMachine.State {
        let stored = try await incomingSecretRequests()
        return stored.isEmpty ? .idle : .checking(batch: stored, queued: [])
    }

    /// Deletes requests the machine is done with (answered, refused, cancelled).
    package func forgetIncomingSecretRequests(_ requests: [IncomingSecretRequest]) async throws(CryptoStoreError) {
        guard !requests.isEmpty else { return }
        do {
            try await database.transaction { db throws(StoreError) in
                for request in requests {
                    try Self.forgetIncomingSecretRequest(
                        deviceID: request.deviceID, requestID: request.requestID, in: db)
                }
            }
        } catch {
            throw .store(error)
        }
    }
}
