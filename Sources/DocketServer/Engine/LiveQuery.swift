import DocketModel
import Foundation
import Synchronization

/// What one follower of the event log watches: records of a table (and the tables extending it) matching a
/// query, as a caller may read them; or, without a table, every record the caller may read.
struct LiveQuery: Sendable {
    var table: SchemaCatalog.Table?
    var query: EncodedQuery {
        didSet { queryText = query.description }
    }
    var caller: Caller
    /// The query as text, printed once (it keys shared judgements on every event).
    private(set) var queryText: String

    init(table: SchemaCatalog.Table? = nil, query: EncodedQuery = EncodedQuery(), caller: Caller) {
        self.table = table
        self.query = query
        self.caller = caller
        self.queryText = query.description
    }
}

/// A committed change as one follower sees it: whether the record entered its result, changed in it, left it
/// or was deleted from it.
struct RecordChange: Sendable, Equatable {
    enum Kind: String, Sendable {
        /// Created matching, or changed so that it now matches (and the caller may now read it).
        case entered
        /// Matched before and after.
        case changed
        /// Matched before, no longer does (reassigned away, closed, or no longer readable by the caller).
        case left
        /// Matched, and was deleted.
        case deleted
    }

    var kind: Kind
    var event: ChangeEvent
    /// The row the follower may see: after the change (entered, changed), before it (left, deleted).
    var record: [String: String]
    /// For `changed`, what the changed fields held before; empty otherwise (the follower could not read the
    /// row before it entered).
    var previous: [String: String]
}

extension RecordStore {
    /// Follows the event log from after `sequence` as `live` sees it: only changes to records the caller may
    /// read (the row after an insert or update, the row before a delete), each told as entered, changed, left or
    /// deleted relative to the query. Ends with ``EventLogError/resyncNeeded(oldestAvailable:)`` when the log
    /// no longer reaches back to `sequence`. Pulled like ``EventLogFollower``: nothing piles up behind a slow
    /// consumer.
    func subscribe(_ live: LiveQuery, after sequence: Int) -> LiveChanges {
        LiveChanges(store: self, live: live, after: sequence)
    }

    /// How `live` sees one event; nil when it does not concern it.
    func change(_ event: ChangeEvent, for live: LiveQuery) async throws -> RecordChange? {
        guard let eventClass = catalog.table(event.table) else { return nil }
        if let table = live.table, !eventClass.ancestry.contains(table.name) { return nil }
        // Followers who see alike (same user, roles, table and query) share one judgement of each event.
        let key = LiveJudgementKey(
            sequence: event.sequence, user: live.caller.userID + "\u{0}" + live.caller.userName,
            roles: live.caller.roles.sorted(), table: live.table?.name ?? "", query: live.queryText
        )
        let (before, after) = try await judgements.value(key) {
            (try await self.matches(event.rowBefore, of: event, as: live), try await self.matches(event.rowAfter, of: event, as: live))
        }
        switch (before, after) {
        case (false, false): return nil
        case (false, true): return RecordChange(kind: .entered, event: event, record: event.rowAfter, previous: [:])
        case (true, true):
            return RecordChange(
                kind: .changed, event: event, record: event.rowAfter,
                previous: event.previous.filter { event.fields.contains($0.key) }
            )
        case (true, false):
            return RecordChange(
                kind: event.operation == .delete ? .deleted : .left, event: event, record: event.rowBefore, previous: [:]
            )
        }
    }

    /// Whether a row as it was at the event (before or after it) is one `live` sees: judged by the same compiler
    /// and access rules as a list read, against the row itself rather than the table (the table may have moved
    /// on since). References and dot-walks are resolved against the current state of the tables they name.
    private func matches(_ row: [String: String], of event: ChangeEvent, as live: LiveQuery) async throws -> Bool {
        guard !row.isEmpty, let eventClass = catalog.table(event.table), catalog.table(eventClass.root) != nil else {
            return false
        }
        let table = live.table ?? eventClass
        var compiler = compiler(for: table, caller: live.caller, dialect: storage.dialect)
        var conditions: [SQLFragment] = []
        if let filter = compiler.classFilter() { conditions.append(filter) }
        if let filter = try compiler.accessFilter(.read) { conditions.append(filter) }
        if let filter = try compiler.condition(for: live.query) { conditions.append(filter) }
        // The class filter holds by construction (the event's class extends the table); nothing else to judge.
        if conditions.count <= (compiler.classFilter() == nil ? 0 : 1) { return true }
        compiler.source = inlineRow(row, of: eventClass, sysID: event.sysID)
        let statement: SQLFragment = "SELECT COUNT(*) FROM " + compiler.from + " WHERE " + conditions.joined(" AND ")
        return try await storage.read { db in try await db.integer(statement) } > 0
    }
}

/// The changes one live query sees, in log order (see ``RecordStore/subscribe(_:after:)``).
struct LiveChanges: AsyncSequence, Sendable {
    typealias Element = RecordChange
    let store: RecordStore
    let live: LiveQuery
    let after: Int

    func makeAsyncIterator() -> Iterator {
        Iterator(store: store, live: live, events: store.subscribe(after: after).makeAsyncIterator())
    }

    struct Iterator: AsyncIteratorProtocol {
        let store: RecordStore
        /// What is followed; a transport updates its caller when the user's roles change.
        var live: LiveQuery
        var events: EventLogFollower.Iterator
        /// The sequence of the last event judged, shown or not (a follower resumes after it).
        var position: Int { events.cursor }
        /// Ends the live part of this iteration from another task (``EventBroadcaster/stop(_:)``).
        var followToken: Int { events.following.token }

        /// A change, or a tick of the broadcaster's clock (for heartbeats and credential checks).
        enum Update: Sendable {
            case change(RecordChange)
            case tick
        }

        mutating func next() async throws -> RecordChange? {
            while let update = try await nextUpdate() {
                if case .change(let change) = update { return change }
            }
            return nil
        }

        /// The next change or tick; nil when following ended, or (with `until`) once every event up to that
        /// sequence was judged.
        mutating func nextUpdate(until: Int? = nil) async throws -> Update? {
            while true {
                if let until, events.cursor >= until { return nil }
                guard let step = try await events.nextStep() else { return nil }
                switch step {
                case .tick: return .tick
                case .event(let event):
                    if let change = try await store.change(event, for: live) { return .change(change) }
                }
            }
        }
    }
}

/// Judgements of events (did the row match before and after?) shared by the followers who see alike (same user,
/// roles, table and query).
typealias LiveJudgements = SharedWork<LiveJudgementKey, (Bool, Bool)>

struct LiveJudgementKey: SequencedKey {
    let sequence: Int
    let user: String
    let roles: [String]
    let table: String
    let query: String
}
