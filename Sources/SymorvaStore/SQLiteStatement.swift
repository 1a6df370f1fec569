import CSQLite

/// A value to bind to a statement parameter.
public enum SQLiteValue: Sendable, Hashable, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByStringLiteral, ExpressibleByNilLiteral
{
    /// An integer.
    case integer(Int64)
    /// A floating-point number.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob([UInt8])
    /// SQL `NULL`.
    case null

    /// An integer literal.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// A floating-point literal.
    public init(floatLiteral value: Double) { self = .real(value) }
    /// A string literal.
    public init(stringLiteral value: String) { self = .text(value) }
    /// `nil` is `NULL`.
    public init(nilLiteral: ()) { self = .null }

    /// An optional string: `NULL` when `nil`.
    public static func text(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    /// An optional integer: `NULL` when `nil`.
    public static func integer(_ value: Int64?) -> SQLiteValue { value.map { .integer($0) } ?? .null }
    /// A Swift `Int`.
    public static func int(_ value: Int) -> SQLiteValue { .integer(Int64(value)) }
    /// A boolean as 0 or 1.
    public static func bool(_ value: Bool) -> SQLiteValue { .integer(value ? 1 : 0) }
}

/// SQLite's "copy the buffer now" destructor.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A prepared statement and its parameter slots, owned by the database's statement cache (or by
/// one `withStatement` call for a private copy); ``finalize()`` releases both.
///
/// Each parameter has a slot of ``SQLiteStatement/slotSize`` bytes. Text and bytes that fit are
/// copied into their parameter's slot and bound with `SQLITE_STATIC`: SQLite reads them in
/// place instead of allocating a copy of its own (and freeing it at the next bind), which was
/// one `malloc`/`free` pair per bound string. A slot is written only when its own parameter is
/// rebound, so a binding keeps its value until rebound or cleared, exactly as with a copy.
struct PreparedStatement {
    let handle: OpaquePointer
    let slots: UnsafeMutableRawPointer?
    let slotCount: Int32

    init(handle: OpaquePointer) {
        self.handle = handle
        slotCount = max(0, sqlite3_bind_parameter_count(handle))
        slots =
            slotCount == 0
            ? nil
            : UnsafeMutableRawPointer.allocate(
                byteCount: Int(slotCount) * SQLiteStatement.slotSize, alignment: MemoryLayout<UInt64>.alignment)
    }

    /// Finalizes the statement, then frees its slots (SQLite may read them until then).
    func finalize() {
        sqlite3_finalize(handle)
        slots?.deallocate()
    }
}

/// A prepared statement from the database's cache, valid only inside the closure that received
/// it (``SQLiteDatabase/withStatement(_:_:)``).
///
/// The fast path for bulk writes: bind by index, ``step()``, ``reset()``, repeat — no
/// per-row array of bindings, no re-preparation. Parameter and column indexes are 1-based and
/// 0-based respectively, as in SQLite.
public struct SQLiteStatement {
    let handle: OpaquePointer
    let connection: OpaquePointer
    let slots: UnsafeMutableRawPointer?
    let slotCount: Int32

    /// Bytes per parameter slot: IDs, types and keys fit; longer values are copied by SQLite.
    static let slotSize = 128

    init(_ prepared: PreparedStatement, connection: OpaquePointer) {
        handle = prepared.handle
        self.connection = connection
        slots = prepared.slots
        slotCount = prepared.slotCount
    }

    /// Copies `bytes` into parameter `index`'s slot and returns the slot, or `nil` when they do
    /// not fit, the index is out of range (SQLite then reports it) or the statement is running
    /// (binding is refused then; its slots may still be read).
    private func slot(for bytes: UnsafeRawBufferPointer, at index: Int32) -> UnsafeRawPointer? {
        guard bytes.count <= Self.slotSize, index >= 1, index <= slotCount, let slots, let base = bytes.baseAddress,
            sqlite3_stmt_busy(handle) == 0
        else { return nil }
        let slot = slots + Int(index - 1) * Self.slotSize
        slot.copyMemory(from: base, byteCount: bytes.count)
        return UnsafeRawPointer(slot)
    }

