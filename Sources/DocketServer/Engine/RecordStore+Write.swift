import DocketModel
import Foundation
import Tracing
import Synchronization

extension RecordStore {
    /// Reads a record as `caller` sees it inside a writing transaction: what the write commits, whatever commits
    /// after it (for answers that must report exactly what was written).
    func readBack(
        _ sysID: String, in table: SchemaCatalog.Table, fields: [String]?, caller: Caller, db: SQLExecutor
    ) async throws -> (columns: [ResultColumn], record: Record)? {
        try await readBackPlan(table, fields: fields, caller: caller).run(sysID, db: db)
    }

    /// ``readBack(_:in:fields:caller:db:)`` compiled ahead, to run inside a write.
    func readBackPlan(_ table: SchemaCatalog.Table, fields: [String]?, caller: Caller) throws -> ReadBackPlan {
        ReadBackPlan(select: try selectPlan(table, query: EncodedQuery(), fields: fields, caller: caller, dialect: storage.dialect))
    }

    struct ReadBackPlan: Sendable {
        let select: SelectPlan

        func run(_ sysID: String, db: SQLExecutor) async throws -> (columns: [ResultColumn], record: Record)? {
            let page = try await select.run(sysID: sysID, limit: 1, offset: 0, count: false, db: db)
            return page.records.first.map { (page.columns, $0) }
        }
    }

    /// Validated input of one write.
    struct PreparedWrite: Sendable {
        var values: [String: String] = [:]
        var journals: [(field: String, text: String)] = []
        var sysID: String?
        var systemValues: [String: String] = [:]
        /// References written as sys_ids of records that do not exist (any more): an update may keep one the
        /// record already holds (a form sends every field back); any other is refused with its error.
        var dangling: [String: EngineError] = [:]
    }

