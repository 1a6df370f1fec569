import SymorvaKit

/// The handles a client was given: opaque IDs (`conversation-3`, `draft-7`) for the Swift
/// objects a result returned (a ``Conversation``, a ``TransferDraft``, a ``PendingTransfer``, a
/// send receipt, a ``MeetingRoom``, a ``ConversationGrant``).
///
/// A handle belongs to the account it was made for, for good: once that account is signed out or
/// switched away from (``endAccount(_:)``), using it fails with `accountEnded` in the handle's
/// feature, exactly as the Swift object throws `.accountEnded` — the same ID never reaches the
/// account that is active now. An ID this client never issued (or released, or of another kind)
/// fails with `contract.invalidHandle`. The same object is always the same handle.
package final class ContractHandles: Sendable {
    private struct Entry {
        let kind: String
        let account: UserID?
        let object: any AnyObject & Sendable
        var isEnded = false
    }

    private struct Table: ~Copyable {
        var entries: [String: Entry] = [:]
        var byObject: [ObjectIdentifier: String] = [:]
        var next = 1
    }

    private let table = Lock(Table())

    /// No handles yet.
    package init() {}

    /// The handle of `object` (a new one the first time it is seen).
    package func issue(_ object: some AnyObject & Sendable, kind: String, account: UserID?) -> String {
        table.withLock { table in
            if let id = table.byObject[ObjectIdentifier(object)], table.entries[id]?.isEnded == false { return id }
            let id = "\(kind)-\(table.next)"
            table.next += 1
            table.entries[id] = Entry(kind: kind, account: account, object: object)
            table.byObject[ObjectIdentifier(object)] = id
            return id
        }
    }

    /// The object behind the handle in parameter `name`.
    ///
    /// - Throws: `contract.invalidParams` when the parameter is not a string;
    ///   `contract.invalidHandle` when it is not a live handle of `kind` issued by this client;
    ///   `<domain>.accountEnded` when its account has ended.
    package func resolve<Object: AnyObject & Sendable>(
        _ params: ContractParams, _ name: String, kind: String, as type: Object.Type, domain: String
    ) throws(ContractError) -> Object {
        let id = try params.string(name)
        let entry = table.withLock { $0.entries[id] }
        guard let entry, entry.kind == kind, let object = entry.object as? Object else {
            throw .invalidHandle(name, kind: kind)
        }
        guard !entry.isEnded else { throw .accountEnded(domain: domain) }
        return object
    }

    /// Ends every handle of `account` (signed out or switched away from). They stay known, so
    /// that using one says `accountEnded` rather than `invalidHandle`.
    package func endAccount(_ account: UserID) {
        table.withLock { table in
            for (id, entry) in table.entries where entry.account == account {
                table.entries[id]?.isEnded = true
                table.byObject[ObjectIdentifier(entry.object)] = nil
            }
        }
    }

    /// Forgets a handle (the host no longer needs it); `false` when it was not one.
    @discardableResult
    package func release(_ id: String) -> Bool {
        table.withLock { table in
            guard let entry = table.entries.removeValue(forKey: id) else { return false }
            if table.byObject[ObjectIdentifier(entry.object)] == id {
                table.byObject[ObjectIdentifier(entry.object)] = nil
            }
            return true
        }
    }

    /// The number of handles held (live or ended).
    package var count: Int { table.withLock { $0.entries.count } }

    /// Forgets every handle.
    package func removeAll() { table.withLock { $0 = Table() } }
}
