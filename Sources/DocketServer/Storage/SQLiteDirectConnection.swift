import NIOCore
import SQLKit
import SQLiteNIO
import Synchronization
// The SQLite that SQLiteNIO builds and links (its functions prefixed `sqlite_nio_`): the writer must use the same
// copy of the library as the readers, since two copies in one process each keep their own table of the file's POSIX
// locks, and closing a file in one drops the locks the other holds (SQLite's "how to corrupt", 2.2.1).
import VaporCSQLite
import CDocketSQLite

/// The writer's SQLite connection, driven through SQLite's C API on the calling thread, with its prepared statements
/// kept. SQLiteNIO runs each statement as a job on its thread pool (two thread switches) and prepares it anew every
/// time; a POST runs seven or more statements in its transaction, all behind the one write lock, so those switches
/// and preparations were the writer's critical path (docs/performance.md). Here a transaction runs where its task
/// runs, statement after statement, with no switch at all.
///
/// Used by one write at a time (``SQLiteWriter``'s one task); the state is behind a mutex all the same, so that a
/// close can never free the handle under a statement.
final class SQLiteDirectConnection: Sendable {
    /// Statements kept per connection; when full, all are finalized and preparing starts over (texts with a varying
    /// number of values, `IN (?, ?, …)`, would otherwise fill it with texts never run again).
    static let keptStatements = 256
    /// Longer texts are prepared for one run only.
    static let longestKeptText = 16 * 1024

    /// Touched only under the mutex (SQLite's handles are plain pointers).
    private struct State: ~Copyable, @unchecked Sendable {
        var handle: OpaquePointer?
        var statements: [String: Prepared] = [:]
    }

    /// A kept statement and its result's column names (index by first occurrence, as SQLiteNIO reads them).
    private struct Prepared {
        let statement: OpaquePointer
        var columns: SQLiteDirectColumns
    }

    private let state: Mutex<State>

    private init(handle: OpaquePointer) {
        state = Mutex(State(handle: handle))
    }

    deinit {
        state.withLock { Self.closeHandle(&$0) }
    }

