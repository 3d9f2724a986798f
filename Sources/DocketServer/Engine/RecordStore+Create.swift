import DocketModel
import Foundation

/// Creating a record: its transaction, and the domain a new record belongs to.
extension RecordStore {
    /// Creates a record; returns its sys_id. `within` runs in the same transaction after the row is written
    /// (attachment content is stored this way). `answer`: the row as committed, for the write's answer: taken from
    /// the insert itself where its plan allows (``CommittedRow/Plan/returning``) and nothing may change the row
    /// after it (no `within`), else read in the transaction after everything else.
    @discardableResult
    func insert(
        into tableName: String, values input: [String: String], caller: Caller, options: WriteOptions = .init(),
        answer: CommittedRow.Answer? = nil, within: (@Sendable (SQLExecutor, String) async throws -> Void)? = nil
    ) async throws -> String {
        let table = try table(tableName)
        if !caller.isAdmin, policy.rules(for: .create, on: table, caller: caller).isEmpty {
            throw EngineError.forbidden(.create)
        }
        let prepared = try await prepare(input, for: table, isInsert: true, options: options.allowed(for: caller), caller: caller)
        let now = GlideDateTime.format(Date())
        let rules = try await businessRules.rules(for: .create, on: table, storage: storage)
        try await ensureNumberSequence(for: table)
        let scope = options.exclusive ? .exclusive : writeScope(of: table)
        let events: [ChangeEvent]
        do {
            events = try await createEvents(
                table: table, prepared: prepared, caller: caller, options: options, answer: answer, within: within,
                rules: rules, now: now, scope: scope
            )
        } catch let unanswered as CommittedWithoutAnswer {
            // Committed: answered as done, with the row read afresh (the answer's row stays unread). Its event is
            // in the log, and this process publishes it from there (every request catches up before its answer).
            logger.error(
                "A create committed, and its answer lacked what the write reads; its row is read again",
                metadata: ["table": "\(unanswered.table)", "sys_id": "\(unanswered.sysID)", "error": "\(unanswered.cause)"]
            )
            if SchemaCatalog.sourceTables.contains(table.name) { await reloadCatalogAfterCommit() }
            do { try await catchUp() } catch { logger.warning("Catching up after a create failed", metadata: ["error": "\(error)"]) }
            return unanswered.sysID
        }
        if SchemaCatalog.sourceTables.contains(table.name) { await reloadCatalogAfterCommit() }
        for event in events { notify(event) }
        return events[0].sysID
    }

