import Logging
import NIOCore
import SQLKit
import SQLiteKit
import Synchronization

/// SQLite's own typed values, read without a Decoder round trip.
extension SQLiteRow: StorageRow {
    var firstValue: SQLValue { columns.first.map { Self.value($0.data) } ?? .null }

    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        self.column(column).map(Self.value) ?? .null
    }

    func buffer(at column: String) throws -> ByteBuffer? {
        switch self.column(column) {
        case .blob(let buffer): return buffer
        case .text(let text): return ByteBuffer(string: text)
        default: return nil
        }
    }

    private static func value(_ data: SQLiteData) -> SQLValue {
        switch data {
        case .integer(let value): return .integer(value)
        case .float(let value): return .real(value)
        case .text(let value): return .text(value)
        case .blob(let buffer): return .text(String(buffer: buffer))
        case .null: return .null
        }
    }
}

/// Runs statements directly on an SQLiteNIO connection: SQLKit still serialises them (SQLite's dialect), but
/// rows come back as SQLite's own typed values with no Decoder round trip.
struct SQLiteRunner: SQLRunner {
    let connection: SQLiteConnection
    var faults: StatementFaults? = nil

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try faults?.check(sql)
        let (text, binds) = connection.sql().serialize(sql)
        let data = try binds.map { bind -> SQLiteData in
            switch bind {
            case let value as String: return .text(value)
            case let value as Int: return .integer(value)
            case let value as Double: return .float(value)
            case let value as SQLBlob: return .blob(value.buffer)
            default: return try SQLiteDataEncoder().encode(bind)
            }
        }
        let collected = Mutex<[ResultRow]>([])
        try await connection.query(text, data) { row in collected.withLock { $0.append(ResultRow(row)) } }
        return collected.withLock { $0 }
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

/// SQLite storage: one file in WAL mode, one writer connection behind an async lock, and a few reader
/// connections, each lent to one read at a time (WAL lets readers run while a write is in progress).
final class SQLiteStorage: Storage {
    let dialect = StorageDialect.sqlite
    let faults = StatementFaults()
    /// The writer connection; replaced when a transaction on it could not be rolled back.
    private let writer: Mutex<SQLiteConnection>
    private let readers: ConnectionPool<SQLiteConnection>
    private let writeLock = AsyncLock()
    /// Set by ``close()``: from then on every read and write is refused with ``StorageUnavailable/closed``.
    private let closed = Mutex(false)
    let path: String
    private let logger: Logger
    /// Held while the database is open here, so that `docketd restore` refuses to replace it (``DatabaseFileLock``).
    private let inUse: DatabaseFileLock?

    private init(path: String, writer: SQLiteConnection, readers: [SQLiteConnection], inUse: DatabaseFileLock?, logger: Logger) {
        self.path = path
        self.inUse = inUse
        self.writer = Mutex(writer)
        self.readers = ConnectionPool(readers)
        self.logger = logger
    }

    /// The writer connection, in WAL mode, waiting a bounded time for other processes' locks.
    private static func openWriter(path: String, logger: Logger) async throws -> SQLiteConnection {
        let writer = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        do {
            let runner = SQLiteRunner(connection: writer)
            _ = try await runner.rows("PRAGMA journal_mode=WAL")
            _ = try await runner.rows("PRAGMA synchronous=NORMAL")
            // SQLiteNIO retries a locked database without end; another process holding the file's lock (a backup
            // tool, sqlite3 in a shell) must make a write fail after a bounded wait, answered 503, not hang it.
            _ = try await runner.rows(SQLFragment("PRAGMA busy_timeout=\(busyTimeoutMilliseconds)"))
            return writer
        } catch {
            try? await writer.close()
            throw error
        }
    }

    /// Opens (creating if needed) the database file at `path`.
    static func open(path: String, readers readerCount: Int = 4, logger: Logger) async throws -> SQLiteStorage {
        let inUse: DatabaseFileLock?
        switch DatabaseFileLock.take(.using, database: path) {
        case .success(let lock): inUse = lock
        case .failure(.held): throw SQLiteStorageError.beingRestored(path)
        case .failure(.failed(let reason)):
            // A folder where no lock file can be made: served all the same, but a restore cannot see it is in use.
            logger.warning("The database's lock file could not be made: docketd restore cannot tell that it is in use", metadata: ["reason": "\(reason)"])
            inUse = nil
        }
        let writer = try await openWriter(path: path, logger: logger)
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
            try? await writer.close()
            throw error
        }
    }

    /// How long a statement waits for a lock another process holds on the file before it fails (503).
    static let busyTimeoutMilliseconds = 2_000

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        do {
            return try await readers.withConnection { connection in
                if self.closed.withLock({ $0 }) { throw StorageUnavailable.closed }
                return try await body(SQLExecutor(runner: SQLiteRunner(connection: connection, faults: faults), dialect: dialect))
            }
        } catch {
            throw StorageUnavailable.classify(error) ?? error
        }
    }

    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        do {
            return try await writeLock.withLock { try await runToCompletion {
                if self.closed.withLock({ $0 }) { throw StorageUnavailable.closed }
                var connection = self.writer.withLock { $0 }
                if connection.isClosed {
                    // Closed after a failed rollback and not yet opened again.
                    do {
                        connection = try await Self.openWriter(path: self.path, logger: self.logger)
                    } catch {
                        throw StorageUnavailable(reason: "the database file cannot be opened for writing")
                    }
                    self.writer.withLock { $0 = connection }
                }
                do {
                    return try await SQLExecutor(runner: SQLiteRunner(connection: connection, faults: self.faults), dialect: self.dialect).transaction(body)
                } catch let failed as RollbackFailed {
                    // The connection may still be inside the transaction: a new one takes over.
                    self.logger.error("A write could not be rolled back; the writer connection is opened again", metadata: ["error": "\(failed.cause)"])
                    try? await connection.close()
                    // Opened again here, or by the next write if that fails now.
                    if let fresh = try? await Self.openWriter(path: self.path, logger: self.logger) {
                        self.writer.withLock { $0 = fresh }
                    }
                    throw failed.cause
                }
            } }
        } catch {
            throw StorageUnavailable.classify(error) ?? error
        }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await write(body)
    }

    /// Only this process writes an SQLite file: it learns of every change as it commits.
    func logSignals() -> AsyncStream<Void>? { nil }

    /// Closes every connection, also for a caller that was cancelled (a shutdown, a request whose client left): in a
    /// cancelled task SQLiteNIO runs no statement, its close included, and a connection left open is an assertion
    /// when the storage goes away.
    func close() async throws {
        try await runToCompletion {
            try await self.writeLock.withLock {
                self.closed.withLock { $0 = true }
                for reader in self.readers.all { try await reader.close() }
                try await self.writer.withLock { $0 }.close()
                // Closed here: `docketd restore` may replace it now.
                self.inUse?.release()
            }
        }
    }
}
