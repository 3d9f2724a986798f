import DocketModel
import Foundation
import Synchronization
import SQLKit

extension RecordStore {
    /// Reads a page of records the caller may see.
    func list(_ request: RecordQuery, caller: Caller) async throws -> RecordPage {
        let table = try table(request.table)
        var query = request.query
        switch request.invalidTerms {
        case .ignore:
            break
        case .noRows:
            if let refusal = invalidTerm(of: query, in: table, caller: caller) {
                // Other refusals (a query too complex, a password field) stay what they are, wherever they come.
                guard refusal.message == Self.invalidQueryMessage else { throw refusal }
                var compiler = compiler(for: table, caller: caller, dialect: storage.dialect)
                _ = try compiler.condition(for: query)
                _ = try compiler.orderBy(query.orderBy)
                // No record has an empty sys_id: the same columns, ordering and count, and no rows.
                query = EncodedQuery(all: [QueryCondition("sys_id", .isEmpty)])
            }
        }
        return try await storage.read { [query] db in
            try await self.select(
                table, query: query, fields: request.fields, limit: request.limit, offset: request.offset,
                count: request.count, caller: caller, db: db
            )
        }
    }

    /// The message of the 400 that refuses a query with a term the engine cannot use.
    static let invalidQueryMessage = "Invalid encoded query"

    /// Throws a 400 naming the first term of `query` the engine cannot use on `table` (an unknown field, table or
    /// dynamic value, a sort on an unknown field), with the field meant where one is close: the same resolution a
    /// read makes, which would drop such a term.
    func check(_ query: EncodedQuery, in table: SchemaCatalog.Table, caller: Caller) throws(EngineError) {
        if let refusal = invalidTerm(of: query, in: table, caller: caller) { throw refusal }
    }

    /// What ``check(_:in:caller:)`` would throw, or nil.
    private func invalidTerm(of query: EncodedQuery, in table: SchemaCatalog.Table, caller: Caller) -> EngineError? {
        var compiler = compiler(for: table, caller: caller, dialect: storage.dialect)
        compiler.unknownTerms = .refuse
        do {
            _ = try compiler.condition(for: query)
            _ = try compiler.orderBy(query.orderBy)
            return nil
        } catch {
            return error
        }
    }

    /// Reads one record by sys_id; throws ``EngineError/notFound`` when it does not exist or is hidden.
    func get(_ sysID: String, in tableName: String, fields: [String]? = nil, caller: Caller) async throws
        -> (columns: [ResultColumn], record: Record)
    {
        let table = try table(tableName)
        // Callers who may read every record of the table, asking for plain fields, can be served from the
        // record cache; anyone whose access depends on the row goes through SQL every time.
        var compiler = compiler(for: table, caller: caller, dialect: storage.dialect)
        let cacheable = try compiler.tracedAccessFilter(.read) == nil && !(fields ?? []).contains { $0.contains(".") }
        if cacheable, let hit = cachedRecord(sysID, table: table, fields: fields) { return hit }
        let generation = cache.generation
        let page = try await storage.read { db in
            try await self.select(
                table, query: EncodedQuery(), fields: cacheable ? nil : fields, sysID: sysID, limit: 1, offset: 0,
                count: false, caller: caller, db: db
            )
        }
        guard let record = page.records.first else { throw EngineError.notFound }
        guard cacheable else { return (page.columns, record) }
        cache.store(.init(viewTable: table.name, record: record), physicalTable: table.physicalTable, generation: generation)
        return cachedRecord(sysID, table: table, fields: fields) ?? (page.columns, record)
    }

