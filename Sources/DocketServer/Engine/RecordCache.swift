import Synchronization

/// Recently read records by physical table and sys_id, so that repeated reads of one record skip SQL.
///
/// Only the engine's write path changes records, and it calls ``invalidate(table:sysID:)`` after every
/// commit. A read that raced a commit must not put the old row back: each read notes ``generation`` before
/// it queries, and ``store(_:generation:)`` drops the row if any commit happened in between.
final class RecordCache: Sendable, ChangeObserver {
    /// A record as read through a table: it holds that table's fields.
    struct Entry: Sendable {
        /// The table the record was read through (its fields are the ones cached).
        var viewTable: String
        var record: Record
    }

    private struct State {
        var generation = 0
        var entries: [String: Entry] = [:]
    }

    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int = 20_000) { self.capacity = capacity }

    var generation: Int { state.withLock { $0.generation } }

    /// Forgets the row an event changed (rows are cached under their hierarchy's root, the physical table).
    func observe(_ event: ChangeEvent) {
        invalidate(table: event.rootTable, sysID: event.sysID)
    }

    func entry(table: String, sysID: String) -> Entry? {
        state.withLock { $0.entries[Self.key(table, sysID)] }
    }

    func store(_ entry: Entry, physicalTable: String, generation: Int) {
        state.withLock { state in
            guard state.generation == generation else { return }
            // Dropping everything at capacity keeps this simple; hot records come back on the next read.
            if state.entries.count >= capacity { state.entries.removeAll(keepingCapacity: true) }
            state.entries[Self.key(physicalTable, entry.record.sysID)] = entry
        }
    }

    /// Forgets a record; called after a commit that changed it.
    func invalidate(table: String, sysID: String) {
        state.withLock { state in
            state.generation += 1
            state.entries[Self.key(table, sysID)] = nil
        }
    }

    /// Forgets everything (after a schema change).
    func removeAll() {
        state.withLock { state in
            state.generation += 1
            state.entries.removeAll()
        }
    }

    private static func key(_ table: String, _ sysID: String) -> String { table + "/" + sysID }
}
