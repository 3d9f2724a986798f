import Foundation
import Logging

/// `docketd migrate`: copies a whole Docket database into an empty one, on either storage (SQLite to
/// PostgreSQL when a team moves up). Records, journals, attachments and their content, users, sessions, OAuth
/// clients and tokens, the event log with its sequence numbers, schema metadata and tables an administrator
/// added: every table, every row, in one transaction on the target, checked by counting afterwards.
///
/// The source is never written. Every row is read from one snapshot of it: an SQLite source is first copied with
/// `VACUUM INTO` to a temporary file (one read transaction), and a PostgreSQL source is read in one
/// `REPEATABLE READ, READ ONLY` transaction. An SQLite source of an older schema is brought up to date in that
/// temporary copy; a PostgreSQL source must already have this docketd's schema (start this docketd on it once).
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

    /// Copies `source` into `target`, which must hold no Docket database yet. `progress` is told of each table as
    /// it is done.
    public static func copy(
        from source: StorageLocation, to target: StorageLocation, logger: Logger,
        progress: @Sendable (String, Int) -> Void = { _, _ in }
    ) async throws -> Report {
        guard source != target else { throw Failure("The source and the target are the same database") }
        var snapshotFolder: String?
        defer { if let snapshotFolder { try? FileManager.default.removeItem(atPath: snapshotFolder) } }
        var reading = source
        if case .sqlite(let path) = source {
            guard FileManager.default.fileExists(atPath: path) else { throw Failure("There is no database at \(path)") }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("docket-migrate-" + UUID().uuidString).path
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            snapshotFolder = folder
            do {
                try await DatabaseBackup.snapshot(of: path, into: folder + "/source.sqlite", logger: logger)
            } catch let failure as DatabaseBackup.Failure {
                throw Failure(failure.description)
            }
            reading = .sqlite(path: folder + "/source.sqlite")
        }
        let from = try await reading.open(logger: logger)
        do {
            let to = try await target.open(logger: logger)
            do {
                let report = try await copy(from: from, to: to, fromPrivateCopy: snapshotFolder != nil, progress: progress)
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

    /// `fromPrivateCopy`: the source is docketd's own temporary snapshot, which may be migrated; any other source is
    /// only read, and must have this docketd's schema.
    static func copy(
        from: any Storage, to: any Storage, fromPrivateCopy: Bool = false, progress: @Sendable (String, Int) -> Void
    ) async throws -> Report {
        // The source as this docketd would serve it (a database written by a newer one is refused here).
        guard try await from.read({ db in try await !db.rows(db.dialect.tableExists("docket_meta")).isEmpty }) else {
            throw Failure("The source holds no Docket database")
        }
        if fromPrivateCopy {
            // The temporary snapshot, not the source: brought up to this docketd's schema as starting it would.
            _ = try await SchemaStore.prepare(from)
        } else {
            try await requireCurrentSchema(from)
        }
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
        return try await from.read { source in
            try await source.run(SQLFragment(from.dialect.beginSnapshot))
            do {
                let report = try await copyTables(tables, catalog: catalog, from: source, to: to, progress: progress)
                try await source.run("COMMIT")
                return report
            } catch {
                try? await source.run("ROLLBACK")
                throw error
            }
        }
    }

    /// A database this docketd has not migrated is not read: its layout may differ.
    private static func requireCurrentSchema(_ storage: any Storage) async throws {
        switch try await storage.read({ db in try await SchemaStore.standing(db) }) {
        case .current: return
        case .newer(let what):
            throw Failure("The source was written by a newer docketd (it has \(what)); copy it with that docketd. Nothing was changed.")
        case .older(let version):
            throw Failure(
                "The source has an older schema (version \(version)); start this docketd on it once to bring it up to date, then copy it. Nothing was changed."
            )
        }
    }

    private static func copyTables(
        _ tables: [(name: String, columns: [String])], catalog: SchemaCatalog, from: SQLExecutor, to: any Storage,
        progress: @Sendable (String, Int) -> Void
    ) async throws -> Report {
        try await to.write { db in
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
            try await NumberSequences.carry(from: from, to: db)
            return report
        }
    }

    /// Copies a table's rows a page at a time, all pages read in the caller's one snapshot of the source.
    private static func copyRows(of table: String, columns: [String], from source: SQLExecutor, to db: SQLExecutor) async throws -> Int {
        guard let first = columns.first else { return 0 }
        let list = columns.map { SQLFragment.identifier($0) }.joined(", ")
        // Every table's primary key is among its first columns; ordering by them makes the pages exact.
        let order = ([first] + columns.dropFirst()).prefix(3).map { SQLFragment.identifier($0) }.joined(", ")
        let batchSize = columns.contains { blobColumns.contains(table + "." + $0) } ? blobBatchSize : batchSize
        var copied = 0
        while true {
            let offset = copied
            let rows = try await source.rows(
                "SELECT " + list + " FROM " + .identifier(table) + " ORDER BY " + order + " LIMIT " + .bind(batchSize)
                    + " OFFSET " + .bind(offset)
            )
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