    /// A cached record shaped for a read through `table`, if the cache holds one with all its fields.
    private func cachedRecord(_ sysID: String, table: SchemaCatalog.Table, fields: [String]?)
        -> (columns: [ResultColumn], record: Record)?
    {
        guard let entry = cache.entry(table: table.physicalTable, sysID: sysID),
            table.descendants.contains(entry.record.table),
            let view = catalog.table(entry.viewTable), view.ancestry.contains(table.name)
        else { return nil }
        guard let fields else {
            // Extra values of a child class are harmless: renderers only read the columns they are given.
            return (table.readableColumns, Record(table: entry.record.table, sysID: sysID, values: entry.record.values))
        }
        var columns: [ResultColumn] = []
        var seen = Set<String>()
        var values: [String: String] = [:]
        for name in fields where seen.insert(name).inserted {
            guard let field = table.field(name) else { continue }
            columns.append(ResultColumn(name: name, field: field))
            if field.type.isStored { values[name] = entry.record[name] }
        }
        return (columns, Record(table: entry.record.table, sysID: sysID, values: values))
    }

    /// The one SELECT behind every read. `locking`: the rows read are locked for the rest of the write's transaction
    /// (``SelectPlan/run(sysID:limit:offset:count:locking:db:)``).
    func select(
        _ table: SchemaCatalog.Table, query: EncodedQuery, fields: [String]?, sysID: String? = nil, limit: Int,
        offset: Int, count: Bool, caller: Caller, locking: Bool = false, db: SQLExecutor
    ) async throws -> RecordPage {
        try await selectPlan(table, query: query, fields: fields, caller: caller, dialect: db.dialect)
            .run(sysID: sysID, limit: limit, offset: offset, count: count, locking: locking, db: db)
    }

    /// ``select(_:query:fields:sysID:limit:offset:count:caller:db:)`` compiled, to be run later: a write's read-back
    /// is compiled before the write and only run inside it, so that the one SQLite writer spends no time on it.
    func selectPlan(
        _ table: SchemaCatalog.Table, query: EncodedQuery, fields: [String]?, caller: Caller, dialect: StorageDialect
    ) throws -> SelectPlan {
        var compiler = compiler(for: table, caller: caller, dialect: dialect)
        let projection: ProjectionCache.Projection
        if let kept = projections.projection(of: table, fields: fields) {
            projection = kept
        } else {
            projection = Self.projection(of: table, fields: fields, compiler: &compiler)
            // Columns of the table's own fields are the same for every caller: the callers' access is in the
            // conditions, compiled for each below. Kept only for lists of the table's fields, each named once (what
            // a caller sends, with unknown names, dot-walks or repeats, is compiled each time and never kept).
            if ProjectionCache.keepable(fields, of: table) {
                projections.keep(projection, of: table, fields: fields)
            }
        }
        var conditions: [SQLFragment] = []
        if let filter = compiler.classFilter() { conditions.append(filter) }
        let access = try compiler.tracedAccessFilter(.read)
        if let access { conditions.append(access) }
        let condition = try compiler.condition(for: query)
        if let condition { conditions.append(condition) }
        let order = try compiler.orderBy(query.orderBy)
        // A row of the table as inserted is read from the insert itself when nothing but its class (which an
        // insert of the table meets) stands between the caller and its columns.
        let returning = dialect.insertAnswersRow && access == nil && condition == nil && compiler.readsTableAlone
            && ProjectionCache.keepable(fields, of: table)
            ? SelectPlan.Returning(alias: compiler.alias, columns: projection.expressions) : nil
        return SelectPlan(
            table: table, columns: projection.columns, select: projection.select + compiler.from,
            expressions: projection.expressions, from: compiler.from, sysIDColumn: compiler.column("sys_id"), alias: compiler.alias, conditions: conditions,
            order: order, returning: returning
        )
    }