    /// Deletes a record and its journal entries. With `options.expectedModCount`, only that version of it (else
    /// ``EngineError/Code/conflict`` with the current record); with `options.idempotency`, the key is recorded with it.
    func delete(
        _ sysID: String, from tableName: String, caller: Caller, action: String? = nil, options: WriteOptions = .init()
    ) async throws {
        let urlTable = try table(tableName)
        let concrete = try await concreteTable(of: sysID, in: urlTable, caller: caller)
        let now = GlideDateTime.format(Date())
        let rules = try await businessRules.rules(for: .delete, on: concrete, storage: storage)
        let action = action ?? options.action
        // The row is locked by the transaction's read of it (below), not by a statement of its own.
        let events = try await writeEvents(scope: writeScope(of: concrete)) { db -> [ChangeEvent] in
            if let claim = options.idempotency { try await IdempotencyRecords.claim(claim, table: concrete.name, sysID: sysID, db: db) }
            var cascaded: [(sysID: String, row: [String: String])] = []
            // The event carries the whole deleted row, so that followers know what left. Locked as it is read, before
            // anything is decided from it: a write of the record under way ends first, and this one reads its result.
            let deleted = try await self.select(
                concrete, query: EncodedQuery(), fields: nil, sysID: sysID, limit: 1, offset: 0, count: false,
                caller: .system, locking: true, db: db
            ).records.first?.values ?? [:]
            // Removed by a write that came first: nothing to delete, nothing to tell.
            guard !deleted.isEmpty else { throw EngineError.notFound(table: concrete.name, sysID: sysID) }
            try await self.checkAccess(.delete, on: concrete, sysID: sysID, fields: [], caller: caller, db: db)
            if SchemaAdministration.tables.contains(concrete.name) {
                throw EngineError.badRequest(
                    "Operation Failed", detail: "Tables and fields cannot be deleted through the API; set active=false instead"
                )
            }
            if let expected = options.expectedModCount {
                // Checked in the deleting transaction: an edit that came first is not deleted unseen.
                if Int(deleted["sys_mod_count"] ?? "") != expected {
                    let visible = try await self.select(
                        concrete, query: EncodedQuery(), fields: nil, sysID: sysID, limit: 1, offset: 0, count: false,
                        caller: caller, db: db
                    ).records.first?.values ?? [:]
                    throw EngineError.conflict(table: concrete.name, sysID: sysID, expected: expected, current: visible)
                }
            }
            var unchanged = deleted
            var none = Set<String>()
            let run = try self.workflowRun(
                on: concrete, operation: .delete, current: deleted, values: &unchanged, changed: &none, requested: action,
                caller: caller
            )
            _ = try await self.applyBusinessRules(.delete, on: concrete, sysID: sysID, values: &unchanged, rules: rules, db: db)
            try await db.run("DELETE FROM " + .identifier(concrete.physicalTable) + " WHERE sys_id = " + .bind(sysID))
            try await db.run("DELETE FROM sys_journal_field WHERE element_id = " + .bind(sysID))
            if concrete.name == "sys_user" {
                try await db.run("DELETE FROM oauth_credential WHERE " + .identifier("user") + " = " + .bind(sysID))
                // A deleted user's API keys and client certificates go with them (a user restored under the same
                // sys_id does not get them back).
                for credentials in RegisteredCredentials.boundFields.keys.sorted() {
                    try await db.run("DELETE FROM " + .identifier(credentials) + " WHERE " + .identifier("user") + " = " + .bind(sysID))
                }
                try await db.run("DELETE FROM docket_session WHERE user_id = " + .bind(sysID))
                try await OpenIDGrants.endSessions(ofUser: sysID, db)
            }
            // Attachment content goes with its metadata, and a record's attachments go with the record.
            if concrete.name == "sys_attachment" {
                try await db.run("DELETE FROM docket_attachment_chunk WHERE sys_id = " + .bind(sysID))
            } else if let attachmentTable = self.catalog.table("sys_attachment") {
                // Each attachment that goes with the record is a deletion of its own in the log.
                cascaded = try await self.select(
                    attachmentTable, query: EncodedQuery().and("table_sys_id", .equals, sysID), fields: nil,
                    limit: Int.max, offset: 0, count: false, caller: .system, db: db
                ).records.map { ($0.sysID, $0.values) }
                for chunk in cascaded.map(\.sysID).chunked(500) {
                    try await db.run("DELETE FROM docket_attachment_chunk WHERE sys_id IN (" + .bindList(chunk) + ")")
                    try await db.run("DELETE FROM sys_attachment WHERE sys_id IN (" + .bindList(chunk) + ")")
                }
            }
            var events: [ChangeEvent] = []
            if let attachmentTable = self.catalog.table("sys_attachment") {
                for attachment in cascaded {
                    events.append(try await self.appendEvent(
                        table: attachmentTable, sysID: attachment.sysID, operation: .delete, fields: [], values: [:],
                        previous: attachment.row, caller: caller, now: now, db: db
                    ))
                }
            }
            events.append(try await self.appendEvent(
                table: concrete, sysID: sysID, operation: .delete, fields: [], values: [:], previous: deleted,
                caller: caller, now: now, db: db
            ))
            if let run, let history = try await self.recordHistory(
                run, of: events[events.count - 1], table: concrete, caller: caller, time: now, now: now, db: db
            ) {
                events.append(history)
            }
            return events
        }
        if SchemaCatalog.sourceTables.contains(concrete.name) { await reloadCatalogAfterCommit() }
        for event in events { notify(event) }
    }

    // MARK: Steps

    /// What a write of `table` must have to itself where several processes write (``WriteScope``): the rows it
    /// changes, locked before it reads them, so that writes of one record follow each other and writes of
    /// different records run in parallel. Writes that decide from many rows at once stay exclusive: the schema
    /// (tables, fields, choices, numbering, state models), users and the credentials bound to them.
    func writeScope(of table: SchemaCatalog.Table) -> WriteScope {
        let exclusive = SchemaCatalog.sourceTables.contains(table.name) || SchemaAdministration.tables.contains(table.name)
            || table.root == "sys_user" || RegisteredCredentials.boundFields[table.name] != nil
        return exclusive ? .exclusive : .rows
    }

