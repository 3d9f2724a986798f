import Synchronization

/// How far this process has published the event log's events to its broadcaster, when other processes write
/// the same database (PostgreSQL shared by several docketd).
///
/// Every event up to `applied` has been published here: by the writing request itself for this process's
/// commits, by ``RecordStore/catchUp()`` for everyone else's. Writers commit in any order there, so an event
/// above `applied` may be visible while a smaller number is still in flight: such events are published at once
/// (caches must never be staler than an answered write) and remembered in `above`, and `applied` passes a
/// missing number only once it can no longer commit (``RecordStore/eventPage(after:limit:)``), so that an
/// event committing late is published too.
final class SharedChanges: Sendable {
    private struct State {
        var applied: Int?
        /// Events above `applied` already published.
        var above: Set<Int> = []
        /// Numbers this process drew for its own writes whose transactions have not ended (or whose events are not
        /// yet published), with when each was drawn: this process publishes them itself, so a reader of the log
        /// has nothing to find there. Counted only for ``ownWindow``: one left behind by a path that never
        /// settles it may delay publishing what is below it by that long, and never loses an event.
        var own: [Int: ContinuousClock.Instant] = [:]
        /// The highest head of the log a caller of ``behind(_:)`` has seen.
        var newest = 0
    }

    /// How long a number this process drew counts as its own to publish (``drew(_:)``): far beyond any write's
    /// transaction, short enough that a number never settled holds nothing up for long.
    let ownWindow: Duration