    /// `SELECT <the columns> FROM ` of a select, and its columns.
    private static func projection(
        of table: SchemaCatalog.Table, fields: [String]?, compiler: inout QueryCompiler
    ) -> ProjectionCache.Projection {
        var columns: [ResultColumn] = []
        var expressions: [SQLFragment] = [compiler.column("sys_id") + " AS " + .identifier("_id")]
        if table.isInHierarchy { expressions.append(compiler.column("sys_class_name") + " AS " + .identifier("_class")) }
        var seen = Set<String>()
        for name in fields ?? table.fields.map(\.name) {
            guard seen.insert(name).inserted else { continue }
            if let field = table.field(name), field.type == .journal {
                columns.append(ResultColumn(name: name, field: field))
                continue
            }
            // A password is read as a mask when set: the hash itself never leaves the database.
            if let field = table.field(name), field.type == .password {
                let column = compiler.column(name)
                expressions.append(
                    "CASE WHEN " + column + " IS NULL OR " + column + " = '' THEN '' ELSE "
                        + SQLFragment("'\(FieldCoercion.passwordMask)'") + " END AS " + .identifier("c\(columns.count)")
                )
                columns.append(ResultColumn(name: name, field: field))
                continue
            }
            // Unknown and unreadable fields are left out, as ServiceNow does for sysparm_fields.
            guard let (expression, field) = try? compiler.resolve(name, scope: .table) else { continue }
            expressions.append(expression + " AS " + .identifier("c\(columns.count)"))
            columns.append(ResultColumn(name: name, field: field))
        }
        // Run for every read of these columns: rendered with one append, not one per name (a table's every field is
        // hundreds of pieces).
        let list = expressions.joined(", ").compacted()
        return ProjectionCache.Projection(columns: columns, select: ("SELECT " + list + " FROM ").compacted(), expressions: list)
    }

    /// The columns of selects that name no dot-walk, for each table and list of fields: the same for every
    /// caller (which fields exist, their types, a password's mask), so compiled once. A table of a catalog loaded
    /// again is another table: its entry is not used (and is replaced). Cleared when full.
    final class ProjectionCache: Sendable {
        struct Projection: Sendable {
            let columns: [ResultColumn]
            /// `SELECT <columns> FROM `.
            let select: SQLFragment
            /// `<columns>` alone.
            let expressions: SQLFragment
        }

        private struct Entry {
            let table: SchemaCatalog.Table
            let projection: Projection
        }

        private struct Key: Hashable {
            let table: String
            /// nil: every field.
            let fields: [String]?
        }

        static let limit = 512
        private let entries = Mutex<[Key: Entry]>([:])

        /// Whether a list may be kept: every field (nil), or fields of the table each named once (so an entry is
        /// never larger than the table's own names, and what a caller makes up is never kept).
        static func keepable(_ fields: [String]?, of table: SchemaCatalog.Table) -> Bool {
            guard let fields else { return true }
            return fields.count <= table.fields.count && Set(fields).count == fields.count
                && fields.allSatisfy { table.field($0) != nil }
        }

        func projection(of table: SchemaCatalog.Table, fields: [String]?) -> Projection? {
            let key = Key(table: table.name, fields: fields)
            return entries.withLock { entries in
                guard let entry = entries[key], entry.table === table else { return nil }
                return entry.projection
            }
        }

        func keep(_ projection: Projection, of table: SchemaCatalog.Table, fields: [String]?) {
            let key = Key(table: table.name, fields: fields)
            entries.withLock { entries in
                if entries.count >= Self.limit { entries.removeAll(keepingCapacity: true) }
                entries[key] = Entry(table: table, projection: projection)
            }
        }

        /// Forgets every entry (the catalog was loaded again: its tables are new).
        func removeAll() {
            entries.withLock { $0.removeAll() }
        }
    }

    /// A compiled ``RecordStore/select(_:query:fields:sysID:limit:offset:count:caller:db:)``.
    struct SelectPlan: Sendable {
        let table: SchemaCatalog.Table
        let columns: [ResultColumn]
        /// `SELECT … FROM …`.
        let select: SQLFragment
        /// The columns of `select` alone.
        let expressions: SQLFragment
        let from: SQLFragment
        let sysIDColumn: SQLFragment
        /// The table's alias in `from`.
        let alias: String
        /// The class, access and query conditions (the sys_id's, when given, comes first).
        let conditions: [SQLFragment]
        let order: SQLFragment
        /// When the plan's columns may be read from an insert of its table (`INSERT INTO table AS alias …
        /// RETURNING columns`): PostgreSQL, the caller's read access unconditional, no query condition, the table's
        /// own fields only, read from the table alone.
        let returning: Returning?