    private func bindText(_ text: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        guard let base = text.baseAddress, !text.isEmpty else {
            return sqlite3_bind_text(handle, index, "", 0, transient)
        }
        if let slot = slot(for: text, at: index) {
            return sqlite3_bind_text(handle, index, slot.assumingMemoryBound(to: CChar.self), Int32(text.count), nil)
        }
        return sqlite3_bind_text(handle, index, base.assumingMemoryBound(to: CChar.self), Int32(text.count), transient)
    }

    private func bindBlob(_ bytes: UnsafeRawBufferPointer, at index: Int32) -> Int32 {
        if !bytes.isEmpty, let slot = slot(for: bytes, at: index) {
            return sqlite3_bind_blob(handle, index, slot, Int32(bytes.count), nil)
        }
        // A zero-length blob needs a non-null pointer, or SQLite binds NULL instead.
        return sqlite3_bind_blob(
            handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), transient)
    }

    /// Binds an integer to parameter `index` (1-based).
    public func bind(_ value: Int64, at index: Int32) throws(StoreError) {
        try check(sqlite3_bind_int64(handle, index, value))
    }

    /// Binds an `Int`.
    public func bind(_ value: Int, at index: Int32) throws(StoreError) {
        try check(sqlite3_bind_int64(handle, index, Int64(value)))
    }

    /// Binds a floating-point number.
    public func bind(_ value: Double, at index: Int32) throws(StoreError) {
        try check(sqlite3_bind_double(handle, index, value))
    }

    /// Binds text, copied straight from the string's UTF-8 storage (into the parameter's slot
    /// when it fits, else by SQLite).
    public func bind(_ value: String, at index: Int32) throws(StoreError) {
        var value = value
        let code = value.withUTF8 { utf8 in bindText(UnsafeRawBufferPointer(utf8), at: index) }
        try check(code)
    }

    /// Binds bytes.
    public func bind(_ value: [UInt8], at index: Int32) throws(StoreError) {
        let code = value.withUnsafeBytes { bytes in bindBlob(bytes, at: index) }
        try check(code)
    }

    /// Binds bytes borrowed from a buffer (a slice of a larger document): they are copied before
    /// this returns, so the buffer need only live for the call.
    public func bind(bytes: UnsafeRawBufferPointer, at index: Int32) throws(StoreError) {
        try check(bindBlob(bytes, at: index))
    }

    /// Binds bytes that SQLite reads in place, without copying them: for large values from a
    /// buffer that outlives the statement's use, such as event content in a `/sync` document.
    ///
    /// The caller guarantees that `bytes` stay valid and unchanged until the statement has run
    /// for the last time with this binding: until it is rebound, or at the latest until the
    /// ``SQLiteDatabase/withStatement(_:_:)`` body that received the statement returns (bindings
    /// are cleared then, so no borrowed pointer outlives the body).
    public func bind(unsafeBorrowing bytes: UnsafeRawBufferPointer, at index: Int32) throws(StoreError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else {
            try check(bindBlob(bytes, at: index))
            return
        }
        try check(sqlite3_bind_blob(handle, index, base, Int32(bytes.count), nil))
    }

    /// Binds UTF-8 text borrowed from a buffer; it is copied before this returns.
    public func bind(utf8 text: UnsafeRawBufferPointer, at index: Int32) throws(StoreError) {
        try check(bindText(text, at: index))
    }