    init(ownWindow: Duration = .seconds(10)) {
        self.ownWindow = ownWindow
        (handedBack, handBack) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// Yields when numbers this process drew for writes still under way are handed back to the log
    /// (``abandoned(_:)``), so that the catch-up (``SharedChangesService``) reads the log for them: a write whose
    /// `COMMIT` was sent but not answered may have committed after all, and the log's notification of it was
    /// dropped here as this process's own (``accountedFor(_:)``).
    let handedBack: AsyncStream<Void>
    private let handBack: AsyncStream<Void>.Continuation

    private let state = Mutex(State())
    /// Reads of the log's head, shared by requests that arrive together.
    let head = SharedRead<Int>()
    /// Reads of the log itself (``RecordStore/catchUp()``), one at a time, each shared by every caller that asked
    /// for one while the one before it ran.
    let log = SharedRead<Void>()
    /// How long ``RecordStore/catchUp()`` waits for a read of the log: as long as for a connection of the pool.
    static let readLimit = Duration.seconds(4)
    /// How many times ``RecordStore/catchUp()`` read the log (for tests).
    let logReads = Atomic<Int>(0)

    /// Starts following at `sequence` (the log's settled head when the engine opened).
    func start(at sequence: Int) { state.withLock { $0.applied = sequence } }

    var isFollowing: Bool { state.withLock { $0.applied != nil } }

    /// Records that this process drew `sequence` for an event of its own, in a transaction still running: until it
    /// is published (``published(_:)``) or its write failed (``abandoned(_:)``), the log holds nothing there that
    /// another process wrote, so ``behind(_:)`` does not make requests read the log for it.
    func drew(_ sequence: Int) {
        state.withLock { state in
            guard let current = state.applied, sequence > current else { return }
            state.own[sequence] = .now
        }
    }

    /// Numbers drawn for writes of this process that failed (rolled back, or not known to have committed): the log
    /// decides what became of them, so the next catch-up reads it there.
    func abandoned(_ sequences: [Int]) {
        guard !sequences.isEmpty else { return }
        let wereOwn = state.withLock { state in
            sequences.reduce(false) { wereOwn, sequence in state.own.removeValue(forKey: sequence) != nil || wereOwn }
        }
        if wereOwn { handBack.yield() }
    }

    /// Whether every number of `range` (at most 64) was drawn by a write of this process still under way
    /// (``drew(_:)``, within ``ownWindow``): its event is published here when the write commits, and its write calls
    /// ``abandoned(_:)`` and wakes followers when it fails, so a follower of the log waits for it live instead of
    /// reading the log for it.
    func drewAll(_ range: Range<Int>) -> Bool {
        guard !range.isEmpty, range.count <= 64 else { return false }
        return state.withLock { state in
            let window = ContinuousClock.now - ownWindow
            return range.allSatisfy { state.own[$0].map { $0 > window } ?? false }
        }
    }

    /// Whether the event `sequence` needs no catch-up here: published already, or drawn by a write of this process
    /// still under way (within ``ownWindow``), which publishes it when it commits (and hands it back to the log,
    /// ``abandoned(_:)``, when it cannot say that it did: ``handedBack`` then wakes the catch-up, which finds it
    /// in the log if it committed after all). The log's notification of such a commit wakes nothing.
    func accountedFor(_ sequence: Int) -> Bool {
        state.withLock { state in
            if sequence <= (state.applied ?? 0) || state.above.contains(sequence) { return true }
            return state.own[sequence].map { $0 > ContinuousClock.now - ownWindow } ?? false
        }
    }

    /// Records that this process published its own event `sequence`.
    func published(_ sequence: Int) {
        state.withLock { state in
            state.own[sequence] = nil
            guard let current = state.applied, sequence > current else { return }
            state.above.insert(sequence)
            while state.above.remove(state.applied! + 1) != nil { state.applied! += 1 }
        }
    }

    /// ``behind(_:)`` with the highest head any caller has seen.
    fileprivate var behindSeen: Bool { behind(state.withLock { $0.newest }) }

    fileprivate var current: Int { state.withLock { $0.applied ?? 0 } }

    /// Whether the log needs reading with `newest` its head: a number after what was published (up to `newest` or
    /// the highest event published here, whichever is higher) that is neither published here nor drawn by a write of
    /// this process still under way. Such a number is another process's (or a write of this one that failed):
    /// committed since, or in flight, or rolled back, which only the log can tell. A number this process drew is
    /// published by the write itself when it commits, so while every number after `applied` is this process's
    /// own (one docketd under load), requests do not read the log. A number drawn outside
    /// ``RecordStore/writeEvents(scope:_:)``, or longer than ``ownWindow`` ago, is not counted as this process's.
    func behind(_ newest: Int) -> Bool {
        state.withLock { state in
            state.newest = max(state.newest, newest)
            let applied = state.applied ?? 0
            let upper = max(newest, state.above.max() ?? applied)
            guard upper > applied else { return false }
            let window = ContinuousClock.now - ownWindow
            if state.own.contains(where: { $0.key <= applied || $0.value <= window }) {
                state.own = state.own.filter { $0.key > applied && $0.value > window }
            }
            let known = state.above.count { $0 <= upper } + state.own.keys.count { $0 <= upper && !state.above.contains($0) }
            return upper - applied > known
        }
    }

    fileprivate func wasPublished(_ sequence: Int) -> Bool {
        state.withLock { $0.above.contains(sequence) || sequence <= ($0.applied ?? 0) }
    }

    /// `published`: events published by this read; `through`: every number up to it is published or can no
    /// longer commit.
    fileprivate func advance(published: [Int], through: Int) {
        state.withLock { state in
            state.above.formUnion(published)
            state.applied = max(state.applied ?? 0, through)
            let applied = state.applied!
            state.above = state.above.filter { $0 > applied }
            state.own = state.own.filter { $0.key > applied }
        }
    }

    /// The last sequence published here with nothing missing before it, or nil where only this process writes
    /// (it publishes each commit itself).
    var publishedUpTo: Int? { state.withLock { $0.applied } }
}

/// The event numbers one write of this process drew, over all the runs of its transaction (``RecordStore/writeEvents(scope:_:)``).
final class EventDraws: Sendable {
    private let numbers = Mutex<[Int]>([])
    func add(_ sequence: Int) { numbers.withLock { $0.append(sequence) } }
    var all: [Int] { numbers.withLock { $0 } }

    /// The draws of the write the current task runs, if it keeps them.
    @TaskLocal static var current: EventDraws?
}

extension RecordStore {
    /// Runs a write that appends events and returns them, keeping the numbers it draws as this process's own while
    /// it runs (``SharedChanges/drew(_:)``), so that requests answered meanwhile need not read the log for them.
    /// The caller must publish every returned event (``notify(_:)``) as soon as it can: until then its number keeps
    /// requests from reading the log for what is below it (for ``SharedChanges/ownWindow`` at most). Numbers drawn
    /// by runs of the transaction that did not commit, or by a write that failed, are handed back to the log
    /// (``SharedChanges/abandoned(_:)``).
    func writeEvents(
        scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> [ChangeEvent]
    ) async throws -> [ChangeEvent] {
        guard shared.isFollowing else { return try await storage.write(scope: scope, body) }
        let draws = EventDraws()
        let events: [ChangeEvent]
        do {
            events = try await EventDraws.$current.withValue(draws) { try await storage.write(scope: scope, body) }
        } catch {
            abandoned(draws.all)
            throw error
        }
        let committed = Set(events.map(\.sequence))
        abandoned(draws.all.filter { !committed.contains($0) })
        return events
    }