    func prepare(
        _ input: [String: String], for table: SchemaCatalog.Table, isInsert: Bool, options: WriteOptions, caller: Caller
    ) async throws -> PreparedWrite {
        var prepared = PreparedWrite()
        for (name, raw) in input.sorted(by: { $0.key < $1.key }) {
            if name == "sys_id" {
                if isInsert, !raw.isEmpty {
                    guard SysID.isValid(raw) else { throw EngineError.badRequest("Invalid sys_id '\(raw.prefix(40))'") }
                    prepared.sysID = raw
                }
                continue
            }
            guard let field = table.field(name) ?? Self.alias(name, in: table) else { continue }
            let name = field.name
            // What binds a credential to its user is docketd's own to write (`docketd users api-key` and
            // `certificate`), never a client's, an administrator's included.
            if RegisteredCredentials.boundFields[table.name]?.contains(name) == true, caller.userID != Caller.system.userID {
                throw EngineError.badRequest(
                    "Operation Failed", detail: "\(name) of \(table.name) is set by docketd's command line only", field: name
                )
            }
            if SystemFields.names.contains(name) {
                if options.suppressAutoSysFields, name != "sys_class_name" {
                    prepared.systemValues[name] = try FieldCoercion.normalize(raw, for: field)
                }
                continue
            }
            switch field.type {
            case .journal:
                if field.readOnly { continue }
                let text = raw.trimmingCharacters(in: .whitespacesAndNewlines)
                if !text.isEmpty { prepared.journals.append((name, raw)) }
            case .password:
                // A client that writes back what it read sends the mask: that is not a new password.
                if !raw.isEmpty, raw != FieldCoercion.passwordMask { prepared.values[name] = await hash(raw) }
            default:
                var value = raw
                if options.inputDisplayValue {
                    value = catalog.choiceValue(forLabel: raw, field: field.name, in: table) ?? raw
                    // Dates given as display values are the caller's local time.
                    if field.type == .glideDateTime, let zone = options.timeZone,
                        let date = GlideDateTime.parse(raw, in: zone)
                    {
                        value = GlideDateTime.format(date)
                    }
                }
                // A record may name itself (an enterprise is its own domain): it exists once this write commits.
                let naming = isInsert && !value.isEmpty && value == input["sys_id"]
                    && table.ancestry.contains(field.reference ?? "")
                if field.type == .reference, !naming {
                    do {
                        value = try await referenceValue(value, field: field, caller: caller)
                    } catch let error as EngineError where !isInsert && error.field == field.name && SysID.isValid(value) {
                        prepared.dangling[name] = error
                    }
                }
                do {
                    prepared.values[name] = try FieldCoercion.normalize(value, for: field)
                } catch {
                    throw choiceProblem(error, value: value, field: field, in: table)
                }
            }
        }
        return prepared
    }

    /// Other names a field is written under: `sys_user.password` for `user_password` (what docketd called it
    /// before, and what some scripts send).
    static func alias(_ name: String, in table: SchemaCatalog.Table) -> FieldDefinition? {
        name == "password" ? table.field("user_password") : nil
    }

    /// A value refused for a field with a choice list names the choices (their labels are accepted with
    /// `sysparm_input_display_value=true`).
    private func choiceProblem(_ error: EngineError, value: String, field: FieldDefinition, in table: SchemaCatalog.Table)
        -> EngineError
    {
        guard let choices = catalog.choices(for: field.name, in: table), !choices.isEmpty else { return error }
        let list = choices.prefix(20).map { "\($0.label) (\($0.value))" }.joined(separator: ", ")
        return EngineError.badRequest(
            error.message, detail: "'\(value.prefix(80))' is not one of the \(field.label) values of \(table.name): \(list)",
            field: field.name
        )
    }

    /// Throws unless a rule lets the caller `operation` this record, changing only `fields`. `verdict`: the rules'
    /// verdict (``accessVerdict(_:on:sysID:fields:caller:dialect:)``) when the caller worked it out already.
    func checkAccess(
        _ operation: AccessOperation, on table: SchemaCatalog.Table, sysID: String, fields: Set<String>,
        caller: Caller, db: SQLExecutor, verdict: AccessVerdict? = nil
    ) async throws {
        if caller.isAdmin { return }
        // Traced as `access.check`; a refusal is an answer, not a failure of the span.
        let allowed = try await Traces.span("access.check") { span in
            span?.attributes["docket.access.operation"] = operation.rawValue
            span?.attributes["docket.table"] = table.name
            let allowed: Bool
            switch try verdict ?? self.accessVerdict(
                operation, on: table, sysID: sysID, fields: fields, caller: caller, dialect: db.dialect
            ) {
            case .allowed: allowed = true
            case .refused: allowed = false
            case .query(let query): allowed = try await db.integer(query) != 0
            }
            span?.attributes["docket.access.allowed"] = allowed
            return allowed
        }
        guard allowed else {
            // A record that another write removed (committed, or ahead of this one in the same transaction) is not
            // found, not refused.
            if operation != .create, try await db.integer(
                "SELECT COUNT(*) FROM " + .identifier(table.physicalTable) + " WHERE sys_id = " + .bind(sysID)
            ) == 0 {
                throw EngineError.notFound(table: table.name, sysID: sysID)
            }
            throw EngineError.forbidden(operation)
        }
    }