    /// The transaction of ``insert(into:values:caller:options:answer:within:)``: its events, once committed.
    private func createEvents(
        table: SchemaCatalog.Table, prepared: PreparedWrite, caller: Caller, options: WriteOptions,
        answer: CommittedRow.Answer?, within: (@Sendable (SQLExecutor, String) async throws -> Void)?,
        rules: [BusinessRules.Rule], now: String, scope: WriteScope
    ) async throws -> [ChangeEvent] {
        try await writeEvents(scope: scope) { db -> [ChangeEvent] in
            let sysID = prepared.sysID ?? SysID.generate()
            // First: a request repeated with its key is answered as the first was, never "already exists".
            if let claim = options.idempotency { try await IdempotencyRecords.claim(claim, table: table.name, sysID: sysID, db: db) }
            if prepared.sysID != nil,
                try await db.integer(
                    "SELECT COUNT(*) FROM " + .identifier(table.physicalTable) + " WHERE sys_id = " + .bind(sysID)
                ) > 0
            {
                throw EngineError.badRequest("Operation Failed", detail: "A record with sys_id \(sysID) already exists")
            }
            var values: [String: String] = [:]
            for field in table.fields where field.type.isStored {
                guard let value = field.defaultValue, !value.isEmpty else { continue }
                let resolved = DynamicValue(value)?.resolve(userID: caller.userID, userName: caller.userName, now: Date())
                values[field.name] = resolved ?? value
            }
            values.merge(prepared.values) { _, new in new }
            try await self.applyStandardChangeTemplate(
                on: table, values: &values, given: Set(prepared.values.filter { !$0.value.isEmpty }.keys), db: db
            )
            try Self.assignDomain(&values, table: table, caller: caller)
            let given = Set(prepared.values.filter { !$0.value.isEmpty }.keys)
            var changed = given
            // Imports (admins keeping sys_ fields as given) write read-only fields too.
            let written = options.allowed(for: caller).suppressAutoSysFields ? [] : given
            let run = try self.workflowRun(
                on: table, operation: .create, current: [:], values: &values, changed: &changed,
                requested: options.action, caller: caller
            )
            // Business rules run before the fields that follow from others (priority, active) are worked out.
            let ruled = try await self.applyBusinessRules(.create, on: table, sysID: sysID, values: &values, rules: rules, db: db)
            _ = Workflow.apply(
                to: &values, changed: Set(prepared.values.keys).union(ruled), isInsert: true, table: table,
                model: self.catalog.stateModel(for: table), caller: caller, now: now
            )
            try self.checkFields(of: table, run: run, values: values, written: written, isInsert: true)
            values["sys_id"] = sysID
            values["sys_created_on"] = now
            values["sys_created_by"] = caller.userName
            values["sys_updated_on"] = now
            values["sys_updated_by"] = caller.userName
            values["sys_mod_count"] = "0"
            if table.isInHierarchy { values["sys_class_name"] = table.name }
            if options.allowed(for: caller).suppressAutoSysFields {
                values.merge(prepared.systemValues) { _, given in given }
            }
            // The row is taken from the insert only when nothing below changes it: not for the schema's own tables
            // (SchemaAdministration changes them again), not with a `within`, and only for the plan's own table.
            let fromInsert = within == nil && !SchemaAdministration.tables.contains(table.name)
                && answer?.plan.row.select.table === table
            // The event is appended by the insert itself where the storage can (one round trip fewer), when nothing
            // below changes the row (as for `fromInsert`, whatever the answer's plan).
            let foldsEvent = within == nil && !SchemaAdministration.tables.contains(table.name)
            // Create rules with conditions are judged on the row as it would be committed (below); worked out here,
            // so that the insert knows whether anything may follow it.
            let verdict = caller.isAdmin ? AccessVerdict.allowed : try self.accessVerdict(
                .create, on: table, sysID: sysID, fields: Set(prepared.values.keys), caller: caller, dialect: db.dialect
            )
            var allowedAlready = false
            if case .allowed = verdict { allowedAlready = true }
            // Nothing below runs a statement or refuses the write: the insert may be the transaction's last statement
            // (and, when nothing ran before it, run on its own: ``SQLExecutor/lastRows(_:)``). What is left after it
            // reads the insert's own answer (its row, its number, its event's number), which lacks one only on a fault
            // of the driver or of this code; the write has then committed (``CommittedWithoutAnswer``), is answered as
            // done, and its event is delivered from the log (its number was never counted as this process's own).
            // Journal entries are added by the insert's statement where it appends the event (PostgreSQL).
            let endsWrite = foldsEvent && allowedAlready && (prepared.journals.isEmpty || db.dialect.writeAppendsEvent)
                && run == nil && (answer == nil || fromInsert)
            let (stored, folded) = try await self.insertRow(
                into: table, values: &values, db: db, answer: fromInsert ? answer : nil,
                event: foldsEvent ? InsertEvent(journals: prepared.journals, caller: caller, now: now) : nil,
                endsWrite: endsWrite
            )
            // A refusal rolls the insert back (an attachment is only created on a record the caller may change).
            try await self.checkAccess(
                .create, on: table, sysID: sysID, fields: Set(prepared.values.keys), caller: caller, db: db,
                verdict: verdict
            )
            if folded == nil {
                try await self.appendJournals(prepared.journals, to: sysID, table: table, caller: caller, now: now, db: db)
            }
            if SchemaAdministration.tables.contains(table.name) {
                try await SchemaAdministration.apply(inserted: values, into: table.name, catalog: self.catalog, db: db)
            }
            try await within?(db, sysID)
            if let answer { try await answer.row.read(sysID, plan: answer.plan, db: db) }
            var events: [ChangeEvent]
            if let folded {
                events = [folded]
            } else {
                var after = values.filter { table.field($0.key)?.type.isStored == true }
                for entry in prepared.journals { after[entry.field] = entry.text }
                events = [try await self.appendEvent(
                    table: table, sysID: sysID, operation: .insert,
                    fields: stored.map(\.name) + prepared.journals.map(\.field), values: after, previous: [:],
                    caller: caller, now: now, db: db
                )]
            }
            if let run, let history = try await self.recordHistory(
                run, of: events[0], table: table, caller: caller, time: values["sys_updated_on"] ?? now, now: now, db: db
            ) {
                events.append(history)
            }
            return events
        }
    }

    /// A new record of a scoped table (one with a `sys_domain` field) belongs to the caller's active enterprise,
    /// or to the caller's only one; a caller with several and none active must say which (and may only name one of
    /// theirs: the create access check sees to that).
    static func assignDomain(_ values: inout [String: String], table: SchemaCatalog.Table, caller: Caller) throws {
        guard table.field("sys_domain") != nil, values["sys_domain", default: ""].isEmpty else { return }
        if let domain = caller.activeDomain ?? (caller.domains.count == 1 ? caller.domains.first : nil) {
            values["sys_domain"] = domain
            return
        }
        throw EngineError.badRequest(
            "Operation Failed", detail: "Choose a context: a \(table.label) belongs to an enterprise (sys_domain)", field: "sys_domain"
        )
    }
}
