import Foundation
import Logging

/// `docketd migrate`: copies a whole Docket database into an empty one, on either storage (SQLite to
/// PostgreSQL when a team moves up). Records, journals, attachments and their content, users, sessions, OAuth
/// clients and tokens, the event log with its sequence numbers, schema metadata and tables an administrator
/// added: every table, every row, in one transaction on the target, checked by counting afterwards.
public enum DatabaseCopy {
    public struct Report: Sendable {
        /// Rows copied, by table.
        public var rows: [(table: String, count: Int)] = []
        public var totalRows: Int { rows.reduce(0) { $0 + $1.count } }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Columns that hold bytes rather than text.
    static let blobColumns: Set<String> = ["docket_attachment_chunk.data"]
    /// Rows read and written per statement; of a table with bytes, few (each chunk may hold 256 KiB).
    static let batchSize = 200
    static let blobBatchSize = 4

    /// Copies `source` into `target`, which must hold no Docket database yet. The source is first brought up to
    /// this docketd's schema (as starting docketd on it would). `progress` is told of each table as it is done.
    public static func copy(
        from source: StorageLocation, to target: StorageLocation, logger: Logger,
        progress: @Sendable (String, Int) -> Void = { _, _ in }
    ) async throws -> Report {
        guard source != target else { throw Failure("The source and the target are the same database") }
        let from = try await source.open(logger: logger)
        do {
            let to = try await target.open(logger: logger)
            do {
                let report = try await copy(from: from, to: to, progress: progress)
                try await to.close()
                try await from.close()
                return report
            } catch {
                try? await to.close()
                throw error
            }
        } catch {
            try? await from.close()
            throw error
        }
    }

    static func copy(from: any Storage, to: any Storage, progress: @Sendable (String, Int) -> Void) async throws -> Report {
        // The source as this docketd would serve it (a database written by a newer one is refused here).
        guard try await from.read({ db in try await !db.rows(db.dialect.tableExists("docket_meta")).isEmpty }) else {
            throw Failure("The source holds no Docket database")
        }
        _ = try await SchemaStore.prepare(from)
        let catalog = try await SchemaStore.loadCatalog(from)
        guard try await to.read({ db in try await db.rows(db.dialect.tableExists("docket_meta")).isEmpty }) else {
            throw Failure("The target already holds a Docket database; copy only into an empty database (or a new schema)")
        }
        let tables = try await from.read { db in
            var tables: [(name: String, columns: [String])] = []
            for row in try await db.rows(db.dialect.tableNames) {
                guard let name = try row.value(at: "name", kind: .text).text else { continue }
                var columns: [String] = []
                for column in try await db.rows(db.dialect.columnNames(of: name)) {
                    if let column = try column.value(at: "name", kind: .text).text { columns.append(column) }
                }
                tables.append((name, columns))
            }
            return tables
        }
        // The target's tables: this docketd's own, then those of tables an administrator added, with every column
        // the source's catalog has.
        _ = try await SchemaStore.prepare(to)
        return try await to.write { db in
            let existing = Set(try await db.rows(db.dialect.tableNames).compactMap { try $0.value(at: "name", kind: .text).text })
            for root in catalog.roots {
                if existing.contains(root.physicalTable) {
                    try await SchemaStore.addMissingColumns(root, catalog: catalog, db: db)
                } else {
                    try await SchemaStore.createPhysicalTable(root, catalog: catalog, db: db)
                }
            }
            var report = Report()
            for table in tables {
                let targetColumns = Set(try await db.rows(db.dialect.columnNames(of: table.name))
                    .compactMap { try $0.value(at: "name", kind: .text).text })
                guard !targetColumns.isEmpty else {
                    throw Failure("The target has no table \(table.name), which the source has")
                }
                if let missing = table.columns.first(where: { !targetColumns.contains($0) }) {
                    throw Failure("The target's table \(table.name) has no column \(missing), which the source has")
                }
                // What the new database was seeded with gives way to what the source holds.
                try await db.run("DELETE FROM " + .identifier(table.name))
                let copied = try await copyRows(of: table.name, columns: table.columns, from: from, to: db)
                let counted = try await db.integer("SELECT COUNT(*) FROM " + .identifier(table.name))
                guard counted == copied else {
                    throw Failure("Copied \(copied) rows of \(table.name) but the target holds \(counted)")
                }
                report.rows.append((table.name, copied))
                progress(table.name, copied)
            }
            if let reset = db.dialect.eventLogSequenceReset { try await db.run(reset) }
            return report
        }
    }

    private static func copyRows(of table: String, columns: [String], from: any Storage, to db: SQLExecutor) async throws -> Int {
        guard let first = columns.first else { return 0 }
        let list = columns.map { SQLFragment.identifier($0) }.joined(", ")
        // Every table's primary key is among its first columns; ordering by them makes the pages exact.
        let order = ([first] + columns.dropFirst()).prefix(3).map { SQLFragment.identifier($0) }.joined(", ")
        let batchSize = columns.contains { blobColumns.contains(table + "." + $0) } ? blobBatchSize : batchSize
        var copied = 0
        while true {
            let offset = copied
            let rows = try await from.read { source in
                try await source.rows(
                    "SELECT " + list + " FROM " + .identifier(table) + " ORDER BY " + order + " LIMIT " + .bind(batchSize)
                        + " OFFSET " + .bind(offset)
                )
            }
            if rows.isEmpty { return offset }
            var values: [SQLFragment] = []
            for row in rows {
                var cells: [SQLFragment] = []
                for column in columns {
                    if blobColumns.contains(table + "." + column) {
                        cells.append(try row.buffer(at: column).map { .bind(SQLBlob($0)) } ?? "NULL")
                    } else {
                        cells.append(try row.value(at: column, kind: .text).fragment)
                    }
                }
                values.append("(" + cells.joined(", ") + ")")
            }
            try await db.run("INSERT INTO " + .identifier(table) + " (" + list + ") VALUES " + values.joined(", "))
            if rows.count < batchSize { return offset + rows.count }
            copied = offset + rows.count
        }
    }
}