        struct Returning: Sendable {
            let alias: String
            let columns: SQLFragment
        }

        /// `locking`: on PostgreSQL, the table's rows read are locked until the transaction ends (`FOR UPDATE OF`
        /// the table alone, never a joined one), and read as their newest committed version: a write that reads the
        /// row it changes this way takes its row lock and its read in one round trip. Nothing on SQLite, whose one
        /// writer has every row to itself.
        func run(sysID: String?, limit: Int, offset: Int, count: Bool, locking: Bool = false, db: SQLExecutor) async throws -> RecordPage {
            var conditions = conditions
            if let sysID { conditions.insert(sysIDColumn + " = " + .bind(sysID), at: 0) }
            let whereClause: SQLFragment = conditions.isEmpty ? "" : " WHERE " + conditions.joined(" AND ")
            var records: [Record] = []
            if limit > 0 {
                let lock: SQLFragment = locking ? db.dialect.lockingRows(of: alias) : ""
                let rows = try await db.rows(
                    select + whereClause + " " + order + " LIMIT " + .bind(limit) + " OFFSET " + .bind(offset) + lock
                )
                records = try self.records(rows)
            }
            var total: Int? = nil
            if count {
                total = try await db.integer("SELECT COUNT(*) FROM " + from + whereClause)
            }
            return RecordPage(columns: columns, records: records, total: total)
        }

        /// The record `sysID` and its row's version (``StorageDialect/rowVersion(of:)``); nil when the caller does not
        /// see the record, or where the storage keeps no version.
        func rowWithVersion(_ sysID: String, db: SQLExecutor) async throws -> (record: Record, version: String)? {
            guard let rowVersion = db.dialect.rowVersion(of: alias) else { return nil }
            let conditions = [sysIDColumn + " = " + .bind(sysID)] + self.conditions
            let rows = try await db.rows(
                "SELECT " + rowVersion + " AS " + .identifier("_version") + ", " + expressions + " FROM " + from + " WHERE "
                    + conditions.joined(" AND ") + " LIMIT 1"
            )
            guard let row = rows.first, let record = try records([row]).first,
                let version = try row.value(at: "_version", kind: .text).text, !version.isEmpty
            else { return nil }
            return (record, version)
        }

        /// The records of rows with the plan's columns (`_id`, `_class`, then `c0`, `c1`, …).
        func records(_ rows: [ResultRow]) throws -> [Record] {
            var records: [Record] = []
            records.reserveCapacity(rows.count)
            let stored = columns.enumerated().filter { $0.element.field.type.isStored }
                .map { (alias: "c\($0.offset)", column: $0.element) }
            for row in rows {
                let id = try row.value(at: "_id", kind: .text).text ?? ""
                var values: [String: String] = [:]
                values.reserveCapacity(stored.count)
                for (alias, column) in stored {
                    values[column.name] = RecordStore.string(
                        try row.value(at: alias, kind: column.field.columnKind), type: column.field.type
                    )
                }
                let concrete = table.isInHierarchy ? try row.value(at: "_class", kind: .text).text ?? table.name : table.name
                records.append(Record(table: concrete, sysID: id, values: values))
            }
            return records
        }
    }

    /// A stored value in the wire's string form.
    static func string(_ value: SQLValue, type: FieldType) -> String {
        switch value {
        case .null: return ""
        case .text(let text): return text
        case .integer(let number): return type == .boolean ? (number != 0 ? "true" : "false") : String(number)
        case .real(let number):
            return number == number.rounded() && abs(number) < 1e15 ? String(Int64(number)) : String(number)
        }
    }

    // MARK: Display support

