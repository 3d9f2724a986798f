import DocketModel
import Foundation

/// Numbers of new records (INC0010001): where a table's come from, and the insert that takes one.
extension RecordStore {
    /// On PostgreSQL, makes the sequence a numbered table's new records take their numbers from, once per process
    /// (``NumberSequences``), before the insert's transaction begins.
    func ensureNumberSequence(for table: SchemaCatalog.Table) async throws {
        guard storage.dialect == .postgres, table.field("number") != nil, let owner = numberOwner(of: table),
            !numberSequences.withLock({ $0.contains(owner.table) })
        else { return }
        try await storage.write { db in try await NumberSequences.create(for: owner.table, start: owner.start, db: db) }
        numberSequences.withLock { _ = $0.insert(owner.table) }
    }

    /// Writes a new record's row; returns the fields it wrote. A record of a numbered table given no number
    /// takes the next one, into `values`: on PostgreSQL from the table's sequence in the insert itself (one round
    /// trip, no lock held: ``NumberSequences``), on SQLite from its counter row.
    /// `answer`: where the row as inserted goes, read from the insert itself (`RETURNING`) when its plan allows
    /// (``CommittedRow/Plan/returning``); otherwise it is read later, as the plan says.
    /// `event`: the record's insert event, appended by the insert's own statement where the storage can
    /// (``StorageDialect/insertAppendingEvent(_:returnsRows:event:also:)``), with its journal entries, and then returned
    /// numbered; nil when the caller is to append it (``appendEvent(table:sysID:operation:fields:values:previous:caller:now:db:)``)
    /// and add the entries (``appendJournals(_:to:table:caller:now:db:)``).
    /// `endsWrite`: the caller runs no statement after this one and nothing of its own that can fail: when the
    /// insert also appends the event and gives the answer, it is run as the transaction's last statement
    /// (``SQLExecutor/lastRows(_:)``).
    func insertRow(
        into table: SchemaCatalog.Table, values: inout [String: String], db: SQLExecutor, answer: CommittedRow.Answer? = nil,
        event: InsertEvent? = nil, endsWrite: Bool = false
    ) async throws -> (fields: [FieldDefinition], event: ChangeEvent?) {
        let numbering = table.field("number") != nil && values["number", default: ""].isEmpty ? numberOwner(of: table) : nil
        let insertEvent = event
        func columns(_ fields: [FieldDefinition]) -> [SQLFragment] { fields.map { .identifier($0.name) } }
        func row(_ fields: [FieldDefinition]) -> [SQLFragment] {
            fields.map { FieldCoercion.sqlValue(values[$0.name]!, for: $0).fragment }
        }
        let returning = db.dialect.insertAnswersRow ? answer?.plan.returning : nil
        let given = table.fields.filter { $0.type.isStored && $0.name != "number" && !values[$0.name, default: ""].isEmpty }
        // The fields the row holds once written: with the number the insert draws.
        let written = table.fields.filter {
            $0.type.isStored && (!values[$0.name, default: ""].isEmpty || (numbering != nil && $0.name == "number"))
        }
        // The event, less the number the insert draws (added by the statement, and here once it is known).
        let folded = !db.dialect.writeAppendsEvent ? nil : event.map { event -> ChangeEvent in
            var after = values.filter { table.field($0.key)?.type.isStored == true }
            if numbering != nil { after["number"] = nil }
            for entry in event.journals { after[entry.field] = entry.text }
            return Self.event(
                table: table, sysID: values["sys_id", default: ""], operation: .insert,
                fields: written.map(\.name) + event.journals.map(\.field), values: after, previous: [:],
                caller: event.caller, now: event.now
            )
        }
        /// The statement with the event appended by it, where the storage can.
        /// `drawsNumber`: the statement draws the number (and returns it as `number`).
        func appending(_ insert: SQLFragment, returnsRows: Bool, drawsNumber: Bool) -> SQLFragment? {
            guard let event = folded, let insertEvent, drawsNumber || numbering == nil else { return nil }
            let json = Self.json(event.values)
            let after: SQLFragment = drawsNumber ? db.dialect.withInsertedNumber(json) : .bind(json)
            // The record's journal entries too, in the same statement.
            let journals = Self.journalInserts(
                insertEvent.journals, to: values["sys_id", default: ""], table: table, caller: insertEvent.caller,
                now: insertEvent.now, from: .inserted
            )
            return db.dialect.insertAppendingEvent(
                insert, returnsRows: returnsRows, event: Self.eventValues(of: event, after: after), also: journals
            )
        }
        /// Numbers the event from the statement's row (nil when the statement did not append it).
        func numbered(_ rows: [ResultRow], appended: Bool) throws -> ChangeEvent? {
            guard appended, var event = folded else { return nil }
            guard let sequence = try rows.first?.value(at: "docket_event_seq", kind: .integer).intValue else {
                throw EventNotAppended(table: table.name)
            }
            event.sequence = sequence
            if numbering != nil { event.values["number"] = values["number"] }
            drew(sequence)
            // A statement that ran on its own has committed: other instances hear of it now.
            if db.committedAlone { DrawnEvents.current?.committed() }
            return event
        }
        /// Runs the insert; as the write's last statement (``SQLExecutor/lastRows(_:)``) when the caller says that
        /// nothing follows it (`endsWrite`), the statement appends the event (`appends`), and the answer, if one is
        /// asked for, comes from the insert.
        func run(_ statement: SQLFragment, last appends: Bool) async throws -> [ResultRow] {
            do {
                return try await endsWrite && appends && (answer == nil || returning != nil)
                    ? db.lastRows(statement) : db.rows(statement)
            } catch let undecodable as UndecodableAnswer {
                // The statement ran to its end, and a value of its answer could not be read: as an answer that lacks
                // what the write reads (below).
                return try answered { throw undecodable }
            }
        }
        /// Reads the insert's answer from its rows (its number, its row, its event's number; the event counted as
        /// this process's own last, once nothing else can fail): ``committedAnswer(table:sysID:db:_:)``.
        func answered<T>(_ read: () throws -> T) throws -> T {
            try committedAnswer(table: table.name, sysID: values["sys_id", default: ""], db: db, read)
        }
        guard let numbering, let insert = db.dialect.insertTakingNumber(
            into: table.physicalTable, columns: columns(given), values: row(given),
            sequence: NumberSequences.name(of: numbering.table), prefix: numbering.prefix, digits: numbering.digits,
            returning: returning.map { ($0.alias, $0.columns) }
        ) else {
            if let numbering { values["number"] = try await allocateNumber(numbering, db: db) }
            let stored = table.fields.filter { $0.type.isStored && !values[$0.name, default: ""].isEmpty }
            var statement: SQLFragment = "INSERT INTO " + .identifier(table.physicalTable)
                + (returning.map { " AS " + .identifier($0.alias) } ?? "") + " (" + columns(stored).joined(", ")
                + ") VALUES (" + row(stored).joined(", ") + ")"
            if let returning { statement += " RETURNING " + returning.columns }
            let folding = appending(statement, returnsRows: returning != nil, drawsNumber: false)
            let rows = try await run(folding ?? statement, last: folding != nil)
            return try answered {
                if returning != nil, let answer { try answer.row.fill(rows, plan: answer.plan, sysID: values["sys_id", default: ""]) }
                return (stored, try numbered(rows, appended: folding != nil))
            }
        }
        let folding = appending(insert, returnsRows: true, drawsNumber: true)
        let rows = try await run(folding ?? insert, last: folding != nil)
        return try answered {
            guard let taken = try rows.first?.value(at: "number", kind: .text).text, !taken.isEmpty else {
                throw NumberCounterMissing(table: numbering.table)
            }
            if returning != nil, let answer { try answer.row.fill(rows, plan: answer.plan, sysID: values["sys_id", default: ""]) }
            values["number"] = taken
            return (
                table.fields.filter { $0.type.isStored && !values[$0.name, default: ""].isEmpty },
                try numbered(rows, appended: folding != nil)
            )
        }
    }

