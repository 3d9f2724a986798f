import Logging
import NIOCore
import SQLKit
import SQLiteKit
import Synchronization

/// SQLite's own typed values, read without a Decoder round trip.
extension SQLiteRow: StorageRow {
    var firstValue: SQLValue { columns.first.map { Self.sqlValue($0.data) } ?? .null }

    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        self.column(column).map(Self.sqlValue) ?? .null
    }

    func buffer(at column: String) throws -> ByteBuffer? {
        self.column(column).flatMap(Self.buffer)
    }

    /// A value as docketd reads it (a blob as its text: docketd stores text in blobs only by mistake).
    static func sqlValue(_ data: SQLiteData) -> SQLValue {
        switch data {
        case .integer(let value): return .integer(value)
        case .float(let value): return .real(value)
        case .text(let value): return .text(value)
        case .blob(let buffer): return .text(String(buffer: buffer))
        case .null: return .null
        }
    }

    /// A blob's bytes, or a text's UTF-8; nil for anything else.
    static func buffer(_ data: SQLiteData) -> ByteBuffer? {
        switch data {
        case .blob(let buffer): return buffer
        case .text(let text): return ByteBuffer(string: text)
        default: return nil
        }
    }
}

extension SQLFragment {
    /// The statement in SQLite's dialect, as SQLKit's SQLite dialect writes it (identifiers in double quotes, the
    /// n-th value `?n`), with its values as SQLite's own; written here directly, without SQLKit's serializer and its
    /// boxed values, since every statement of every request passes through it.
    func sqlite() throws -> (text: String, binds: [SQLiteData]) {
        // One allocation for the text, not one for each time it outgrows its buffer.
        var size = 0
        var count = 0
        for piece in pieces {
            switch piece {
            case .raw(let raw): size += raw.utf8.count
            case .identifier(let name): size += name.utf8.count + 2
            case .bind:
                size += 4
                count += 1
            }
        }
        var text = ""
        text.reserveCapacity(size)
        var binds: [SQLiteData] = []
        binds.reserveCapacity(count)
        for piece in pieces {
            switch piece {
            case .raw(let raw): text += raw
            case .identifier(let name):
                text += "\""
                text += Self.isPlain(name) ? name : String(name.flatMap { $0 == "\"" ? ["\"", "\""] : [$0] })
                text += "\""
            case .bind(let value):
                switch value {
                case let value as String: binds.append(.text(value))
                case let value as Int: binds.append(.integer(value))
                case let value as Double: binds.append(.float(value))
                case let value as SQLBlob: binds.append(.blob(value.buffer))
                default: binds.append(try SQLiteDataEncoder().encode(value))
                }
                text += "?"
                text += String(binds.count)
            }
        }
        return (text, binds)
    }
}

/// Runs statements directly on an SQLiteNIO connection (the readers): rows come back as SQLite's own typed values
/// with no Decoder round trip.
struct SQLiteRunner: SQLRunner {
    let connection: SQLiteConnection
    var faults: StatementFaults? = nil

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try faults?.check(sql)
        let (text, data) = try sql.sqlite()
        let collected = Mutex<[ResultRow]>([])
        try await connection.query(text, data) { row in collected.withLock { $0.append(ResultRow(row)) } }
        let rows = collected.withLock { $0 }
        if let faults, faults.isArmed { await faults.holdAnswer(of: sql) }
        return faults?.answer(of: sql, rows) ?? rows
    }
}

/// Runs the writer's statements on its ``SQLiteDirectConnection``, on the calling thread.
struct SQLiteDirectRunner: SQLRunner {
    let connection: SQLiteDirectConnection
    var faults: StatementFaults? = nil
    /// Refuses to run a statement outside a transaction: a write's body that went on after SQLite ended its
    /// transaction (a full disk, a trigger's `RAISE(ROLLBACK)`) would otherwise commit each statement on its own.
    var withinTransaction = false

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try faults?.check(sql)
        if withinTransaction, !connection.inTransaction {
            throw StorageUnavailable(reason: "the database ended the write's transaction")
        }
        let (text, data) = try sql.sqlite()
        let rows = try connection.rows(text, data)
        return faults?.answer(of: sql, rows) ?? rows
    }
}

/// Why an SQLite database cannot be opened.
public enum SQLiteStorageError: Error, CustomStringConvertible {
    /// `docketd restore` is replacing it.
    case beingRestored(String)

