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

    /// Changes a record (only the given fields); returns the sys_id. Journal fields add entries. `within` runs in
    /// the same transaction after the row is written (to read back what is committed), also when nothing changed.
    /// `answer`: the row as committed, for the write's answer: taken from the update itself where its plan allows
    /// (``CommittedRow/Plan/returning``) and nothing may change the row after it (no `within`), else read in the
    /// transaction after everything else (also when nothing changed).
    ///
    /// On PostgreSQL the transaction's first read of the row locks it (``SelectPlan/run(sysID:limit:offset:count:locking:db:)``),
    /// so writes of one record follow each other, and the row's update appends its event in the same statement
    /// (``StorageDialect/updateAppendingEvent(_:returnsRows:event:)``): `BEGIN`, the locking read, the update and
    /// `COMMIT`, with a comment's journal entry as one statement more.
    @discardableResult
    func update(
        _ sysID: String, in tableName: String, values input: [String: String], caller: Caller,
        options: WriteOptions = .init(), answer: CommittedRow.Answer? = nil,
        within: (@Sendable (SQLExecutor, String) async throws -> Void)? = nil
    ) async throws -> String {
        let urlTable = try table(tableName)
        let now = GlideDateTime.format(Date())
        let (concrete, prepared) = try await concreteInput(input, of: sysID, in: urlTable, options: options, caller: caller)
        if !caller.isAdmin, concrete.field("sys_domain") != nil, prepared.values["sys_domain"] != nil {
            throw EngineError.badRequest(
                "Operation Failed", detail: "The enterprise of a record (sys_domain) cannot be changed", field: "sys_domain"
            )
        }
        let rules = try await businessRules.rules(for: .write, on: concrete, storage: storage)
        // The row is locked by the transaction's read of it (below), not by a statement of its own.
        let events = try await writeEvents(scope: writeScope(of: concrete)) { db -> [ChangeEvent] in
            // A run before this one that lost a race was rolled back: what it took from its update never was.
            answer?.row.forget()
            // First: a request repeated with its key is answered as the first was, never a conflict with itself.
            if let claim = options.idempotency { try await IdempotencyRecords.claim(claim, table: concrete.name, sysID: sysID, db: db) }
            // Locked as it is read: another write of the record waits here until this one has ended, and this one reads
            // the row as the last of them committed it.
            let page = try await self.select(
                concrete, query: EncodedQuery(), fields: nil, sysID: sysID, limit: 1, offset: 0, count: false,
                caller: caller, locking: true, db: db
            )
            guard let current = page.records.first else { throw EngineError.notFound(table: concrete.name, sysID: sysID) }
            // Checked in the writing transaction, so no other write can come between the check and this one.
            if let expected = options.expectedModCount, Int(current["sys_mod_count"]) != expected {
                throw EngineError.conflict(table: concrete.name, sysID: sysID, expected: expected, current: current.values)
            }
            for (name, error) in prepared.dangling.sorted(by: { $0.key < $1.key }) where prepared.values[name] != current[name] {
                throw error
            }
            var values = current.values
            var changed = Set<String>()
            for (name, value) in prepared.values where values[name, default: ""] != value {
                values[name] = value
                changed.insert(name)
            }
            let written = options.allowed(for: caller).suppressAutoSysFields ? [] : changed
            let run = try self.workflowRun(
                on: concrete, operation: .write, current: current.values, values: &values, changed: &changed,
                requested: options.action, caller: caller
            )
            try await self.checkAccess(
                .write, on: concrete, sysID: sysID, fields: changed.union(prepared.journals.map(\.field)),
                caller: caller, db: db
            )
            if changed.isEmpty && prepared.journals.isEmpty {
                // Nothing to write: the read-back still reports what is committed (a run before this one, which
                // lost a race and was rolled back, may have read back a row that never was).
                try await within?(db, sysID)
                if let answer { try await answer.row.read(sysID, plan: answer.plan, db: db) }
                return []
            }
            if SchemaAdministration.tables.contains(concrete.name) {
                try SchemaAdministration.checkUpdate(of: concrete.name, changed: changed)
            }
            // Business rules run before the fields that follow from others (priority, active) are worked out.
            changed.formUnion(
                try await self.applyBusinessRules(.write, on: concrete, sysID: sysID, values: &values, rules: rules, db: db)
            )
            changed.formUnion(
                Workflow.apply(
                    to: &values, changed: changed, isInsert: false, table: concrete,
                    model: self.catalog.stateModel(for: concrete), caller: caller, now: now
                )
            )
            try self.checkFields(of: concrete, run: run, values: values, written: written, isInsert: false)
            var assignments: [SQLFragment] = changed.sorted().compactMap { name in
                guard let field = concrete.field(name) else { return nil }
                return .identifier(name) + " = " + FieldCoercion.sqlValue(values[name, default: ""], for: field).fragment
            }
            if options.allowed(for: caller).suppressAutoSysFields {
                for (name, value) in prepared.systemValues where name != "sys_id" {
                    assignments.append(.identifier(name) + " = " + .bind(value))
                    values[name] = value
                }
            } else {
                values["sys_updated_on"] = now
                values["sys_updated_by"] = caller.userName
                values["sys_mod_count"] = String((Int(current["sys_mod_count"]) ?? 0) &+ 1)
                assignments += [
                    "sys_updated_on = " + .bind(now), "sys_updated_by = " + .bind(caller.userName),
                    "sys_mod_count = sys_mod_count + 1",
                ]
            }
            var after = values
            for entry in prepared.journals { after[entry.field] = entry.text }
            let event = Self.event(
                table: concrete, sysID: sysID, operation: .update, fields: changed.sorted() + prepared.journals.map(\.field),
                values: after, previous: changed.reduce(into: [:]) { $0[$1] = current[$1] }, caller: caller, now: now
            )
            // The update appends the event itself where the storage can, and gives the answer's row where nothing
            // below changes it (no `within`) and the answer reads the record's own class.
            let folded = assignments.isEmpty ? nil : try await self.updateRow(
                sysID, of: concrete, assignments: assignments, event: event,
                answer: within == nil && answer?.plan.row.select.table === concrete ? answer : nil, db: db
            )
            try await self.appendJournals(prepared.journals, to: sysID, table: concrete, caller: caller, now: now, db: db)
            try await within?(db, sysID)
            if let answer { try await answer.row.read(sysID, plan: answer.plan, db: db) }
            if concrete.name == "sys_user", !changed.isDisjoint(with: UserDirectory.credentialFields) {
                // A new password, a lock or a deactivation ends every OAuth token and session of the user in the
                // same commit.
                try await db.run("DELETE FROM oauth_credential WHERE " + .identifier("user") + " = " + .bind(sysID))
                try await db.run("DELETE FROM docket_session WHERE user_id = " + .bind(sysID))
                try await OpenIDGrants.endSessions(ofUser: sysID, db)
            }
            var events: [ChangeEvent]
            if let folded { events = [folded] } else { events = [try await self.append(event, db: db)] }
            if let run, let history = try await self.recordHistory(
                run, of: events[events.count - 1], table: concrete, caller: caller, time: values["sys_updated_on"] ?? now, now: now, db: db
            ) {
                events.append(history)
            }
            return events
        }
        if let event = events.first {
            if SchemaCatalog.sourceTables.contains(event.table) { await reloadCatalogAfterCommit() }
            for event in events { notify(event) }
        }
        return sysID
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

    /// The concrete class of a record the caller may read through `table`; 404 otherwise.
    private func concreteTable(of sysID: String, in table: SchemaCatalog.Table, caller: Caller) async throws
        -> SchemaCatalog.Table
    {
        let (_, record) = try await get(sysID, in: table.name, fields: ["sys_id"], caller: caller)
        return catalog.table(record.table) ?? table
    }

    /// The class an update of `sysID` through `table` writes, and its input validated for that class (PATCH
    /// /table/task/<incident> may set incident fields). A table that nothing extends is its records' class: the
    /// record is not read first (the write's own read finds it, or answers 404), unless the input is refused, which
    /// a record that is not there (or not visible to the caller) answers with 404 first, as for other tables.
    private func concreteInput(
        _ input: [String: String], of sysID: String, in table: SchemaCatalog.Table, options: WriteOptions, caller: Caller
    ) async throws -> (SchemaCatalog.Table, PreparedWrite) {
        let allowed = options.allowed(for: caller)
        guard table.descendants == [table.name] else {
            let concrete = try await concreteTable(of: sysID, in: table, caller: caller)
            return (concrete, try await prepare(input, for: concrete, isInsert: false, options: allowed, caller: caller))
        }
        do {
            return (table, try await prepare(input, for: table, isInsert: false, options: allowed, caller: caller))
        } catch {
            _ = try await concreteTable(of: sysID, in: table, caller: caller)
            throw error
        }
    }

    /// Runs an update's `UPDATE` of one record's row (locked by the transaction already). Where the storage can, the
    /// statement also appends `event` (the change, not yet numbered) and returns it numbered; with `answer`, whose
    /// plan reads the row's own class, it also fills the answer's row from the update (`RETURNING`). Returns nil where
    /// the caller is to append the event.
    private func updateRow(
        _ sysID: String, of table: SchemaCatalog.Table, assignments: [SQLFragment], event: ChangeEvent,
        answer: CommittedRow.Answer?, db: SQLExecutor
    ) async throws -> ChangeEvent? {
        let returning = db.dialect.insertAppendsEvent ? answer?.plan.returning : nil
        let update: SQLFragment = "UPDATE " + .identifier(table.physicalTable)
            + (returning.map { " AS " + .identifier($0.alias) } ?? "") + " SET " + assignments.joined(", ")
            + " WHERE sys_id = " + .bind(sysID) + (returning.map { " RETURNING " + $0.columns } ?? "")
        guard let statement = db.dialect.updateAppendingEvent(
            update, returnsRows: returning != nil, event: Self.eventValues(of: event, after: .bind(Self.json(event.values)))
        ) else {
            try await db.run(update)
            return nil
        }
        let rows = try await db.rows(statement)
        // The row is locked by this transaction: the update found it, and appended the event once.
        guard let sequence = try rows.first?.value(at: "docket_event_seq", kind: .integer).intValue else {
            throw EventNotAppended(table: table.name)
        }
        if returning != nil, let answer { try answer.row.fill(rows, plan: answer.plan, sysID: sysID) }
        var numbered = event
        numbered.sequence = sequence
        drew(sequence)
        return numbered
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
        for entry in entries {
            let values: [(String, SQLValue)] = [
                ("sys_id", .text(SysID.generate())), ("element_id", .text(sysID)), ("element", .text(entry.field)),
                ("name", .text(table.name)), ("value", .text(entry.text)), ("sys_created_on", .text(now)),
                ("sys_created_by", .text(caller.userName)), ("sys_updated_on", .text(now)),
                ("sys_updated_by", .text(caller.userName)), ("sys_mod_count", .integer(0)),
            ]
            try await db.run(
                "INSERT INTO sys_journal_field (" + values.map { SQLFragment.identifier($0.0) }.joined(", ")
                    + ") VALUES (" + values.map(\.1.fragment).joined(", ") + ")"
            )
        }
    }
}

/// A number counter that could not be read back right after it was created (a storage fault).
struct NumberCounterMissing: Error {
    let table: String
}
