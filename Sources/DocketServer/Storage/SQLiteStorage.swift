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

    func bytes(at column: String) throws -> [UInt8]? {
        switch self.column(column) {
        case .blob(let buffer): return Array(buffer.readableBytesView)
        case .text(let text): return Array(text.utf8)
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

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        let (text, binds) = connection.sql().serialize(sql)
        let data = try binds.map { bind -> SQLiteData in
            switch bind {
            case let value as String: return .text(value)
            case let value as Int: return .integer(value)
            case let value as Double: return .float(value)
            case let value as SQLBlob: return .blob(ByteBuffer(bytes: value.bytes))
            default: return try SQLiteDataEncoder().encode(bind)
            }
        }
        let collected = Mutex<[ResultRow]>([])
        try await connection.query(text, data) { row in collected.withLock { $0.append(ResultRow(row)) } }
        return collected.withLock { $0 }
    }
}

/// SQLite storage: one file in WAL mode, one writer connection behind an async lock, and a few reader
/// connections, each lent to one read at a time (WAL lets readers run while a write is in progress).
final class SQLiteStorage: Storage {
    let dialect = StorageDialect.sqlite
    private let writer: SQLiteConnection
    private let readers: ConnectionPool<SQLiteConnection>
    private let writeLock = AsyncLock()

    private init(writer: SQLiteConnection, readers: [SQLiteConnection]) {
        self.writer = writer
        self.readers = ConnectionPool(readers)
    }

    /// Opens (creating if needed) the database file at `path`.
    static func open(path: String, readers readerCount: Int = 4, logger: Logger) async throws -> SQLiteStorage {
        let writer = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        do {
            let runner = SQLiteRunner(connection: writer)
            _ = try await runner.rows("PRAGMA journal_mode=WAL")
            _ = try await runner.rows("PRAGMA synchronous=NORMAL")
            var readers: [SQLiteConnection] = []
            for _ in 0..<max(1, readerCount) {
                let reader = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
                _ = try await SQLiteRunner(connection: reader).rows("PRAGMA query_only=ON")
                readers.append(reader)
            }
            return SQLiteStorage(writer: writer, readers: readers)
        } catch {
            try? await writer.close()
            throw error
        }
    }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await readers.withConnection { connection in
            try await body(SQLExecutor(runner: SQLiteRunner(connection: connection), dialect: dialect))
        }
    }

    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        let executor = SQLExecutor(runner: SQLiteRunner(connection: writer), dialect: dialect)
        return try await writeLock.withLock { try await executor.transaction(body) }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await write(body)
    }

    /// Only this process writes an SQLite file: it learns of every change as it commits.
    func logSignals() -> AsyncStream<Void>? { nil }

    func close() async throws {
        try await writeLock.withLock {
            for reader in self.readers.all { try await reader.close() }
            try await self.writer.close()
        }
    }
}
