import DocketModel
import Synchronization

/// A row as a write's transaction committed it, for the write's answer: read back inside the transaction
/// (``RecordStore/readBack(_:in:fields:caller:db:)``), or taken from an insert's or an update's `RETURNING`
/// (``fill(_:plan:sysID:)``).
final class CommittedRow: Sendable {
    private let row = Mutex<(columns: [ResultColumn], record: Record)?>(nil)
    private let modCount = Mutex<String?>(nil)
    /// The record whose row came from its insert or update (``fill(_:plan:sysID:)``): ``read(_:plan:db:)`` keeps that
    /// row for it. A run of an insert's transaction that failed after its insert leaves another sys_id here, so the
    /// next run's row is never mistaken for it; an update's transaction forgets it at the start of each run
    /// (``forget()``).
    private let filled = Mutex<String?>(nil)
    /// Whether the row was taken from the write's own statement (for tests).
    var tookWrittenRow: Bool { filled.withLock { $0 != nil } }
    func set(_ value: (columns: [ResultColumn], record: Record)?) { row.withLock { $0 = value } }

    /// Forgets what a run of the write's transaction took or read: that run was rolled back.
    func forget() {
        row.withLock { $0 = nil }
        modCount.withLock { $0 = nil }
        filled.withLock { $0 = nil }
    }

    /// A row to fill with what a write committed, and how to read it.
    struct Answer: Sendable {
        let row: CommittedRow
        let plan: Plan
    }
    var value: (columns: [ResultColumn], record: Record)? { row.withLock { $0 } }
    /// The committed `sys_mod_count` (the record's version), when read with ``read(_:plan:db:)``.
    var version: String? { modCount.withLock { $0 } }

    /// What ``read(_:plan:db:)`` runs, compiled before the write (outside SQLite's one writer).
    struct Plan: Sendable {
        let row: RecordStore.ReadBackPlan
        /// When `fields` leave the version out.
        let version: RecordStore.ReadBackPlan?

        init(table: SchemaCatalog.Table, fields: [String]?, store: RecordStore, caller: Caller) throws {
            row = try store.readBackPlan(table, fields: fields, caller: caller)
            version = row.select.columns.contains { $0.name == "sys_mod_count" }
                ? nil : try store.readBackPlan(table, fields: ["sys_mod_count"], caller: caller)
        }

        /// The columns an insert or an update may return in place of the read (the version among them).
        var returning: RecordStore.SelectPlan.Returning? { version == nil ? row.select.returning : nil }
    }

    /// Takes the row of `sysID` from its insert's or update's `RETURNING` (the plan's ``Plan/returning`` columns): the
    /// row written is what the transaction commits where nothing after it in the transaction changes it (see
    /// ``RecordStore/insert(into:values:caller:options:answer:within:)`` and
    /// ``RecordStore/update(_:in:values:caller:options:answer:within:)``).
    func fill(_ rows: [ResultRow], plan: Plan, sysID: String) throws {
        let record = try plan.row.select.records(rows).first
        set(record.map { (plan.row.select.columns, $0) })
        modCount.withLock { $0 = record?.values["sys_mod_count"] }
        filled.withLock { $0 = sysID }
    }

    /// Reads the row as the plan's caller sees it with its fields, and its version (also when the fields leave it out).
    /// Nothing when the row of `sysID` was taken from its write (``fill(_:plan:sysID:)``).
    func read(_ sysID: String, plan: Plan, db: SQLExecutor) async throws {
        if filled.withLock({ $0 == sysID }) { return }
        let row = try await plan.row.run(sysID, db: db)
        set(row)
        var version = row?.record.values["sys_mod_count"]
        if version == nil, row != nil, let versionPlan = plan.version {
            version = try await versionPlan.run(sysID, db: db)?.record.values["sys_mod_count"]
        }
        modCount.withLock { $0 = version }
    }
}