    /// Hands numbers drawn by a write that did not commit them back to the log (``SharedChanges/abandoned(_:)``),
    /// and wakes followers that may be waiting for them live.
    func abandoned(_ sequences: [Int]) {
        guard !sequences.isEmpty else { return }
        shared.abandoned(sequences)
        broadcaster.wake()
    }

    /// Publishes what other processes committed since this one last looked: every event of the log after
    /// ``SharedChanges``'s mark, in order, to the caches and followers here, reloading the catalog first when a
    /// change touched the schema. Called before each request is answered (so a cache is never staler than the
    /// last answered write, wherever it was written) and on each notification (so live followers hear of changes
    /// at once). Returns at once where only this process writes.
    ///
    /// Events above a number still in flight are published too (followers read what they miss from the log, and
    /// wait there for the number in flight); the mark stays below that number until it commits or can no longer.
    ///
    /// The read of the log is shared (``SharedChanges/log``): a caller waits for one that started after it asked,
    /// whose snapshot therefore holds every commit answered before the call. Callers that found the log ahead while
    /// a read ran share the next one: under writes on several instances, where a number of another's is nearly
    /// always in flight, the log is read once per read's length rather than once per request.
    func catchUp() async throws {
        guard shared.isFollowing else { return }
        let newest = try await shared.head.value { try await self.newestSequence() }
        guard shared.behind(newest) else { return }
        // Bounded as the head's read is: a read that does not end holds up every request waiting for it. The read
        // itself goes on for those that come later; it must never call catchUp() (it would wait for itself).
        let read: Void? = try await bounded(SharedChanges.readLimit) {
            try await self.shared.log.value { try await self.readOthersCommits() }
        }
        guard read != nil else {
            throw StorageUnavailable(reason: "the event log was not read within \(SharedChanges.readLimit)")
        }
    }

    /// What each request does before it is answered (``SharedChangesResponder``): ``catchUp()``, unless this process
    /// is alone on the database (``PostgresPresence``), where no other process commits anything to read.
    func catchUpBeforeRequest() async throws {
        guard !storage.isAlone else { return }
        try await catchUp()
    }

    /// The read behind ``catchUp()``, one at a time (``SharedChanges/log``).
    private func readOthersCommits() async throws {
        // What the read before this one published may have covered every head seen so far.
        guard shared.behindSeen else { return }
        shared.logReads.add(1, ordering: .relaxed)
        var cursor = shared.current
        var waiting = false
        while true {
            let page = try await eventPage(after: cursor, limit: 1_000, stoppingAtGaps: false)
            let fresh = page.events.filter { !shared.wasPublished($0.sequence) }
            if fresh.contains(where: { SchemaCatalog.sourceTables.contains($0.table) }) {
                try await reloadCatalog()
            }
            // Events this process wrote itself may come again: observers forget idempotently and followers
            // skip sequences they passed.
            for event in fresh { broadcaster.publish(event) }
            if !waiting {
                shared.advance(published: fresh.map(\.sequence), through: page.settledThrough)
                waiting = page.waiting
            } else {
                shared.advance(published: fresh.map(\.sequence), through: 0)
            }
            guard page.events.count == 1_000, let last = page.events.last else { break }
            cursor = last.sequence
        }
    }
}

/// One read shared by every caller that asked for it before it started: a caller never gets a value read
/// before it asked (it would miss a commit answered just before), and concurrent callers cost one read between
/// them. While a read runs, new callers queue for the next one, which starts when it ends.
final class SharedRead<Value: Sendable>: Sendable {
    private struct State {
        var running: (id: Int, task: Task<Value, any Error>)?
        var queued: (id: Int, task: Task<Value, any Error>)?
        var nextID = 0
    }

    private let state = Mutex(State())

    func value(_ read: @escaping @Sendable () async throws -> Value) async throws -> Value {
        let task = state.withLock { state -> Task<Value, any Error> in
            if let queued = state.queued { return queued.task }
            let id = state.nextID
            state.nextID += 1
            let previous = state.running?.task
            let task = Task {
                if let previous { _ = try? await previous.value }
                self.begin(id)
                defer { self.end(id) }
                return try await read()
            }
            if previous == nil {
                state.running = (id, task)
            } else {
                state.queued = (id, task)
            }
            return task
        }
        return try await task.value
    }

    /// The queued read starts: from now on callers wait for the one after it.
    private func begin(_ id: Int) {
        state.withLock { state in
            if let queued = state.queued, queued.id == id {
                state.running = queued
                state.queued = nil
            }
        }
    }

    private func end(_ id: Int) {
        state.withLock { state in
            if state.running?.id == id { state.running = nil }
        }
    }
}
