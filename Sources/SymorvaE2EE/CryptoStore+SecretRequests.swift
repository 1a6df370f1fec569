import SymorvaCrypto
import SymorvaMachines
import SymorvaMatrix
import SymorvaRuntime
import SymorvaStore

// The SecretRequest machine's round, as the crypto store keeps it: the phase it was in, its
// requests and the devices asked, its deadline, and the secrets accepted so far (sealed).
// Each write is one transaction, so a restart finds the round as the last effect left it.

extension CryptoStore {
    /// Migration 12: this device's secret requests to its own other devices.
    static let secretRequestTables = """
        -- This device's round of secret requests to its own other devices (at most one): what a
        -- restart resumes or cancels (SecretRequestMachine).
        CREATE TABLE e2ee_secret_request_round (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            phase TEXT NOT NULL,                     -- 'sending', 'waiting' or 'cancelling'
            end_reason TEXT,                         -- when cancelling: why the round ends
            deadline_ms INTEGER NOT NULL,            -- wall clock
            device_ids BLOB NOT NULL                 -- JSON array of the device IDs asked
        ) STRICT;
        -- The round's requests, one per secret, in the order asked; received_order not NULL once
        -- the secret was accepted (the order of arrival).
        CREATE TABLE e2ee_secret_requests (
            request_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            position INTEGER NOT NULL,
            received_order INTEGER
        ) STRICT, WITHOUT ROWID;
        -- Secrets accepted in answer, sealed with the secrets-at-rest key (never clear), until
        -- the caller uses them.
        CREATE TABLE e2ee_received_secrets (
            name TEXT PRIMARY KEY,
            sealed_secret BLOB NOT NULL
        ) STRICT, WITHOUT ROWID;
        """

    private func receivedSecretData(_ name: String) -> [UInt8] {
        SecretBox.associatedData(account: userID.rawValue, field: "e2ee.received_secret.\(name)")
    }