    /// Opens the database file at `path` (creating it), read-write, with extended result codes, waiting at most
    /// `busyTimeoutMilliseconds` for a lock another connection holds.
    static func open(path: String, busyTimeoutMilliseconds: Int32) throws -> SQLiteDirectConnection {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | SQLITE_OPEN_URI | SQLITE_OPEN_EXRESCODE
        let code = sqlite_nio_sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.flatMap { sqlite_nio_sqlite3_errmsg($0) }.map { String(cString: $0) } ?? "cannot open the file"
            if let handle { sqlite_nio_sqlite3_close(handle) }
            throw SQLiteDirectError(code: code, message: message)
        }
        // Before any statement: the first ones (the journal mode) may already meet another process's lock.
        sqlite_nio_sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        return SQLiteDirectConnection(handle: handle)
    }

    var isClosed: Bool { state.withLock { $0.handle == nil } }

    /// From now on, waits at most `milliseconds` for a lock another connection holds.
    func setBusyTimeout(milliseconds: Int32) {
        state.withLock { state in
            if let handle = state.handle { sqlite_nio_sqlite3_busy_timeout(handle, milliseconds) }
        }
    }

    /// Whether a transaction is open on the connection (SQLite ends one by itself on some failures).
    var inTransaction: Bool {
        state.withLock { state in state.handle.map { sqlite_nio_sqlite3_get_autocommit($0) == 0 } ?? false }
    }

    /// Finalizes every kept statement and closes the connection; later statements fail with `SQLITE_MISUSE`.
    func close() {
        state.withLock { Self.closeHandle(&$0) }
    }

    private static func closeHandle(_ state: inout State) {
        for prepared in state.statements.values { sqlite_nio_sqlite3_finalize(prepared.statement) }
        state.statements = [:]
        // Every statement is finalized above; `close_v2` lets go of the handle even if one were not.
        if let handle = state.handle { sqlite_nio_sqlite3_close_v2(handle) }
        state.handle = nil
    }

    /// Runs one statement (the first of `text`) with `binds` and returns its rows.
    func rows(_ text: String, _ binds: [SQLiteData]) throws -> [ResultRow] {
        try state.withLock { state in
            guard let handle = state.handle else {
                throw SQLiteDirectError(code: SQLITE_MISUSE, message: "the connection is closed")
            }
            let keep = text.utf8.count <= Self.longestKeptText
            var prepared: Prepared
            if keep, let kept = state.statements[text] {
                prepared = kept
            } else {
                prepared = try Self.prepare(text, on: handle)
                if keep {
                    if state.statements.count >= Self.keptStatements {
                        for old in state.statements.values { sqlite_nio_sqlite3_finalize(old.statement) }
                        state.statements.removeAll(keepingCapacity: true)
                    }
                    state.statements[text] = prepared
                }
            }
            defer {
                if keep {
                    // Ready for the next run and no longer holding a read of the database. The next run binds every
                    // value anew, so the values stay bound: clearing them would make SQLite plan the statement
                    // again on its next run whenever its plan depends on a value (a `LIMIT ?`), a preparation per
                    // run. Only large values are let go at once (an attachment's content is not kept for later).
                    sqlite_nio_sqlite3_reset(prepared.statement)
                    if binds.contains(where: \.isLarge) { sqlite_nio_sqlite3_clear_bindings(prepared.statement) }
                } else {
                    sqlite_nio_sqlite3_finalize(prepared.statement)
                }
            }
            let columns = prepared.columns
            defer {
                // Columns read again after SQLite prepared the statement anew are kept, also when the run failed.
                if keep, prepared.columns !== columns { state.statements[text] = prepared }
            }
            return try Self.run(&prepared, binds: binds, on: handle)
        }
    }

    private static func prepare(_ text: String, on handle: OpaquePointer) throws -> Prepared {
        var statement: OpaquePointer?
        let code = sqlite_nio_sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK else { throw SQLiteDirectError(code: code, handle: handle) }
        guard let statement else {
            // Only whitespace or a comment: SQLite prepares nothing.
            throw SQLiteDirectError(code: SQLITE_MISUSE, message: "the statement is empty")
        }
        return Prepared(statement: statement, columns: columns(of: statement))
    }

    /// The names of the statement's result columns, as it is prepared now.
    private static func columns(of statement: OpaquePointer) -> SQLiteDirectColumns {
        var names: [String] = []
        let count = sqlite_nio_sqlite3_column_count(statement)
        names.reserveCapacity(Int(count))
        for index in 0..<count {
            names.append(sqlite_nio_sqlite3_column_name(statement, index).map { String(cString: $0) } ?? "")
        }
        return SQLiteDirectColumns(names: names)
    }

    private static func run(_ prepared: inout Prepared, binds: [SQLiteData], on handle: OpaquePointer) throws -> [ResultRow] {
        let statement = prepared.statement
        // Values stay bound between runs: a statement run with fewer values than it has placeholders would reuse
        // the last run's.
        let placeholders = Int(sqlite_nio_sqlite3_bind_parameter_count(statement))
        guard placeholders == binds.count else {
            throw SQLiteDirectError(code: SQLITE_RANGE, message: "the statement has \(placeholders) placeholders and \(binds.count) values")
        }
        for (offset, bind) in binds.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch bind {
            case .integer(let value): code = sqlite_nio_sqlite3_bind_int64(statement, index, Int64(value))
            case .float(let value): code = sqlite_nio_sqlite3_bind_double(statement, index, value)
            case .text(let value):
                code = sqlite_nio_sqlite3_bind_text64(
                    statement, index, value, UInt64(value.utf8.count), sqliteTransient, UInt8(SQLITE_UTF8)
                )
            case .blob(let buffer):
                code = buffer.withUnsafeReadableBytes {
                    sqlite_nio_sqlite3_bind_blob64(statement, index, $0.baseAddress, UInt64($0.count), sqliteTransient)
                }
            case .null: code = sqlite_nio_sqlite3_bind_null(statement, index)
            }
            guard code == SQLITE_OK else { throw SQLiteDirectError(code: code, handle: handle) }
        }
        var rows: [ResultRow] = []
        var first = true
        while true {
            let code = sqlite_nio_sqlite3_step(statement)
            if first {
                first = false
                // SQLite prepared the statement again inside this step (the schema changed since: a column added,
                // renamed): its result may have other columns now.
                if sqlite_nio_sqlite3_stmt_status(statement, Int32(SQLITE_STMTSTATUS_REPREPARE), 1) > 0 {
                    prepared.columns = columns(of: statement)
                }
            }
            if code == SQLITE_DONE { return rows }
            guard code == SQLITE_ROW else { throw SQLiteDirectError(code: code, handle: handle) }
            let width = Int32(prepared.columns.names.count)
            var values: [SQLiteData] = []
            values.reserveCapacity(Int(width))
            for column in 0..<width { values.append(value(of: statement, at: column)) }
            rows.append(ResultRow(SQLiteDirectRow(columns: prepared.columns, values: values)))
        }
    }

    private static func value(of statement: OpaquePointer, at column: Int32) -> SQLiteData {
        switch sqlite_nio_sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: return .integer(Int(sqlite_nio_sqlite3_column_int64(statement, column)))
        case SQLITE_FLOAT: return .float(sqlite_nio_sqlite3_column_double(statement, column))
        case SQLITE_TEXT:
            guard let text = sqlite_nio_sqlite3_column_text(statement, column) else { return .text("") }
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite_nio_sqlite3_column_bytes(statement, column))
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            if let bytes = sqlite_nio_sqlite3_column_blob(statement, column) {
                buffer.writeBytes(UnsafeRawBufferPointer(start: bytes, count: count))
            }
            return .blob(buffer)
        default: return .null
        }
    }
}