    /// What the rules say about the caller doing `operation` to a record, changing only `fields`: allowed or refused
    /// whatever the record holds, or as a count of the record among those the rules' conditions let through.
    enum AccessVerdict: Sendable {
        case allowed
        case refused
        case query(SQLFragment)
    }

    /// The rules' verdict on a caller who is not an administrator (``AccessVerdict``); runs no statement.
    func accessVerdict(
        _ operation: AccessOperation, on table: SchemaCatalog.Table, sysID: String, fields: Set<String>,
        caller: Caller, dialect: StorageDialect
    ) throws -> AccessVerdict {
        let rules = policy.rules(for: operation, on: table, caller: caller).filter { rule in
            rule.writableFields.map { fields.isSubset(of: $0) } ?? true
        }
        guard !rules.isEmpty else { return .refused }
        var compiler = QueryCompiler(
            catalog: catalog, policy: AccessPolicy(rules: rules), dialect: dialect, caller: caller, table: table,
            parentPolicy: policy
        )
        guard let filter = try compiler.accessFilter(operation) else { return .allowed }
        return .query(
            "SELECT COUNT(*) FROM " + compiler.from + " WHERE " + compiler.column("sys_id") + " = " + .bind(sysID)
                + " AND " + filter
        )
    }

    func appendJournals(
        _ entries: [(field: String, text: String)], to sysID: String, table: SchemaCatalog.Table, caller: Caller,
        now: String, db: SQLExecutor
    ) async throws {
        for values in Self.journalRows(entries, to: sysID, table: table, caller: caller, now: now) {
            try await db.run(
                "INSERT INTO sys_journal_field (" + values.map { SQLFragment.identifier($0.0) }.joined(", ")
                    + ") VALUES (" + values.map(\.1.fragment).joined(", ") + ")"
            )
        }
    }

    /// The journal entries of a write as statements of the `WITH` of the statement that writes the record's row
    /// (PostgreSQL: ``StorageDialect/insertAppendingEvent(_:returnsRows:event:also:)``): each inserts its entry once for
    /// each row the statement's write (`written`) wrote, so nothing when it wrote none.
    static func journalInserts(
        _ entries: [(field: String, text: String)], to sysID: String, table: SchemaCatalog.Table, caller: Caller,
        now: String, from written: StorageDialect.WrittenRows
    ) -> [SQLFragment] {
        journalRows(entries, to: sysID, table: table, caller: caller, now: now).map { values in
            "INSERT INTO sys_journal_field (" + values.map { SQLFragment.identifier($0.0) }.joined(", ") + ") SELECT "
                + values.map(\.1.fragment).joined(", ") + " FROM " + written.fragment
        }
    }

    /// The columns and values of each journal entry a write adds.
    private static func journalRows(
        _ entries: [(field: String, text: String)], to sysID: String, table: SchemaCatalog.Table, caller: Caller, now: String
    ) -> [[(String, SQLValue)]] {
        entries.map { entry in
            [
                ("sys_id", .text(SysID.generate())), ("element_id", .text(sysID)), ("element", .text(entry.field)),
                ("name", .text(table.name)), ("value", .text(entry.text)), ("sys_created_on", .text(now)),
                ("sys_created_by", .text(caller.userName)), ("sys_updated_on", .text(now)),
                ("sys_updated_by", .text(caller.userName)), ("sys_mod_count", .integer(0)),
            ]
        }
    }
}

/// A number counter that could not be read back right after it was created (a storage fault).
struct NumberCounterMissing: Error {
    let table: String
}