    /// Stores the machine's state: a round in flight replaces the stored one, `idle` and
    /// `finished` delete it (the secrets received stay until ``takeReceivedSecrets()``). A new
    /// round (`sending` with nothing received) forgets the secrets an earlier round left.
    package func saveSecretRequestState(_ state: SecretRequestMachine.State) async throws(CryptoStoreError) {
        let row: (phase: String, end: String?, round: SecretRequestRound)?
        switch state {
        case .idle, .finished: row = nil
        case .sending(let round): row = ("sending", nil, round)
        case .waiting(let round): row = ("waiting", nil, round)
        case .cancelling(let round, let end): row = ("cancelling", Self.endName(end), round)
        }
        let devices: [UInt8]
        do {
            devices = try JSONValue.array((row?.round.deviceIDs ?? []).map { .string($0) }).canonicalEncoding()
        } catch {
            throw .store(.aborted)
        }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try Self.writeRound(row, devices: devices, newRoundForgetsSecrets: true, in: db)
            }
        } catch {
            throw .store(error)
        }
    }

    /// Keeps an accepted secret sealed and stores the round that lists it as received, in one
    /// transaction (the machine's ``SecretRequestMachine/Effect/keepSecret(name:secret:round:)``).
    package func keepReceivedSecret(name: String, secret: Secret<String>, round: SecretRequestRound)
        async throws(CryptoStoreError)
    {
        let sealed: [UInt8]
        let devices: [UInt8]
        do {
            sealed = try secrets.seal(secret, associatedData: receivedSecretData(name))
        } catch {
            throw .secrets(error)
        }
        do {
            devices = try JSONValue.array(round.deviceIDs.map { .string($0) }).canonicalEncoding()
        } catch {
            throw .store(.aborted)
        }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                try db.execute(
                    """
                    INSERT INTO e2ee_received_secrets(name, sealed_secret) VALUES (?, ?)
                    ON CONFLICT(name) DO UPDATE SET sealed_secret = excluded.sealed_secret
                    """, [.text(name), .blob(sealed)])
                // The phase stays as stored (an answer can come while the requests are being sent).
                let stored = try db.queryOne("SELECT phase, end_reason FROM e2ee_secret_request_round WHERE id = 1") {
                    ($0.string(0), $0.optionalString(1))
                }
                try Self.writeRound(
                    (stored?.0 ?? "waiting", stored?.1, round), devices: devices, newRoundForgetsSecrets: false, in: db)
            }
        } catch {
            throw .store(error)
        }
    }

    /// The machine's state as stored (`idle` when no round is).
    package func secretRequestState() async throws(CryptoStoreError) -> SecretRequestMachine.State {
        let stored: (String, String?, Int64, [UInt8], [(String, String, Int64?)])?
        do {
            stored = try await database.run { db throws(StoreError) in
                let row = try db.queryOne(
                    "SELECT phase, end_reason, deadline_ms, device_ids FROM e2ee_secret_request_round WHERE id = 1"
                ) { ($0.string(0), $0.optionalString(1), $0.int64(2), $0.blob(3)) }
                guard let round = row else { return nil }
                let requests = try db.queryAll(
                    "SELECT request_id, name, received_order FROM e2ee_secret_requests ORDER BY position"
                ) { ($0.string(0), $0.string(1), $0.optionalInt64(2)) }
                return (round.0, round.1, round.2, round.3, requests)
            }
        } catch {
            throw .store(error)
        }
        guard let (phase, end, deadline, deviceBytes, requests) = stored else { return .idle }
        guard case .array(let values)? = try? JSONValue(parsing: deviceBytes) else { throw .store(.corrupt) }
        let devices = values.compactMap { value -> String? in
            if case .string(let id) = value { return id }
            return nil
        }
        let received = requests.filter { $0.2 != nil }.sorted { $0.2! < $1.2! }.map(\.1)
        let round = SecretRequestRound(
            requests: requests.map { SecretRequest(requestID: $0.0, name: $0.1) }, deviceIDs: devices,
            deadline: Timestamp(millisecondsSince1970: deadline), received: received)
        switch phase {
        case "sending": return .sending(round)
        case "waiting": return .waiting(round)
        case "cancelling": return .cancelling(round, Self.end(named: end))
        default: throw .store(.corrupt)
        }
    }

    /// The secrets accepted, opened, and forgotten: each is handed out once. A secret that
    /// cannot be opened is an error and stays stored.
    package func takeReceivedSecrets() async throws(CryptoStoreError) -> [String: Secret<String>] {
        let rows: [(String, [UInt8])]
        do {
            rows = try await database.run { db throws(StoreError) in
                try db.queryAll("SELECT name, sealed_secret FROM e2ee_received_secrets") { ($0.string(0), $0.blob(1)) }
            }
        } catch {
            throw .store(error)
        }
        var secrets: [String: Secret<String>] = [:]
        for (name, sealed) in rows {
            do { secrets[name] = try self.secrets.openString(sealed, associatedData: receivedSecretData(name)) } catch {
                throw .secrets(error)
            }
        }
        guard !rows.isEmpty else { return secrets }
        do {
            try await database.transaction(durability: .full) { db throws(StoreError) in
                for (name, sealed) in rows {
                    try db.execute(
                        "DELETE FROM e2ee_received_secrets WHERE name = ? AND sealed_secret = ?",
                        [.text(name), .blob(sealed)])
                }
            }
        } catch {
            throw .store(error)
        }
        return secrets
    }

    private static func writeRound(
        _ row: (phase: String, end: String?, round: SecretRequestRound)?, devices: [UInt8],
        newRoundForgetsSecrets: Bool, in db: isolated SQLiteDatabase
    ) throws(StoreError) {
        guard let row else {
            try db.execute("DELETE FROM e2ee_secret_request_round")
            try db.execute("DELETE FROM e2ee_secret_requests")
            return
        }
        let stored = try db.queryAll("SELECT request_id FROM e2ee_secret_requests") { $0.string(0) }
        if newRoundForgetsSecrets, Set(stored) != Set(row.round.requests.map(\.requestID)) {
            // Another round: what an earlier one received and nobody took is forgotten.
            try db.execute("DELETE FROM e2ee_received_secrets")
        }
        try db.execute("DELETE FROM e2ee_secret_requests")
        for (position, request) in row.round.requests.enumerated() {
            let order = row.round.received.firstIndex(of: request.name)
            try db.execute(
                "INSERT INTO e2ee_secret_requests(request_id, name, position, received_order) VALUES (?, ?, ?, ?)",
                [.text(request.requestID), .text(request.name), .int(position), .integer(order.map { Int64($0) })])
        }
        try db.execute(
            """
            INSERT INTO e2ee_secret_request_round(id, phase, end_reason, deadline_ms, device_ids) VALUES (1, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET phase = excluded.phase, end_reason = excluded.end_reason,
                deadline_ms = excluded.deadline_ms, device_ids = excluded.device_ids
            """,
            [
                .text(row.phase), row.end.map { .text($0) } ?? .null,
                .integer(row.round.deadline.millisecondsSince1970), .blob(devices),
            ])
    }

    private static func endName(_ end: SecretRequestEnd) -> String {
        switch end {
        case .allReceived: "allReceived"
        case .timedOut: "timedOut"
        case .sendFailed: "sendFailed"
        case .cancelled: "cancelled"
        }
    }

    private static func end(named name: String?) -> SecretRequestEnd {
        switch name {
        case "allReceived": .allReceived
        case "timedOut": .timedOut
        case "sendFailed": .sendFailed
        default: .cancelled
        }
    }
}