    /// Display values of referenced records: table → sys_id → display value.
    func displayValues(_ references: [String: Set<String>], caller: Caller) async throws -> [String: [String: String]] {
        let catalog = self.catalog
        return try await storage.read { db in
            var result: [String: [String: String]] = [:]
            for (tableName, ids) in references where !ids.isEmpty {
                guard let table = catalog.table(tableName), let display = table.displayField,
                    let field = table.field(display), field.type.isStored
                else { continue }
                // Like a dot-walk, a display value only shows records the caller may read: the sys_id of a
                // hidden one stays, its display value is empty.
                var compiler = self.compiler(for: table, caller: caller, dialect: db.dialect)
                let access = try compiler.accessFilter(.read)
                for chunk in Array(ids).chunked(500) {
                    var conditions = [compiler.column("sys_id") + " IN (" + .bindList(chunk) + ")"]
                    if let access { conditions.append(access) }
                    for row in try await db.rows(
                        "SELECT " + compiler.column("sys_id") + " AS id, " + compiler.column(display) + " AS d FROM "
                            + compiler.from + " WHERE " + conditions.joined(" AND ")
                    ) {
                        let id = try row.value(at: "id", kind: .text).text ?? ""
                        result[tableName, default: [:]][id] = Self.string(
                            try row.value(at: "d", kind: field.columnKind), type: field.type
                        )
                    }
                }
            }
            return result
        }
    }

    /// Journal entries of records, newest first, keyed by record sys_id. Callers pass only records the
    /// caller may read.
    func journalEntries(for recordIDs: [String], elements: Set<String>) async throws -> [String: [JournalEntry]] {
        guard !recordIDs.isEmpty, !elements.isEmpty else { return [:] }
        return try await storage.read { db in
            var result: [String: [JournalEntry]] = [:]
            for chunk in recordIDs.chunked(500) {
                for row in try await db.rows(
                    "SELECT j.element_id, j.element, j.value, j.sys_created_on, j.sys_created_by, u.name AS user_display"
                        + " FROM sys_journal_field AS j LEFT JOIN sys_user AS u ON u.user_name = j.sys_created_by"
                        + " WHERE j.element_id IN (" + .bindList(chunk) + ") AND j.element IN ("
                        + .bindList(elements.sorted()) + ") ORDER BY j.sys_created_on DESC, j.sys_id DESC"
                ) {
                    let entry = JournalEntry(
                        element: try row.value(at: "element", kind: .text).text ?? "",
                        value: try row.value(at: "value", kind: .text).text ?? "",
                        createdOn: try row.value(at: "sys_created_on", kind: .text).text ?? "",
                        createdBy: try row.value(at: "sys_created_by", kind: .text).text ?? "",
                        createdByName: try row.value(at: "user_display", kind: .text).text
                    )
                    result[try row.value(at: "element_id", kind: .text).text ?? "", default: []].append(entry)
                }
            }
            return result
        }
    }
}

/// One journal entry (`sys_journal_field` row) with its author's display name.
struct JournalEntry: Sendable, Equatable {
    var element: String
    var value: String
    var createdOn: String
    var createdBy: String
    var createdByName: String?
}

extension Array {
    func chunked(_ size: Int) -> [ArraySlice<Element>] {
        stride(from: 0, to: count, by: size).map { self[$0..<Swift.min($0 + size, count)] }
    }
}

extension RecordStore {
    /// Whether a list of `table` selects the same rows in the same order whenever it is read: its query, its order and
    /// the caller's read filter compile alike for a date 400 days later (a query relative to today does not).
    func listIsTimeless(_ table: SchemaCatalog.Table, query: EncodedQuery, caller: Caller) -> Bool {
        let catalog = self.catalog
        func compiled(_ now: Date) -> String? {
            var compiler = QueryCompiler(catalog: catalog, policy: policy, dialect: storage.dialect, caller: caller, now: now, table: table)
            do {
                let access = try compiler.accessFilter(.read)?.keyText ?? "*"
                let condition = try compiler.condition(for: query)?.keyText ?? "*"
                let order = try compiler.orderBy(query.orderBy).keyText
                return access + "\u{0}" + condition + "\u{0}" + order
            } catch {
                return nil
            }
        }
        let now = Date()
        guard let today = compiled(now) else { return false }
        return today == compiled(now.addingTimeInterval(400 * 86_400))
    }
}
