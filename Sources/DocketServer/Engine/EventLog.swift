import DocketModel
import Foundation
import Synchronization

/// A committed change, as appended to the event log in the writing transaction.
struct ChangeEvent: Sendable, Equatable {
    enum Operation: String, Sendable { case insert, update, delete }
    var sequence: Int
    /// The record's class: its concrete table (`incident`, also when it was written through `task`).
    var table: String
    /// The root of the class's hierarchy, the table its row is stored in (`task` for an incident; the table
    /// itself when it extends nothing).
    var rootTable: String
    var sysID: String
    var operation: Operation
    /// The fields the change wrote: every stored field of an insert, the changed ones of an update, nothing for a
    /// delete; journal fields (`comments`) when an entry was added.
    var fields: [String]
    var userName: String
    /// When it committed (`yyyy-MM-dd HH:mm:ss`, UTC).
    var time: String
    /// The row after the change (every stored field but passwords, plus the text of journal entries added);
    /// empty for a delete.
    var values: [String: String]
    /// What the changed fields held before: for an update the previous value of each changed stored field, for a
    /// delete the whole row; empty for an insert.
    var previous: [String: String]

    /// The row before the change: empty for an insert, the deleted row for a delete.
    var rowBefore: [String: String] {
        switch operation {
        case .insert: return [:]
        case .delete: return previous
        case .update:
            var row = values
            for field in fields { row[field] = previous[field] }
            return row
        }
    }

    /// The row after the change: empty for a delete.
    var rowAfter: [String: String] { operation == .delete ? [:] : values }
}

extension RecordStore {
    /// Appends a change to the event log inside the writing transaction; returns it with its sequence.
    /// Passwords (even hashed) never enter the log: their field names do, their values do not.
    func appendEvent(
        table: SchemaCatalog.Table, sysID: String, operation: ChangeEvent.Operation, fields: [String],
        values: [String: String], previous: [String: String], caller: Caller, now: String, db: SQLExecutor
    ) async throws -> ChangeEvent {
        try await append(Self.event(
            table: table, sysID: sysID, operation: operation, fields: fields, values: values, previous: previous,
            caller: caller, now: now
        ), db: db)
    }

    /// Appends `event` (made by ``event(table:sysID:operation:fields:values:previous:caller:now:)``, not yet numbered)
    /// inside the writing transaction; returns it with its sequence.
    func append(_ event: ChangeEvent, db: SQLExecutor) async throws -> ChangeEvent {
        var event = event
        // Other processes sharing the database learn of it once it has committed (see ``RecordStore/catchUp()``).
        event.sequence = try await db.integer(db.dialect.appendingEvent(Self.eventValues(of: event, after: .bind(Self.json(event.values)))))
        drew(event.sequence)
        return event
    }

    /// A change as the log keeps it, not yet numbered: passwords (even hashed) never enter the log, their field
    /// names do, their values do not.
    static func event(
        table: SchemaCatalog.Table, sysID: String, operation: ChangeEvent.Operation, fields: [String],
        values: [String: String], previous: [String: String], caller: Caller, now: String
    ) -> ChangeEvent {
        func loggable(_ row: [String: String]) -> [String: String] {
            row.filter { table.field($0.key)?.type != .password }
        }
        return ChangeEvent(
            sequence: 0, table: table.name, rootTable: table.root, sysID: sysID, operation: operation, fields: fields,
            userName: caller.userName, time: now, values: loggable(values), previous: loggable(previous)
        )
    }

    /// The values of ``StorageDialect/eventColumns`` for `event`, with `after` for its row after the change (the
    /// JSON text of `values_after`: a bind, or an expression of the statement that appends it).
    static func eventValues(of event: ChangeEvent, after: SQLFragment) -> [SQLFragment] {
        [
            .bind(event.table), .bind(event.rootTable), .bind(event.sysID), .bind(event.operation.rawValue),
            .bind(event.fields.joined(separator: ",")), .bind(event.userName), .bind(event.time), after,
            .bind(Self.json(event.previous)),
        ]
    }

    /// Keeps the sequence a write of this process drew (``SharedChanges/drew(_:)``), and for the storage, which
    /// tells other processes of it once it is committed (``DrawnEvents``).
    func drew(_ sequence: Int) {
        DrawnEvents.current?.add(sequence)
        if let draws = EventDraws.current {
            draws.add(sequence)
            shared.drew(sequence)
        }
    }