    /// Reads what a write's statement answered (`read`). Where the statement ran on its own it has committed: an answer
    /// that lacks what the write reads, or one with a value that could not be decoded (``UndecodableAnswer``), then must
    /// not say the write failed (``CommittedWithoutAnswer``).
    func committedAnswer<T>(table: String, sysID: String, db: SQLExecutor, _ read: () throws -> T) throws -> T {
        do {
            return try read()
        } catch {
            guard db.committedAlone else { throw error }
            // Its event committed with it, under a number not known here: announced as such, so that every
            // instance reads the log (``CommitAnnouncer``).
            DrawnEvents.current?.addUnnumbered()
            DrawnEvents.current?.committed()
            throw CommittedWithoutAnswer(table: table, sysID: sysID, cause: error)
        }
    }

    /// What a record's insert event needs besides the row (``insertRow(into:values:db:answer:event:endsWrite:)``).
    struct InsertEvent: Sendable {
        var journals: [(field: String, text: String)]
        var caller: Caller
        var now: String
    }

    /// Where a table's records take their numbers: the nearest table of its ancestry with a number prefix.
    struct Numbering {
        let table: String
        let prefix: String
        let digits: Int
        let start: Int
    }

    func numberOwner(of table: SchemaCatalog.Table) -> Numbering? {
        guard let owner = table.ancestry.lazy.compactMap({ self.catalog.table($0) })
            .first(where: { $0.definition.numberPrefix != nil }), let prefix = owner.definition.numberPrefix
        else { return nil }
        return Numbering(
            table: owner.name, prefix: prefix, digits: owner.definition.numberDigits, start: owner.definition.numberStart
        )
    }

