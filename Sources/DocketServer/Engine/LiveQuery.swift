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
    /// Whether the caller's new notifications (`sys_notification` inserts addressed to them) come too, whatever
    /// the table: the web UI's bell follows them on the page's one stream.
    var followsInbox = false

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

    /// How `live` sees one event; nil when it does not concern it. `judged` is the event's judgement when it was
    /// made already (``judge(_:for:)``, for a replay).
    func change(_ event: ChangeEvent, for live: LiveQuery, judged: (Bool, Bool)? = nil) async throws -> RecordChange? {
        guard let eventClass = catalog.table(event.table) else { return nil }
        if let table = live.table, !eventClass.ancestry.contains(table.name) { return nil }
        let before: Bool
        let after: Bool
        if let judged {
            (before, after) = judged
        } else {
            // Followers who see alike (the same visibility, table and query as compiled for them) share one
            // judgement of each event; followers who see differently are judged with it, in one statement.
            let key = LiveJudgementKey(sequence: event.sequence, live: judgementKey(for: live))
            let registry = liveRegistry
            (before, after) = try await judgements.value(key) { isMissing in
                registry.keys(for: event.sequence, concerning: eventClass, limit: LiveRegistry.batch - 1, where: isMissing)
            } compute: { keys in
                var lives = registry.lives(for: keys.map(\.live))
                lives[key.live] = live
                return try await self.judgeTogether(event, keys: keys, lives: lives)
            }
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

    /// The compiler and conditions that judge rows of `eventClass` for `live` (against the row itself rather than
    /// the table, which may have moved on since; references and dot-walks are resolved against the current state
    /// of the tables they name); nil when every row matches (the class filter holds by construction: the event's
    /// class extends the table).
    func liveConditions(
        _ eventClass: SchemaCatalog.Table, for live: LiveQuery, now: Date = Date()
    ) throws -> (QueryCompiler, [SQLFragment])? {
        var compiler = QueryCompiler(
            catalog: catalog, policy: policy, dialect: storage.dialect, caller: live.caller, now: now, table: live.table ?? eventClass
        )
        var conditions: [SQLFragment] = []
        if let filter = compiler.classFilter() { conditions.append(filter) }
        if let filter = try compiler.accessFilter(.read) { conditions.append(filter) }
        if let filter = try compiler.condition(for: live.query) { conditions.append(filter) }
        if conditions.count <= (compiler.classFilter() == nil ? 0 : 1) { return nil }
        return (compiler, conditions)
    }

    /// Rows judged in one statement by ``judge(_:for:)``: about this many bound values each.
    static let judgedValuesPerStatement = 8_000

    /// Judges many events for `live` at once, as a replay reads them from the log: for each event that concerns
    /// it, whether its row before and after the change match (see ``change(_:for:judged:)``). One statement per
    /// event class and some hundred rows, where judging one by one takes two per event.
    func judge(_ events: some Sequence<ChangeEvent>, for live: LiveQuery) async throws -> [Int: (Bool, Bool)] {
        var groups: [String: [ChangeEvent]] = [:]
        for event in events {
            guard let eventClass = catalog.table(event.table) else { continue }
            if let table = live.table, !eventClass.ancestry.contains(table.name) { continue }
            groups[eventClass.name, default: []].append(event)
        }
        var verdicts: [Int: (Bool, Bool)] = [:]
        for (name, group) in groups {
            guard let eventClass = catalog.table(name), catalog.table(eventClass.root) != nil else {
                for event in group { verdicts[event.sequence] = (false, false) }
                continue
            }
            guard let (found, conditions) = try liveConditions(eventClass, for: live) else {
                for event in group { verdicts[event.sequence] = (!event.rowBefore.isEmpty, !event.rowAfter.isEmpty) }
                continue
            }
            var compiler = found
            // Each row is numbered: 2i for event i's row before, 2i + 1 for its row after.
            var rows: [(key: Int, row: [String: String], sysID: String)] = []
            for (index, event) in group.enumerated() {
                if !event.rowBefore.isEmpty { rows.append((2 * index, event.rowBefore, event.sysID)) }
                if !event.rowAfter.isEmpty { rows.append((2 * index + 1, event.rowAfter, event.sysID)) }
            }
            let perStatement = max(1, Self.judgedValuesPerStatement / (catalog.physicalColumns(root: eventClass.root).count + 2))
            var matched = Set<Int>()
            var start = 0
            while start < rows.count {
                let slice = rows[start..<min(rows.count, start + perStatement)]
                start += perStatement
                compiler.source = "(" + slice.map { inlineSelect($0.row, of: eventClass, sysID: $0.sysID, key: $0.key) }
                    .joined(" UNION ALL ") + ")"
                let statement: SQLFragment = "SELECT docket_k FROM " + compiler.from + " WHERE " + conditions.joined(" AND ")
                for row in try await storage.read({ db in try await db.rows(statement) }) {
                    if let key = try row.value(at: "docket_k", kind: .integer).text.flatMap({ Int($0) }) { matched.insert(key) }
                }
            }
            for (index, event) in group.enumerated() {
                verdicts[event.sequence] = (matched.contains(2 * index), matched.contains(2 * index + 1))
            }
        }
        return verdicts
    }
}

/// The changes one live query sees, in log order (see ``RecordStore/subscribe(_:after:)``).
struct LiveChanges: AsyncSequence, Sendable {
    typealias Element = RecordChange
    let store: RecordStore
    let live: LiveQuery
    let after: Int

    func makeAsyncIterator() -> Iterator {
        let registration = LiveRegistration(store.liveRegistry)
        registration.follow(live, judgementKey: store.judgementKey(for: live))
        var iterator = Iterator(store: store, live: live, events: store.subscribe(after: after).makeAsyncIterator(), registration: registration)
        iterator.registeredAs = live.caller
        return iterator
    }

    struct Iterator: AsyncIteratorProtocol {
        let store: RecordStore
        /// What is followed; a transport updates its caller when the user's roles change.
        var live: LiveQuery
        var events: EventLogFollower.Iterator
        /// Its place among the live queries judged together (see ``LiveRegistry``).
        let registration: LiveRegistration
        /// The caller the registration was last made for (a transport changes `live`'s caller when roles change).
        var registeredAs: Caller?
        /// Judgements of the events a replay read together, made for `prejudgedAs` (a caller whose roles changed
        /// meanwhile is judged again, one event at a time).
        var prejudged: [Int: (Bool, Bool)] = [:]
        var prejudgedAs: Caller?
        /// The last sequence of the events judged together.
        var prejudgedThrough = Int.min
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
                    if live.followsInbox, event.table == "sys_notification", event.operation == .insert,
                        event.values["user"] == live.caller.userID, live.table?.name != "sys_notification"
                    {
                        return .change(RecordChange(kind: .entered, event: event, record: event.rowAfter, previous: [:]))
                    }
                    // Replaying: the events read from the log with this one are judged together, once.
                    if event.sequence > prejudgedThrough, let last = events.upcoming.last {
                        prejudged = try await store.judge([event] + events.upcoming, for: live)
                        prejudgedThrough = last.sequence
                        prejudgedAs = live.caller
                    }
                    let judged = prejudgedAs == live.caller ? prejudged.removeValue(forKey: event.sequence) : nil
                    if judged == nil, registeredAs != live.caller {
                        registration.follow(live, judgementKey: store.judgementKey(for: live))
                        registeredAs = live.caller
                    }
                    if let change = try await store.change(event, for: live, judged: judged) { return .change(change) }
                }
            }
        }
    }
}

/// Judgements of events (did the row match before and after?) shared by the followers who see alike (see
/// ``RecordStore/judgementKey(for:)``).
typealias LiveJudgements = SharedWork<LiveJudgementKey, (Bool, Bool)>

struct LiveJudgementKey: SequencedKey {
    let sequence: Int
    /// ``RecordStore/judgementKey(for:)`` of the follower.
    let live: String
}
