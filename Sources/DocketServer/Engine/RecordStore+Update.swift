import DocketModel
import Foundation

/// Changing a record: what an update makes of the row, and the two ways it is written on PostgreSQL.
extension RecordStore {
    /// Changes a record (only the given fields); returns the sys_id. Journal fields add entries. `within` runs in
    /// the same transaction after the row is written (to read back what is committed), also when nothing changed.
    /// `answer`: the row as committed, for the write's answer: taken from the update itself where its plan allows
    /// (``CommittedRow/Plan/returning``) and nothing may change the row after it (no `within`), else read in the
    /// transaction after everything else (also when nothing changed).
    ///
    /// On PostgreSQL an update that one statement can write (no idempotency key, no action's history, no `within`)
    /// runs without a transaction of its own: the row and its version are read, and one statement updates the row only
    /// if it is still that version, adds the journal entries, appends the event and gives the answer
    /// (``updateUnlocked(_:answer:within:)``): two round trips. Any other update, or one whose row changed between
    /// the two, runs in a transaction whose first read of the row locks it (``updateLocked(_:answer:within:)``).
    /// Either way writes of one record follow each other, each from the version the one before it committed.
    @discardableResult
    func update(
        _ sysID: String, in tableName: String, values input: [String: String], caller: Caller,
        options: WriteOptions = .init(), answer: CommittedRow.Answer? = nil,
        within: (@Sendable (SQLExecutor, String) async throws -> Void)? = nil
    ) async throws -> String {
        let urlTable = try table(tableName)
        let (concrete, prepared) = try await concreteInput(input, of: sysID, in: urlTable, options: options, caller: caller)
        let write = UpdateWrite(
            sysID: sysID, table: concrete, prepared: prepared, options: options, caller: caller,
            rules: try await businessRules.rules(for: .write, on: concrete, storage: storage), now: GlideDateTime.format(Date())
        )
        let events: [ChangeEvent]
        do {
            if let written = try await updateUnlocked(write, answer: answer, within: within) {
                events = written
            } else {
                events = try await updateLocked(write, answer: answer, within: within)
            }
        } catch let unanswered as CommittedWithoutAnswer {
            // Committed: answered as done, with the row read afresh. Its event is in the log, and this process
            // publishes it from there (every request catches up before its answer).
            logger.error(
                "An update committed, and its answer lacked what the write reads; its row is read again",
                metadata: ["table": "\(unanswered.table)", "sys_id": "\(unanswered.sysID)", "error": "\(unanswered.cause)"]
            )
            answer?.row.forget()
            do { try await catchUp() } catch { logger.warning("Catching up after an update failed", metadata: ["error": "\(error)"]) }
            return sysID
        }
        if let event = events.first {
            if SchemaCatalog.sourceTables.contains(event.table) { await reloadCatalogAfterCommit() }
            for event in events { notify(event) }
        }
        return sysID
    }

    /// What an update is asked to do, validated (``update(_:in:values:caller:options:answer:within:)``).
    struct UpdateWrite: Sendable {
        let sysID: String
        /// The record's class.
        let table: SchemaCatalog.Table
        let prepared: PreparedWrite
        let options: WriteOptions
        let caller: Caller
        let rules: [BusinessRules.Rule]
        /// The update's time (`sys_updated_on`, its journal entries' and its event's).
        var now: String
    }

    /// What an update makes of the row as it is (``planUpdate(_:current:db:)``).
    struct PlannedUpdate: Sendable {
        var values: [String: String]
        var changed: Set<String>
        /// `SET` assignments of the row's `UPDATE`: none only for an import keeping system fields that changes no field.
        var assignments: [SQLFragment]
        /// The change, not yet numbered.
        var event: ChangeEvent
        var run: ActionRun?
    }

