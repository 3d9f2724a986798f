import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresKit
import PostgresNIO
import SQLKit

/// A statement failed on the server; carries the server's message and SQLSTATE so that callers (and
/// ``StorageDialect/isIntegerOverflow(_:)``) can tell what went wrong.
struct PostgresStatementError: Error, CustomStringConvertible {
    let message: String
    let sqlState: String?

    var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }
}

/// Runs statements on one PostgreSQL connection. Text and integers are bound as text of no declared type, so that
/// the server infers each one's type from where it stands, as SQLite's affinity does: an integer column compared
/// with a bound "42" works on both. Doubles are bound as `float8`, blobs as `bytea`.
struct PostgresRunner: SQLRunner {
    let connection: PostgresConnection
    let logger: Logger
    var faults: StatementFaults? = nil
    /// Statements run again and again are prepared (nil: every statement is parsed on each run).
    var prepared: PreparedStatements? = nil

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try faults?.check(sql)
        let rows = try await execute(sql)
        if let faults, faults.isArmed { await faults.holdAnswer(of: sql) }
        return faults?.answer(of: sql, rows) ?? rows
    }

    private func execute(_ sql: SQLFragment) async throws -> [ResultRow] {
        let spoiled = faults?.spoils(sql) ?? false
        var bindings = PostgresBindings()
        // One letter per value, for how it is bound: a text prepared with values of other types is another statement.
        var signature = ""
        let text = try sql.postgresText { bind in
            switch bind {
            // PostgreSQL's text cannot hold NUL: it becomes U+FFFD (SQLite keeps it), so such input is stored or
            // matched like any other text instead of failing the statement.
            case let value as String:
                // (`utf8.contains(0)`: a byte scan; `contains("\u{0}")` is Foundation's search, a profile's 1 % of a POST.)
                bindings.append(UntypedText(value.utf8.contains(0) ? value.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : value))
                signature.append("t")
            case let value as Int:
                bindings.append(UntypedText(String(value)))
                signature.append("t")
            // Typed, so that an integer expression compared with it is widened rather than the number narrowed.
            case let value as Double:
                bindings.append(value)
                signature.append("d")
            case let value as Bool:
                bindings.append(UntypedText(value ? "1" : "0"))
                signature.append("t")
            case let value as SQLBlob:
                bindings.append(value.buffer)
                signature.append("b")
            default: throw PostgresStorageError.unsupportedBind(String(describing: type(of: bind)))
            }
        }
        // postgres-nio hands a statement to its connection without a promise for the hand-over: on a connection
        // already closed (by the server, an outage, or a pool's shutdown) the statement is dropped and its answer
        // never comes. This guard fails such a statement at once; one whose connection closes between this look and
        // the hand-over can still be dropped (a narrow window, not closed here).
        guard !connection.isClosed else { throw StorageUnavailable(reason: "the connection to PostgreSQL is closed") }
        do {
            if let prepared, let use = prepared.slot(for: text, signature: signature, on: connection, logger: logger) {
                do {
                    let (rows, columns) = try await Self.collect(
                        prepared.run(slot: use.slot, bindings: bindings, on: connection, logger: logger), spoiled: spoiled,
                        known: use.columns
                    )
                    prepared.ran(use, on: connection, error: nil, logger: logger)
                    if let columns, columns !== use.columns { prepared.remember(columns, of: use.slot) }
                    return rows
                } catch {
                    // A statement whose answer could not be read ran (and was prepared).
                    prepared.ran(use, on: connection, error: error is UndecodableAnswer ? nil : error, logger: logger)
                    throw error
                }
            }
            return try await Self.collect(
                connection.query(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger), spoiled: spoiled, known: nil
            ).rows
        } catch let error as PSQLError {
            if let message = error.serverInfo?[.message] {
                throw PostgresStatementError(message: message, sqlState: error.serverInfo?[.sqlState])
            }
            throw error
        }
    }

    /// Reads a statement's rows. A value that cannot be read (a type docketd does not read, a sum beyond 64 bits)
    /// does not stop the reading: the rest of the answer is read, and then ``UndecodableAnswer`` says that the
    /// statement ran to its end (and, run on its own, committed). Before, the value's error was thrown as it came,
    /// and looked like the statement's own failure. `spoiled`: tests only (``StatementFaults/spoilAnswerOfNext(_:)``).
    /// `known`: the statement's columns from an earlier run (used when the rows have as many); returns the columns
    /// used.
    private static func collect<Rows: AsyncSequence>(
        _ sequence: Rows, spoiled: Bool, known: PostgresColumns?
    ) async throws -> (rows: [ResultRow], columns: PostgresColumns?) where Rows.Element == PostgresRow {
        var result: [ResultRow] = []
        var columns = known
        var undecodable: (any Error)?
        for try await row in sequence where undecodable == nil {
            do {
                if spoiled { throw PostgresStorageError.unsupportedColumn("(spoiled by a test)", type: "none") }
                let names = columns.flatMap { $0.count == row.count ? $0 : nil } ?? PostgresColumns(row)
                columns = names
                result.append(ResultRow(try PostgresResultRow(row, columns: names)))
            } catch {
                undecodable = error
            }
        }
        if let undecodable { throw UndecodableAnswer(cause: undecodable) }
        return (result, result.isEmpty ? nil : columns)
    }

    func run(_ sql: SQLFragment) async throws { _ = try await rows(sql) }
}

