/// What a `/sync` response carries for end-to-end encryption — its to-device events,
/// device-list changes and one-time key counts — as chat's ingest hands it to the crypto module
/// inside the response's transaction, so that it is durable with the sync token that brought it
/// and no module runs SQL on another's tables.
package struct SyncDeviceInbox: Sendable, Equatable {
    /// One to-device event, raw.
    package struct ToDevice: Sendable, Equatable {
        /// Its `type`.
        package var type: String
        /// Its `sender` (empty when missing).
        package var sender: String
        /// The whole event, raw JSON.
        package var raw: [UInt8]

        /// An event.
        package init(type: String, sender: String, raw: [UInt8]) {
            self.type = type
            self.sender = sender
            self.raw = raw
        }
    }

    /// `to_device.events`, in order.
    package var toDevice: [ToDevice]
    /// `device_lists.changed`.
    package var deviceListsChanged: [String]
    /// `device_lists.left`.
    package var deviceListsLeft: [String]
    /// `device_one_time_keys_count`, by algorithm.
    package var oneTimeKeyCounts: [String: Int64]

    /// An inbox.
    package init(
        toDevice: [ToDevice] = [], deviceListsChanged: [String] = [], deviceListsLeft: [String] = [],
        oneTimeKeyCounts: [String: Int64] = [:]
    ) {
        self.toDevice = toDevice
        self.deviceListsChanged = deviceListsChanged
        self.deviceListsLeft = deviceListsLeft
        self.oneTimeKeyCounts = oneTimeKeyCounts
    }

    /// Whether the response carried none of it.
    package var isEmpty: Bool {
        toDevice.isEmpty && deviceListsChanged.isEmpty && deviceListsLeft.isEmpty && oneTimeKeyCounts.isEmpty
    }
}

extension SyncDeviceInbox {
    /// The crypto module's inbox tables, which the crypto store owns (feature `e2ee`): created
    /// if missing by the crypto schema, and by chat's one-time hand-over migration (chat schema
    /// version 8) when that runs first, so that an upgrade moves what chat had stored whichever
    /// module migrates first. Schema changes go in new migrations of both, never here.
    package static let tables = """
        CREATE TABLE IF NOT EXISTS e2ee_inbox_to_device (
            id INTEGER PRIMARY KEY,                 -- arrival order
            type TEXT NOT NULL,
            sender TEXT NOT NULL,
            raw BLOB NOT NULL                       -- the whole event, raw JSON
        );
        CREATE TABLE IF NOT EXISTS e2ee_inbox_device_lists (
            user_id TEXT PRIMARY KEY,
            change INTEGER NOT NULL                 -- 1 changed, 2 left
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS e2ee_inbox_key_counts (
            algorithm TEXT PRIMARY KEY,
            count INTEGER NOT NULL
        ) WITHOUT ROWID;
        """
}