    static func json(_ row: [String: String]) -> String {
        String(decoding: JSONValue(members: row.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }).serialized(), as: UTF8.self)
    }

    private static func row(_ text: String?) -> [String: String] {
        guard let text, !text.isEmpty, let members = (try? JSONValue.parse(Array(text.utf8)))?.objectValue else { return [:] }
        return members.reduce(into: [:]) { row, member in row[member.key] = member.value.stringValue ?? "" }
    }

    /// Events after a sequence number, oldest first (the audit trail, and what followers replay): only as far as
    /// nothing before them can still commit (see ``eventPage(after:limit:)``).
    func events(after sequence: Int, limit: Int = 1000) async throws -> [ChangeEvent] {
        try await eventPage(after: sequence, limit: limit).events
    }

    /// What a read of the log after a sequence found.
    struct EventPage: Sendable {
        /// Events in order, with no number missing between them that might still commit.
        var events: [ChangeEvent]
        /// The read stopped before a number that a transaction still in flight may commit (PostgreSQL, where
        /// writers commit in any order): read again shortly. Never on SQLite.
        var waiting: Bool
        /// Every number up to this one is in `events` (or before the read's start), or can no longer commit.
        var settledThrough: Int
    }

    /// Events after `sequence`, oldest first, at most `limit`, up to the first number missing that may still commit:
    /// a number missing below a row is passed only once the row is settled (every transaction that could hold a
    /// smaller number has ended: ``StorageDialect/appendingEvent(_:)``); a rolled-back transaction's number is then
    /// skipped, a pending one's waited for.
    /// With `stoppingAtGaps: false`, every event read is returned, also past such a number (``catchUp()``
    /// publishes them to caches at once), and `settledThrough` says how far the events are complete.
    func eventPage(after sequence: Int, limit: Int = 1000, stoppingAtGaps: Bool = true) async throws -> EventPage {
        try await storage.read { db in
            let rows = try await db.rows(db.dialect.eventsAfter(
                sequence, limit: max(1, limit),
                columns: "e.seq, e.table_name, e.root_table, e.record_id, e.operation, e.fields, e.user_name, e.created_on,"
                    + " e.values_after, e.values_before"
            ))
            var page = EventPage(events: [], waiting: false, settledThrough: sequence)
            var expected = sequence
            for row in rows {
                let seq = try row.value(at: "seq", kind: .integer).intValue ?? 0
                if !page.waiting, seq != expected &+ 1, try row.value(at: "settled", kind: .integer).intValue != 1 {
                    page.waiting = true
                    if stoppingAtGaps { break }
                }
                expected = seq
                if !page.waiting { page.settledThrough = seq }
                let table = try row.value(at: "table_name", kind: .text).text ?? ""
                page.events.append(ChangeEvent(
                    sequence: seq,
                    table: table,
                    rootTable: try row.value(at: "root_table", kind: .text).text ?? self.catalog.table(table)?.root ?? table,
                    sysID: try row.value(at: "record_id", kind: .text).text ?? "",
                    operation: ChangeEvent.Operation(rawValue: try row.value(at: "operation", kind: .text).text ?? "")
                        ?? .update,
                    fields: (try row.value(at: "fields", kind: .text).text ?? "").split(separator: ",").map(String.init),
                    userName: try row.value(at: "user_name", kind: .text).text ?? "",
                    time: try row.value(at: "created_on", kind: .text).text ?? "",
                    values: Self.row(try row.value(at: "values_after", kind: .text).text),
                    previous: Self.row(try row.value(at: "values_before", kind: .text).text)
                ))
            }
            return page
        }
    }

    /// The log's head for followers (0 when it is empty): the newest sequence below which nothing is still in
    /// flight, where a follower that wants only what happens from now on starts (it then misses nothing that
    /// commits later with a smaller number).
    func latestSequence() async throws -> Int {
        try await storage.read { db in try await db.integer(SQLFragment(db.dialect.settledEventSequenceSQL)) }
    }

    /// A mark that moves with every committed change: on PostgreSQL the changes this process has published
    /// (``EventBroadcaster/generation``), read after the log's head and after catching up with other processes'
    /// commits, so that a database that does not answer fails the read, and a change committed anywhere before the
    /// call is counted in it.
    ///
    /// On SQLite, where one process serves the file but others may write it too (`docketd users …` while the server
    /// runs), and sequences commit in order, the mark is the log's newest sequence.
    func changeMark() async throws -> Int {
        let newest = try await newestSequence()
        guard storage.isShared else { return newest }
        try await catchUp()
        return broadcaster.generation
    }

    /// The newest sequence in the log (0 when it is empty), also when a smaller one is still in flight.
    func newestSequence() async throws -> Int {
        try await storage.latestEventSequence()
    }
}

/// Something kept in memory that a committed change can make stale (cached records, users and sessions,
/// rate-limit rules, OAuth clients): it forgets what the change touched. Observers are told of every event the
/// broadcaster publishes, synchronously and before any follower, so that the writing request's answer never
/// races a stale cache; events of other server instances reach them the same way (``RecordStore/catchUp()``).
protocol ChangeObserver: Sendable {
    func observe(_ event: ChangeEvent)
}