/// Text whose type the server infers (type OID 0, text format).
private struct UntypedText: PostgresDynamicTypeEncodable {
    let text: String
    init(_ text: String) { self.text = text }

    var psqlType: PostgresDataType { .null }
    var psqlFormat: PostgresFormat { .text }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeString(text)
    }
}

/// Column names of one result, shared by its rows.
final class PostgresColumns: Sendable {
    let index: [String: Int]
    let first: String?
    /// How many columns (some may share a name).
    let count: Int

    init(_ row: PostgresRow) {
        var index: [String: Int] = [:]
        index.reserveCapacity(row.count)
        count = row.count
        var first: String?
        for (position, cell) in row.enumerated() {
            if first == nil { first = cell.columnName }
            if index[cell.columnName] == nil { index[cell.columnName] = position }
        }
        self.index = index
        self.first = first
    }
}

/// A PostgreSQL row converted to driver-neutral values as it arrives, so that a value out of range fails the
/// statement's reading (``UndecodableAnswer``, described as the value's error, which callers such as
/// ``StorageDialect/isIntegerOverflow(_:)`` recognise) rather than a later read.
struct PostgresResultRow: StorageRow {
    enum Cell: Sendable {
        case value(SQLValue)
        case bytes(ByteBuffer)
    }

    let columns: PostgresColumns
    let cells: [Cell]

    init(_ row: PostgresRow, columns: PostgresColumns) throws {
        self.columns = columns
        var cells: [Cell] = []
        for cell in row { cells.append(try Self.cell(cell)) }
        self.cells = cells
    }

    var firstValue: SQLValue {
        guard let cell = cells.first else { return .null }
        return Self.value(cell)
    }

    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        guard let position = columns.index[column], position < cells.count else { return .null }
        return Self.value(cells[position])
    }

    func buffer(at column: String) throws -> ByteBuffer? {
        guard let position = columns.index[column], position < cells.count else { return nil }
        switch cells[position] {
        case .bytes(let bytes): return bytes
        case .value(let value): return value.text.map { ByteBuffer(string: $0) }
        }
    }

    private static func value(_ cell: Cell) -> SQLValue {
        switch cell {
        case .value(let value): return value
        case .bytes(let bytes): return .text(String(buffer: bytes))
        }
    }

    private static func cell(_ cell: PostgresCell) throws -> Cell {
        guard cell.bytes != nil else { return .value(.null) }
        switch cell.dataType {
        case .int2, .int4, .int8, .oid: return .value(.integer(try cell.decode(Int.self)))
        case .float4, .float8: return .value(.real(try cell.decode(Double.self)))
        case .bool: return .value(.integer(try cell.decode(Bool.self) ? 1 : 0))
        case .bytea:
            guard cell.format == .binary, let buffer = cell.bytes else { return .value(.null) }
            return .bytes(buffer)
        case .numeric:
            // SUM and AVG of integers are numeric: integral ones must fit 64 bits, as SQLite's do.
            let text = "\(try cell.decode(Decimal.self))"
            if let integer = Int(text) { return .value(.integer(integer)) }
            if !text.contains("."), !text.contains("e"), !text.contains("E") {
                throw PostgresStatementError(message: "bigint out of range", sqlState: "22003")
            }
            return .value(.real(Double(text) ?? .nan))
        case .void: return .value(.null)
        case .text, .varchar, .bpchar, .name, .json, .jsonb, .uuid:
            return .value(.text(try cell.decode(String.self)))
        default:
            if cell.format == .text, let bytes = cell.bytes { return .value(.text(String(buffer: bytes))) }
            throw PostgresStorageError.unsupportedColumn(cell.columnName, type: "\(cell.dataType)")
        }
    }
}

extension StorageUnavailable {
    /// PostgreSQL's ways of being unavailable: a connection that could not be made or broke, a server shutting
    /// down or starting, too many connections, a full disk, a read-only standby.
    static func classifyPostgres(_ error: any Error) -> StorageUnavailable? {
        func unavailable(sqlState: String?, message: String) -> StorageUnavailable? {
            guard let state = sqlState else { return nil }
            // 08: connection exception; 57P01-03: shutting down or starting; 53: insufficient resources;
            // 25006: read-only transaction (a standby); 58030: I/O error; 55P03: a lock not had within
            // `lock_timeout` (a write stuck ahead of this one).
            guard state.hasPrefix("08") || state.hasPrefix("53")
                || ["57P01", "57P02", "57P03", "25006", "58030", "55P03"].contains(state)
            else { return nil }
            return StorageUnavailable(reason: "PostgreSQL: \(message)", lockWait: state == "55P03")
        }
        switch error {
        case let error as PostgresStatementError:
            return unavailable(sqlState: error.sqlState, message: error.message)
        case let error as PSQLError:
            switch error.code {
            case .server:
                return unavailable(sqlState: error.serverInfo?[.sqlState], message: error.serverInfo?[.message] ?? "server error")
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
                .sslUnsupported, .failedToAddSSLHandler:
                return StorageUnavailable(reason: "the connection to PostgreSQL failed (\(PostgresStorage.describe(error)))")
            default:
                return nil
            }
        case is NIOConnectionError, is ChannelError, is IOError:
            return StorageUnavailable(reason: "the connection to PostgreSQL failed (\(PostgresStorage.describe(error)))")
        default:
            return nil
        }
    }
}