    /// Binds an optional string: `NULL` when `nil`.
    public func bind(_ value: String?, at index: Int32) throws(StoreError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// Binds an optional integer: `NULL` when `nil`.
    public func bind(_ value: Int64?, at index: Int32) throws(StoreError) {
        if let value { try bind(value, at: index) } else { try bindNull(at: index) }
    }

    /// Binds `NULL`.
    public func bindNull(at index: Int32) throws(StoreError) {
        try check(sqlite3_bind_null(handle, index))
    }

    /// Binds any ``SQLiteValue``.
    public func bind(_ value: SQLiteValue, at index: Int32) throws(StoreError) {
        switch value {
        case .integer(let integer): try bind(integer, at: index)
        case .real(let real): try bind(real, at: index)
        case .text(let text): try bind(text, at: index)
        case .blob(let blob): try bind(blob, at: index)
        case .null: try bindNull(at: index)
        }
    }

    /// Binds `values` to parameters 1, 2, ….
    public func bind(_ values: [SQLiteValue]) throws(StoreError) {
        for (offset, value) in values.enumerated() { try bind(value, at: Int32(offset + 1)) }
    }

    /// Runs one step: `true` when a row is available through ``row``, `false` when done.
    @discardableResult
    public func step() throws(StoreError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw StoreError.sqlite(sqlite3_extended_errcode(connection), connection: connection)
        }
    }

    /// Makes the statement ready to run again; bindings are kept until rebound or cleared.
    public func reset() {
        sqlite3_reset(handle)
    }

    /// Sets every parameter back to `NULL`.
    public func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    /// Resets, binds `values` and steps to completion: one write of a bulk loop.
    public func run(_ values: [SQLiteValue]) throws(StoreError) {
        reset()
        try bind(values)
        while try step() {}
    }

    /// The current row after ``step()`` returned `true`.
    public var row: SQLiteRow { SQLiteRow(handle: handle) }

    private func check(_ code: Int32) throws(StoreError) {
        guard code == SQLITE_OK else { throw .bind(code: code) }
    }
}

/// The current row of a statement, valid until the next step or reset. Columns are 0-based.
///
/// Getters follow SQLite's conversions: `NULL` reads as 0, 0.0, `""` or `[]`; use ``isNull(_:)``
/// or the optional getters to tell them apart.
public struct SQLiteRow {
    let handle: OpaquePointer

    /// The number of columns.
    public var columnCount: Int32 { sqlite3_column_count(handle) }

    /// Whether column `index` is `NULL`.
    public func isNull(_ index: Int32) -> Bool { sqlite3_column_type(handle, index) == SQLITE_NULL }

    /// Column `index` as an integer.
    public func int64(_ index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

    /// Column `index` as an `Int`.
    public func int(_ index: Int32) -> Int { Int(sqlite3_column_int64(handle, index)) }

    /// Column `index` as a floating-point number.
    public func double(_ index: Int32) -> Double { sqlite3_column_double(handle, index) }

    /// Column `index` as text.
    public func string(_ index: Int32) -> String {
        guard let text = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// Column `index` as bytes.
    public func blob(_ index: Int32) -> [UInt8] {
        withBlob(index) { Array($0) }
    }

    /// Calls `body` with column `index`'s bytes, without copying them (valid only inside).
    public func withBlob<T, E: Error>(_ index: Int32, _ body: (UnsafeRawBufferPointer) throws(E) -> T) throws(E) -> T {
        let pointer = sqlite3_column_blob(handle, index)
        let count = Int(sqlite3_column_bytes(handle, index))
        return try body(UnsafeRawBufferPointer(start: count > 0 ? pointer : nil, count: count))
    }

    /// Column `index` as an integer, `nil` when `NULL`.
    public func optionalInt64(_ index: Int32) -> Int64? { isNull(index) ? nil : int64(index) }

    /// Column `index` as text, `nil` when `NULL`.
    public func optionalString(_ index: Int32) -> String? { isNull(index) ? nil : string(index) }

    /// Column `index` as bytes, `nil` when `NULL`.
    public func optionalBlob(_ index: Int32) -> [UInt8]? { isNull(index) ? nil : blob(index) }

    /// Column `index` as a ``SQLiteValue`` of its stored type.
    public func value(_ index: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: .integer(int64(index))
        case SQLITE_FLOAT: .real(double(index))
        case SQLITE_TEXT: .text(string(index))
        case SQLITE_BLOB: .blob(blob(index))
        default: .null
        }
    }
}