/// Fans committed changes out to followers of the event log. Fed once per commit, after it (by
/// ``RecordStore/notify(_:)``), and, where several server instances share the database, with their commits read
/// from the log (``RecordStore/catchUp()``), so followers never need to know where an event came from.
final class EventBroadcaster: Sendable {
    /// What followers receive: committed events, ticks (a shared clock for heartbeats and credential checks,
    /// so that idle followers cost no timer each), and wake-ups.
    enum Signal: Sendable {
        case event(ChangeEvent)
        case tick
        /// Something a follower may be waiting for changed without an event: a write of this process that drew a
        /// number failed (``SharedChanges/abandoned(_:)``), so the log decides what became of the number; or the
        /// moment a follower waits for a missing number live is over (``EventLogFollower/Iterator/gapGrace``).
        case wake
    }

    /// Where a follower is in the log (the last sequence it took), for the lag metrics; set by the follower with a
    /// relaxed store, read at a scrape.
    final class Position: Sendable {
        /// What follows: `live` (streams, subscriptions, groups) or `notifier`.
        let kind: FollowerKind
        private let sequence: Atomic<Int>

        init(kind: FollowerKind, at sequence: Int) {
            self.kind = kind
            self.sequence = Atomic(sequence)
        }

        var value: Int { sequence.load(ordering: .relaxed) }
        func set(_ value: Int) { sequence.store(value, ordering: .relaxed) }
    }

    /// The kinds of followers the lag metrics tell apart.
    enum FollowerKind: String, Sendable, CaseIterable {
        case live, notifier
    }

    private struct Follower {
        let continuation: AsyncStream<Signal>.Continuation
        let position: Position?
    }

    private let followers = Mutex<(next: Int, streams: [Int: Follower], closed: Bool)>((0, [:], false))

    /// A stream of every event published from now on, and the token that ends it. With a `buffer`, a follower
    /// that falls further behind loses its oldest events (it must read them from the log). A follower that
    /// reports its `position` counts in ``lags(head:)``.
    func follow(buffer: Int? = nil, position: Position? = nil) -> (events: AsyncStream<Signal>, token: Int) {
        let (stream, continuation) = AsyncStream<Signal>.makeStream(
            bufferingPolicy: buffer.map { .bufferingNewest($0) } ?? .unbounded
        )
        let token = followers.withLock { state in
            let token = state.next
            state.next += 1
            if state.closed {
                continuation.finish()
            } else {
                state.streams[token] = Follower(continuation: continuation, position: position)
            }
            return token
        }
        return (stream, token)
    }

    /// How far behind `head` the furthest behind follower of each kind is (0 for a kind with no follower).
    func lags(head: Int) -> [FollowerKind: Int] {
        var lags = Dictionary(uniqueKeysWithValues: FollowerKind.allCases.map { ($0, 0) })
        for follower in followers.withLock({ Array($0.streams.values) }) {
            guard let position = follower.position else { continue }
            let lag = head.subtractingReportingOverflow(position.value)
            if !lag.overflow, lag.partialValue > lags[position.kind, default: 0] { lags[position.kind] = lag.partialValue }
        }
        return lags
    }

    /// Ends every follower's stream, now and from now on (the server is shutting down: live streams end, so
    /// that their clients reconnect elsewhere, instead of holding the shutdown open).
    func close() {
        let streams = followers.withLock { state in
            state.closed = true
            defer { state.streams = [:] }
            return state.streams.values.map(\.continuation)
        }
        for continuation in streams { continuation.finish() }
    }

    /// Wakes one follower (see ``Signal/wake``).
    func wake(_ token: Int) {
        followers.withLock { $0.streams[token] }?.continuation.yield(.wake)
    }

    func stop(_ token: Int) {
        followers.withLock { $0.streams.removeValue(forKey: token) }?.continuation.finish()
    }

    private let observers = Mutex<[any ChangeObserver]>([])
    private let published = Atomic<Int>(0)
    private let ticks = Atomic<Int>(0)

    /// How many times the clock ticked: a follower waiting in the log for a number in flight hands a tick on when
    /// the clock ticked meanwhile (heartbeats and credential checks go on while it waits).
    var tickCount: Int { ticks.load(ordering: .relaxed) }

    /// How many events were published here so far (one more before each publication's observers hear of it): an
    /// unchanged count means nothing this process knows of changed since (``ListPages``).
    var generation: Int { published.load(ordering: .acquiring) }