    func allocateNumber(_ owner: Numbering, db: SQLExecutor) async throws -> String {
        let prefix = owner.prefix
        let key = SQLFragment.bind(owner.table)
        // One statement takes the number and moves the counter on, so two writers can never take the same one
        // (on any storage, whatever its isolation); a counter missing for a table is created first.
        let take: SQLFragment =
            "UPDATE docket_number_counter SET next_value = next_value + 1 WHERE table_name = " + key
            + " RETURNING next_value - 1 AS taken"
        var taken = try await db.rows(take).first.map { try $0.value(at: "taken", kind: .integer).intValue }
        if taken == nil {
            try await db.run(
                "INSERT INTO docket_number_counter (table_name, next_value) VALUES (" + key + ", "
                    + .bind(owner.start) + ") ON CONFLICT (table_name) DO NOTHING"
            )
            taken = try await db.rows(take).first.map { try $0.value(at: "taken", kind: .integer).intValue }
        }
        // Unreachable: the insert leaves a counter for the update to take from.
        guard let value = taken ?? nil else { throw NumberCounterMissing(table: owner.table) }
        let digits = String(value)
        return prefix + String(repeating: "0", count: max(0, owner.digits - digits.count)) + digits
    }
}

/// An insert or an update that ran on its own committed, and its rows lack what the write reads (a fault of the driver
/// or of this code): the write is reported as done, its row read afresh, and its event published from the log (its
/// number was never counted as this process's own).
struct CommittedWithoutAnswer: Error, CustomStringConvertible {
    let table: String
    let sysID: String
    let cause: any Error
    var description: String { "A write of \(table) committed, and its answer could not be read: \(cause)" }
}

/// Unreachable: an insert or an update that appends its event answered without the event's sequence.
struct EventNotAppended: Error, CustomStringConvertible {
    let table: String
    var description: String { "The write of a \(table) row answered without its event's sequence" }
}