    /// Works out the update from the row as it is (`current`, as the caller reads it): the version the caller expects,
    /// the action it runs, the caller's access, business rules and the fields that follow from others. Nil when it
    /// changes nothing and adds no journal entry. Runs only reads (access conditions, rule conditions).
    private func planUpdate(_ write: UpdateWrite, current: [String: String], db: SQLExecutor) async throws -> PlannedUpdate? {
        let (concrete, prepared, options, caller, sysID, now) = (write.table, write.prepared, write.options, write.caller, write.sysID, write.now)
        if let expected = options.expectedModCount, Int(current["sys_mod_count", default: ""]) != expected {
            throw EngineError.conflict(table: concrete.name, sysID: sysID, expected: expected, current: current)
        }
        for (name, error) in prepared.dangling.sorted(by: { $0.key < $1.key }) where prepared.values[name] != current[name] {
            throw error
        }
        var values = current
        var changed = Set<String>()
        for (name, value) in prepared.values where values[name, default: ""] != value {
            values[name] = value
            changed.insert(name)
        }
        let written = options.allowed(for: caller).suppressAutoSysFields ? [] : changed
        let run = try workflowRun(
            on: concrete, operation: .write, current: current, values: &values, changed: &changed,
            requested: options.action, caller: caller
        )
        try await checkAccess(
            .write, on: concrete, sysID: sysID, fields: changed.union(prepared.journals.map(\.field)), caller: caller, db: db
        )
        if changed.isEmpty && prepared.journals.isEmpty { return nil }
        if SchemaAdministration.tables.contains(concrete.name) {
            try SchemaAdministration.checkUpdate(of: concrete.name, changed: changed)
        }
        // Business rules run before the fields that follow from others (priority, active) are worked out.
        changed.formUnion(try await applyBusinessRules(.write, on: concrete, sysID: sysID, values: &values, rules: write.rules, db: db))
        changed.formUnion(
            Workflow.apply(
                to: &values, changed: changed, isInsert: false, table: concrete, model: catalog.stateModel(for: concrete),
                caller: caller, now: now
            )
        )
        try checkFields(of: concrete, run: run, values: values, written: written, isInsert: false)
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
            values["sys_mod_count"] = String((Int(current["sys_mod_count", default: ""]) ?? 0) &+ 1)
            assignments += [
                "sys_updated_on = " + .bind(now), "sys_updated_by = " + .bind(caller.userName),
                "sys_mod_count = sys_mod_count + 1",
            ]
        }
        var after = values
        for entry in prepared.journals { after[entry.field] = entry.text }
        let event = Self.event(
            table: concrete, sysID: sysID, operation: .update, fields: changed.sorted() + prepared.journals.map(\.field),
            values: after, previous: changed.reduce(into: [:]) { $0[$1] = current[$1, default: ""] }, caller: caller, now: now
        )
        return PlannedUpdate(values: values, changed: changed, assignments: assignments, event: event, run: run)
    }

    /// The update in a transaction whose first read of the row locks it (`FOR UPDATE OF` on PostgreSQL): another
    /// write of the record waits until this one has ended, and this one works from the row as the last of them
    /// committed it. The row's `UPDATE` appends the event where the storage can.
    private func updateLocked(
        _ write: UpdateWrite, answer: CommittedRow.Answer?, within: (@Sendable (SQLExecutor, String) async throws -> Void)?
    ) async throws -> [ChangeEvent] {
        // Its own time: after an unlocked update whose row another write changed first, later than that write's.
        var timed = write
        timed.now = GlideDateTime.format(Date())
        let write = timed
        let (concrete, prepared, options, caller, sysID, now) = (write.table, write.prepared, write.options, write.caller, write.sysID, write.now)
        // The row is locked by the transaction's read of it (below), not by a statement of its own.
        return try await writeEvents(scope: writeScope(of: concrete)) { db -> [ChangeEvent] in
            // A run before this one that lost a race was rolled back: what it took from its update never was.
            answer?.row.forget()
            // First: a request repeated with its key is answered as the first was, never a conflict with itself.
            if let claim = options.idempotency { try await IdempotencyRecords.claim(claim, table: concrete.name, sysID: sysID, db: db) }
            let page = try await self.select(
                concrete, query: EncodedQuery(), fields: nil, sysID: sysID, limit: 1, offset: 0, count: false,
                caller: caller, locking: true, db: db
            )
            guard let current = page.records.first else { throw EngineError.notFound(table: concrete.name, sysID: sysID) }
            guard let plan = try await self.planUpdate(write, current: current.values, db: db) else {
                // Nothing to write: the read-back still reports what is committed (a run before this one, which
                // lost a race and was rolled back, may have read back a row that never was).
                try await within?(db, sysID)
                if let answer { try await answer.row.read(sysID, plan: answer.plan, db: db) }
                return []
            }
            // The answer's row from the update where nothing below changes it (no `within`) and it can.
            let folded = plan.assignments.isEmpty ? nil : try await self.updateRow(
                write, assignments: plan.assignments, event: plan.event,
                answer: within == nil && Self.answersFromUpdate(answer, of: concrete) ? answer : nil, db: db
            )
            // Journal entries: in the update's own statement when it appended the event.
            if folded == nil {
                try await self.appendJournals(prepared.journals, to: sysID, table: concrete, caller: caller, now: now, db: db)
            }
            try await within?(db, sysID)
            if let answer { try await answer.row.read(sysID, plan: answer.plan, db: db) }
            if concrete.name == "sys_user", !plan.changed.isDisjoint(with: UserDirectory.credentialFields) {
                // A new password, a lock or a deactivation ends every OAuth token and session of the user in the
                // same commit.
                try await db.run("DELETE FROM oauth_credential WHERE " + .identifier("user") + " = " + .bind(sysID))
                try await db.run("DELETE FROM docket_session WHERE user_id = " + .bind(sysID))
                try await OpenIDGrants.endSessions(ofUser: sysID, db)
            }
            var events: [ChangeEvent]
            if let folded { events = [folded] } else { events = [try await self.append(plan.event, db: db)] }
            if let run = plan.run, let history = try await self.recordHistory(
                run, of: events[0], table: concrete, caller: caller, time: plan.values["sys_updated_on"] ?? now, now: now, db: db
            ) {
                events.append(history)
            }
            return events
        }
    }

    /// The update without a transaction of its own, where one statement can write it (PostgreSQL; no idempotency key,
    /// action or `within`, not an import keeping system fields, not of a table whose writes are exclusive; an answer,
    /// if asked for, that the update itself can give: ``answersFromUpdate(_:of:)``): the row and its version (its
    /// `xmin`, which every change of the row renews) read on a pooled connection, the update worked out from them,
    /// then one statement that updates the row only if it is still that version, adds the journal entries, appends
    /// the event and gives the answer, committing on its own. An update that changes nothing is answered from the
    /// read. Nil when the update cannot be written so (the caller runs the locked update), or when the row changed (or
    /// went) between the read and the statement, which then wrote nothing (the caller runs the locked update, which
    /// works from the row as the other write left it).
    private func updateUnlocked(
        _ write: UpdateWrite, answer: CommittedRow.Answer?, within: (@Sendable (SQLExecutor, String) async throws -> Void)?
    ) async throws -> [ChangeEvent]? {
        guard storage.dialect.writeAppendsEvent, within == nil, write.options.idempotency == nil,
            !write.options.allowed(for: write.caller).suppressAutoSysFields, writeScope(of: write.table) == .rows,
            answer == nil || Self.answersFromUpdate(answer, of: write.table)
        else { return nil }
        enum Read: Sendable {
            /// The update worked out from the row at `version`.
            case planned(PlannedUpdate, version: String)
            /// Nothing to change: answered from the read.
            case unchanged
            /// An action with its history entry: for the locked update.
            case locked
        }
        let read = try await storage.read { db -> Read in
            let select = try self.selectPlan(write.table, query: EncodedQuery(), fields: nil, caller: write.caller, dialect: db.dialect)
            guard let (current, version) = try await select.rowWithVersion(write.sysID, db: db) else {
                throw EngineError.notFound(table: write.table.name, sysID: write.sysID)
            }
            guard let plan = try await self.planUpdate(write, current: current.values, db: db) else {
                if let answer { try await answer.row.read(write.sysID, plan: answer.plan, db: db) }
                return .unchanged
            }
            return plan.run == nil && !plan.assignments.isEmpty ? .planned(plan, version: version) : .locked
        }
        let plan: PlannedUpdate
        let version: String
        switch read {
        case .planned(let planned, let read): (plan, version) = (planned, read)
        case .unchanged: return []
        case .locked: return nil
        }
        do {
            return try await writeEvents(scope: .rows) { db -> [ChangeEvent] in
                answer?.row.forget()
                guard let event = try await self.updateRow(
                    write, assignments: plan.assignments, event: plan.event, answer: answer, version: version, db: db
                ) else {
                    // Unreachable: the storage was found to write a row and its event in one statement.
                    throw UpdateNotCombined()
                }
                return [event]
            }
        } catch is RowChangedSinceRead {
            return nil
        }
    }

    /// Whether the row an update writes can be the write's answer (`RETURNING`): the answer's plan reads the record's
    /// own class, and its columns the update can return (``CommittedRow/Plan/returning``: the version among them, the
    /// caller's read access unconditional, the table's own fields).
    private static func answersFromUpdate(_ answer: CommittedRow.Answer?, of table: SchemaCatalog.Table) -> Bool {
        guard let answer else { return false }
        return answer.plan.returning != nil && answer.plan.row.select.table === table
    }

    /// Runs an update's `UPDATE` of one record's row. Where the storage can, the statement also adds the update's
    /// journal entries and appends `event` (the change, not yet numbered), and returns it numbered; with `answer`, whose
    /// plan reads the row's own class, it also fills the answer's row from the update (`RETURNING`). Returns nil where
    /// the caller is to add the journal entries and append the event.
    /// Without `version`, the row is locked by the transaction already. With it (PostgreSQL), the statement runs on its
    /// own (``SQLExecutor/lastRows(_:)``) and updates the row only if its `xmin` is still `version`; when it is not,
    /// it writes nothing and ``RowChangedSinceRead`` is thrown. It answers one row either way, so an answer with none
    /// was lost (the update may have committed): the others are told to read the log, and the write is 503.
    private func updateRow(
        _ write: UpdateWrite, assignments: [SQLFragment], event: ChangeEvent, answer: CommittedRow.Answer?,
        version: String? = nil, db: SQLExecutor
    ) async throws -> ChangeEvent? {
        let (sysID, table) = (write.sysID, write.table)
        let returning = db.dialect.writeAppendsEvent ? answer?.plan.returning : nil
        let update: SQLFragment = "UPDATE " + .identifier(table.physicalTable)
            + (returning.map { " AS " + .identifier($0.alias) } ?? "") + " SET " + assignments.joined(", ")
            + " WHERE sys_id = " + .bind(sysID) + (version.map { " AND " + db.dialect.rowIsAt($0) } ?? "")
            + (returning.map { " RETURNING " + $0.columns } ?? "")
        let journals = Self.journalInserts(
            write.prepared.journals, to: sysID, table: table, caller: write.caller, now: write.now, from: .updated
        )
        guard let statement = db.dialect.updateAppendingEvent(
            update, returnsRows: returning != nil, event: Self.eventValues(of: event, after: .bind(Self.json(event.values))),
            also: journals, oneRow: version != nil
        ) else {
            try await db.run(update)
            return nil
        }
        let rows: [ResultRow]
        do {
            rows = try await version == nil ? db.rows(statement) : db.lastRows(statement)
        } catch let undecodable as UndecodableAnswer {
            // The statement ran to its end, and a value of its answer could not be read.
            return try committedAnswer(table: table.name, sysID: sysID, db: db) { throw undecodable }
        } catch where version != nil && db.dialect.isSerializationFailure(error) {
            // A server whose default isolation is stricter than READ COMMITTED refuses, rather than skips, a row
            // changed since the statement's snapshot: the same as a version that no longer matches.
            throw RowChangedSinceRead()
        }
        if version != nil {
            guard let row = rows.first else {
                // The statement ran on its own and its answer never came: whether it wrote is unknown here. Every
                // instance, this one too, is told to read the log (an event committed under a number not known here).
                DrawnEvents.current?.addUnnumbered()
                DrawnEvents.current?.committed()
                throw StorageUnavailable(reason: "the answer to an update was lost; it may have been written")
            }
            // The version did not match: nothing written, no event appended.
            if try row.value(at: "docket_event_seq", kind: .integer) == .null { throw RowChangedSinceRead() }
        }
        return try committedAnswer(table: table.name, sysID: sysID, db: db) {
            guard let sequence = try rows.first?.value(at: "docket_event_seq", kind: .integer).intValue else {
                throw EventNotAppended(table: table.name)
            }
            if returning != nil, let answer { try answer.row.fill(rows, plan: answer.plan, sysID: sysID) }
            // Counted as this process's own last, once nothing else can fail (as for an insert).
            var numbered = event
            numbered.sequence = sequence
            drew(sequence)
            // A statement that ran on its own has committed: other instances hear of it now.
            if db.committedAlone { DrawnEvents.current?.committed() }
            return numbered
        }
    }

    /// The concrete class of a record the caller may read through `table`; 404 otherwise.
    func concreteTable(of sysID: String, in table: SchemaCatalog.Table, caller: Caller) async throws -> SchemaCatalog.Table {
        let (_, record) = try await get(sysID, in: table.name, fields: ["sys_id"], caller: caller)
        return catalog.table(record.table) ?? table
    }

    /// The class an update of `sysID` through `table` writes, and its input validated for that class (PATCH
    /// /table/task/<incident> may set incident fields). A table that nothing extends is its records' class: the
    /// record is not read first (the write's own read finds it, or answers 404), unless the input is refused, which
    /// a record that is not there (or not visible to the caller) answers with 404 first, as for other tables.
    /// A table with a password field is read first too: a password is hashed (slow, on purpose) only for a record
    /// that is there and visible to the caller.
    private func concreteInput(
        _ input: [String: String], of sysID: String, in table: SchemaCatalog.Table, options: WriteOptions, caller: Caller
    ) async throws -> (SchemaCatalog.Table, PreparedWrite) {
        func validated(for concrete: SchemaCatalog.Table) async throws -> PreparedWrite {
            let prepared = try await prepare(input, for: concrete, isInsert: false, options: options.allowed(for: caller), caller: caller)
            if !caller.isAdmin, concrete.field("sys_domain") != nil, prepared.values["sys_domain"] != nil {
                throw EngineError.badRequest(
                    "Operation Failed", detail: "The enterprise of a record (sys_domain) cannot be changed", field: "sys_domain"
                )
            }
            return prepared
        }
        guard table.descendants == [table.name], !table.fields.contains(where: { $0.type == .password }) else {
            let concrete = try await concreteTable(of: sysID, in: table, caller: caller)
            return (concrete, try await validated(for: concrete))
        }
        do {
            return (table, try await validated(for: table))
        } catch let refused as EngineError {
            _ = try await concreteTable(of: sysID, in: table, caller: caller)
            throw refused
        }
    }
}

/// An update's row was changed (or deleted) by another write between its read and its statement, which therefore
/// wrote nothing (``RecordStore/updateUnlocked(_:answer:within:)``).
private struct RowChangedSinceRead: Error {}

/// Unreachable: an update without a transaction on a storage that cannot write a row and its event in one statement.
private struct UpdateNotCombined: Error, CustomStringConvertible {
    var description: String { "The storage cannot update a row and append its event in one statement" }
}