extension SQLiteData {
    /// A value big enough not to be kept bound to a statement between its runs.
    fileprivate var isLarge: Bool {
        switch self {
        case .text(let text): return text.utf8.count > 4096
        case .blob(let buffer): return buffer.readableBytes > 4096
        default: return false
        }
    }
}

/// `SQLITE_TRANSIENT`: SQLite copies a bound value before the call returns.
private let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// The column names of a statement's result, shared by its rows.
final class SQLiteDirectColumns: Sendable {
    let names: [String]
    let offsets: [String: Int]

    init(names: [String]) {
        self.names = names
        offsets = Dictionary(names.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
    }
}

/// A row read by ``SQLiteDirectConnection``, with the values SQLite typed it with.
struct SQLiteDirectRow: StorageRow {
    let columns: SQLiteDirectColumns
    let values: [SQLiteData]

    var firstValue: SQLValue { values.first.map(SQLiteRow.sqlValue) ?? .null }

    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        columns.offsets[column].map { SQLiteRow.sqlValue(values[$0]) } ?? .null
    }

    func buffer(at column: String) throws -> ByteBuffer? {
        columns.offsets[column].flatMap { SQLiteRow.buffer(values[$0]) }
    }
}

/// A statement ``SQLiteDirectConnection`` ran failed: SQLite's (extended) result code and its message.
struct SQLiteDirectError: Error, CustomStringConvertible {
    let code: Int32
    let message: String

    init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    init(code: Int32, handle: OpaquePointer) {
        self.code = code
        message = sqlite_nio_sqlite3_errmsg(handle).map { String(cString: $0) } ?? "SQLite error \(code)"
    }

    /// The primary result code (`SQLITE_BUSY` for `SQLITE_BUSY_TIMEOUT`, …).
    var primary: Int32 { code & 0xff }

    var description: String { "SQLite error \(code): \(message)" }

    /// Another connection holds a lock this statement needed, past the busy timeout.
    var isLock: Bool { primary == SQLITE_BUSY || primary == SQLITE_LOCKED }

    /// Another connection held a lock past the busy timeout (waited for; `SQLITE_LOCKED` comes without waiting).
    var isBusy: Bool { primary == SQLITE_BUSY }

    /// A failure of the file or its locks (an outage, answered 503), not of the statement.
    var isOutage: Bool {
        [SQLITE_BUSY, SQLITE_LOCKED, SQLITE_IOERR, SQLITE_READONLY, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_NOMEM]
            .contains(primary)
    }
}

/// What the server sets in SQLite for the whole process. Set in C when the program is loaded (`Sources/CDocketSQLite`),
/// since SQLite takes it only before its first use, and `sqlite3_config` is not thread-safe.
enum SQLiteLibrary {
    /// A savepoint journal (the pages a write changes, kept so that a write that fails can be undone alone while
    /// the writes sharing its transaction commit) stays in memory up to this size; larger ones spill to a temporary
    /// file. SQLite's default, 64 KiB, made most transactions of the writer's group commit create, write and delete
    /// a file in /var/tmp: 72 files and 13 MB in three seconds of POSTs (docs/performance.md). 128 KiB less a byte:
    /// on a spill SQLite writes what it kept (up to this size) in one call, and its Unix file layer writes at most
    /// 128 KiB - 1 bytes per call (`seekAndWriteFd`), so that 128 KiB or more fails the spill with SQLITE_FULL (the
    /// test `savepointJournalInMemory` spills past it). Only the writer connection writes: this much is held once.
    static let statementJournalSpill = Int32(DOCKET_SQLITE_STATEMENT_JOURNAL_SPILL)

    /// Whether SQLite took the threshold (it does unless something used SQLite before the program's own code ran).
    static var configured: Bool { docket_sqlite_statement_journal_spill_result() == SQLITE_OK }
}
