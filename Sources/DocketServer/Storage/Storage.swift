import SQLKit
import SQLiteKit
import Synchronization

/// Runs SQL for the engine. Reads may run concurrently; writes run one at a time, each in a transaction.
protocol Storage: Sendable {
    var dialect: StorageDialect { get }
    /// Runs `body` with a connection suitable for reading.
    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T
    /// Runs `body` in a write transaction: committed when it returns, rolled back when it throws.
    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T
    /// Closes every connection; no call may follow.
    func close() async throws
}

/// A connection and its dialect, handed to engine code for the span of one read or one transaction.
struct SQLExecutor: Sendable {
    let database: any SQLDatabase
    let dialect: StorageDialect

    /// Runs a statement and returns its rows.
    func rows(_ sql: SQLFragment) async throws -> [any SQLRow] {
        let collected = Mutex<[any SQLRow]>([])
        try await database.execute(sql: sql) { row in collected.withLock { $0.append(row) } }
        return collected.withLock { $0 }
    }

    /// Runs a statement that returns no rows.
    func run(_ sql: SQLFragment) async throws {
        try await database.execute(sql: sql) { _ in }
    }

    /// Runs a statement that returns one integer (a count).
    func integer(_ sql: SQLFragment) async throws -> Int {
        guard let row = try await rows(sql).first else { return 0 }
        return try row.value(at: row.allColumns[0], kind: .integer).intValue ?? 0
    }
}

/// How to read a column.
enum ColumnKind: Sendable {
    case text
    case integer
    case real
}

extension SQLValue {
    var intValue: Int? {
        switch self {
        case .integer(let value): return value
        case .real(let value): return Int(value)
        case .text(let value): return Int(value)
        case .null: return nil
        }
    }
}

extension SQLRow {
    /// Reads one column as a driver-neutral value.
    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        if let row = self as? SQLiteRow {
            // Fast path: SQLite rows already hold typed values; no Decoder round trip.
            switch row.column(column) {
            case .integer(let value): return .integer(value)
            case .float(let value): return .real(value)
            case .text(let value): return .text(value)
            case .blob(let buffer): return .text(String(buffer: buffer))
            case .null, .none: return .null
            }
        }
        if try decodeNil(column: column) { return .null }
        switch kind {
        case .text: return .text(try decode(column: column, as: String.self))
        case .integer: return .integer(try decode(column: column, as: Int.self))
        case .real: return .real(try decode(column: column, as: Double.self))
        }
    }
}

/// SQLite storage: one file in WAL mode, one writer connection behind an async lock, and a few reader
/// connections used round-robin (WAL lets readers run while a write is in progress).
final class SQLiteStorage: Storage {
    let dialect = StorageDialect.sqlite
    private let writer: SQLiteConnection
    private let readers: [SQLiteConnection]
    private let writeLock = AsyncLock()
    private let nextReader = Mutex(0)

    private init(writer: SQLiteConnection, readers: [SQLiteConnection]) {
        self.writer = writer
        self.readers = readers
    }

    /// Opens (creating if needed) the database file at `path`.
    static func open(path: String, readers readerCount: Int = 4, logger: Logger) async throws -> SQLiteStorage {
        let writer = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        do {
            let database = writer.sql()
            try await database.execute(sql: SQLRaw("PRAGMA journal_mode=WAL")) { _ in }
            try await database.execute(sql: SQLRaw("PRAGMA synchronous=NORMAL")) { _ in }
            var readers: [SQLiteConnection] = []
            for _ in 0..<max(1, readerCount) {
                let reader = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
                try await reader.sql().execute(sql: SQLRaw("PRAGMA query_only=ON")) { _ in }
                readers.append(reader)
            }
            return SQLiteStorage(writer: writer, readers: readers)
        } catch {
            try? await writer.close()
            throw error
        }
    }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        let index = nextReader.withLock { value in
            value = (value + 1) % readers.count
            return value
        }
        return try await body(SQLExecutor(database: readers[index].sql(), dialect: dialect))
    }

    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        let executor = SQLExecutor(database: writer.sql(), dialect: dialect)
        return try await writeLock.withLock {
            try await executor.run(SQLFragment(self.dialect.beginTransaction))
            do {
                let result = try await body(executor)
                try await executor.run("COMMIT")
                return result
            } catch {
                try? await executor.run("ROLLBACK")
                throw error
            }
        }
    }

    func close() async throws {
        try await writeLock.withLock {
            for reader in self.readers { try await reader.close() }
            try await self.writer.close()
        }
    }
}