    /// Tells `observer` of every event from now on (see ``ChangeObserver``).
    func add(observer: any ChangeObserver) {
        observers.withLock { $0.append(observer) }
    }

    func publish(_ event: ChangeEvent) {
        published.add(1, ordering: .releasing)
        for observer in observers.withLock({ $0 }) { observer.observe(event) }
        for follower in followers.withLock({ Array($0.streams.values) }) { follower.continuation.yield(.event(event)) }
    }

    /// Wakes every follower without a tick (see ``Signal/wake``).
    func wake() {
        for follower in followers.withLock({ Array($0.streams.values) }) { follower.continuation.yield(.wake) }
    }

    /// Wakes every follower (see ``Signal/tick``).
    func tick() {
        ticks.add(1, ordering: .relaxed)
        for follower in followers.withLock({ Array($0.streams.values) }) { follower.continuation.yield(.tick) }
    }

    /// How many followers there are (for tests and metrics).
    var count: Int { followers.withLock { $0.streams.count } }
}

/// Why a follower of the event log cannot continue from where it is.
enum EventLogError: Error, Sendable, Equatable {
    /// Events after the follower's sequence were removed by retention, or more of them came since than one
    /// follower may replay (``RecordStore/replayLimit``): it must read the current state again and follow from
    /// `oldestAvailable`. Never a silent gap.
    case resyncNeeded(oldestAvailable: Int)
}

extension RecordStore {
    /// The highest sequence removed by retention (0 when none was): a follower behind it cannot resume.
    func eventLogPrunedThrough() async throws -> Int {
        try await storage.read { db in
            Int(try await db.rows("SELECT value FROM docket_meta WHERE key = 'event_log_pruned_through'")
                .first?.value(at: "value", kind: .text).text ?? "") ?? 0
        }
    }

    /// Removes events older than `cutoff`, and all but the newest `maximumEvents`; returns how many went.
    /// Remembers the highest sequence removed, so that followers further behind are told to resync.
    ///
    /// Events the notifier has not read yet are kept (it delivers what happened while it was down), unless it is
    /// more than `notifierHoldLimit` events behind the newest: then retention goes on without it, loudly.
    @discardableResult
    func pruneEventLog(olderThan cutoff: Date, keepingAtMost maximumEvents: Int, notifierHoldLimit: Int = 2_000_000) async throws -> Int {
        let cutoffText = GlideDateTime.format(cutoff)
        let logger = self.logger
        return try await storage.write { db in
            let newest = try await db.integer("SELECT COALESCE(MAX(seq), 0) FROM docket_event_log")
            let condition: SQLFragment = "created_on < " + .bind(cutoffText) + " OR seq <= " + .bind(newest - max(0, maximumEvents))
            var through = try await db.integer("SELECT COALESCE(MAX(seq), 0) FROM docket_event_log WHERE " + condition)
            // Never past a number still in flight: it would commit below the pruned mark.
            through = min(through, try await db.integer(SQLFragment(db.dialect.settledEventSequenceSQL)))
            if let position = try await NotifierLease.position(db), position < through {
                if newest.subtractingReportingOverflow(position).partialValue <= notifierHoldLimit {
                    through = position
                } else {
                    logger.error(
                        "The notifier is too far behind the event log: retention removes changes it has not notified yet",
                        metadata: ["notifierPosition": "\(position)", "newest": "\(newest)", "holdLimit": "\(notifierHoldLimit)"]
                    )
                }
            }
            guard through > 0 else { return 0 }
            let removed = try await db.integer("SELECT COUNT(*) FROM docket_event_log WHERE seq <= " + .bind(through))
            try await db.run("DELETE FROM docket_event_log WHERE seq <= " + .bind(through))
            try await db.run("DELETE FROM docket_meta WHERE key = 'event_log_pruned_through'")
            try await db.run(
                "INSERT INTO docket_meta (key, value) VALUES ('event_log_pruned_through', " + .bind(String(through)) + ")"
            )
            return removed
        }
    }

    /// Every event after `sequence`, in order, each once: first those already in the log (replayed from
    /// storage), then live ones as they commit, with no gap and no duplicate at the seam. See ``EventLogFollower``.
    /// `replayLimited: false` is for a durable reader (the notifier) that must read every event however far
    /// behind it starts; it still learns of events retention removed.
    func subscribe(
        after sequence: Int, batchSize: Int = 500, liveBuffer: Int = EventLogFollower.liveBuffer, replayLimited: Bool = true,
        kind: EventBroadcaster.FollowerKind = .live
    ) -> EventLogFollower {
        EventLogFollower(
            store: self, after: sequence, batchSize: max(1, batchSize), liveBuffer: max(1, liveBuffer), replayLimited: replayLimited,
            kind: kind
        )
    }
}