    public var description: String {
        switch self {
        case .beingRestored(let path): return "docketd restore is replacing \(path); start docketd again when it has finished."
        }
    }
}

/// SQLite storage: one file in WAL mode, one writer connection that runs the queued writes (``SQLiteWriter``, on a
/// ``SQLiteDirectConnection``), and a few SQLiteNIO reader connections, each lent to one read at a time (WAL lets
/// readers run while a write is in progress).
final class SQLiteStorage: Storage {
    let dialect = StorageDialect.sqlite
    let faults = StatementFaults()
    private let writer: SQLiteWriter
    private let readers: ConnectionPool<SQLiteConnection>
    let path: String
    /// Held while the database is open here, so that `docketd restore` refuses to replace it (``DatabaseFileLock``).
    private let inUse: DatabaseFileLock?

    private init(path: String, writer: SQLiteDirectConnection, readers: [SQLiteConnection], inUse: DatabaseFileLock?, logger: Logger) {
        self.path = path
        self.inUse = inUse
        self.readers = ConnectionPool(readers)
        self.writer = SQLiteWriter(connection: writer, path: path, faults: faults, logger: logger)
    }

    /// Opens (creating if needed) the database file at `path`.
    static func open(path: String, readers readerCount: Int = 4, logger: Logger) async throws -> SQLiteStorage {
        if !SQLiteLibrary.configured {
            logger.warning("SQLite did not take its savepoint journal setting: journals over 64 KiB go to temporary files")
        }
        let inUse: DatabaseFileLock?
        // A restore that has just finished may hold the lock a moment longer: a process being started meanwhile by
        // another thread of the same program holds a copy of every descriptor until it runs its own program (and
        // closes them). Only a lock still held after a second means a restore under way.
        var attempt = DatabaseFileLock.take(.using, database: path)
        let patience = ContinuousClock.now + .seconds(1)
        while case .failure(.held) = attempt, ContinuousClock.now < patience {
            try await Task.sleep(for: .milliseconds(20))
            attempt = DatabaseFileLock.take(.using, database: path)
        }
        switch attempt {
        case .success(let lock): inUse = lock
        case .failure(.held): throw SQLiteStorageError.beingRestored(path)
        case .failure(.failed(let reason)):
            // A folder where no lock file can be made: served all the same, but a restore cannot see it is in use.
            logger.warning("The database's lock file could not be made: docketd restore cannot tell that it is in use", metadata: ["reason": "\(reason)"])
            inUse = nil
        }
        let writer = try SQLiteWriter.open(path: path)
        do {
            var readers: [SQLiteConnection] = []
            for _ in 0..<max(1, readerCount) {
                let reader = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
                _ = try await SQLiteRunner(connection: reader).rows("PRAGMA query_only=ON")
                _ = try await SQLiteRunner(connection: reader).rows(SQLFragment("PRAGMA busy_timeout=\(Self.busyTimeoutMilliseconds)"))
                readers.append(reader)
            }
            return SQLiteStorage(path: path, writer: writer, readers: readers, inUse: inUse, logger: logger)
        } catch {
            writer.close()
            throw error
        }
    }

    /// How long a statement waits for a lock another process holds on the file before it fails (503).
    static let busyTimeoutMilliseconds = 2_000

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        do {
            return try await readers.withConnection { connection in
                if self.writer.isClosed { throw StorageUnavailable.closed }
                return try await body(SQLExecutor(runner: SQLiteRunner(connection: connection, faults: faults), dialect: dialect))
            }
        } catch {
            throw StorageUnavailable.classify(error) ?? error
        }
    }

    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        do {
            return try await writer.write(body)
        } catch {
            throw StorageUnavailable.classify(error) ?? error
        }
    }

    /// How many writes are waiting for the writer (tests).
    var writesWaiting: Int { writer.waiting }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await write(body)
    }

    /// Only this process writes an SQLite file: it learns of every change as it commits.
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>? { nil }

    /// Closes every connection once the writes queued before have ended, also for a caller that was cancelled (a
    /// shutdown, a request whose client left): in a cancelled task SQLiteNIO runs no statement, its close included,
    /// and a connection left open is an assertion when the storage goes away.
    func close() async throws {
        try await runToCompletion {
            try await self.writer.last {
                // From here on every read and write is refused with ``StorageUnavailable/closed``.
                self.writer.markClosed()
                for reader in self.readers.all { try await reader.close() }
                self.writer.closeConnection()
                // Closed here: `docketd restore` may replace it now.
                self.inUse?.release()
            }
        }
    }
}
