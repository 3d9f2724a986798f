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
    }

    private let state = Mutex(State())
    private let reading = AsyncLock()
    /// Reads of the log's head, shared by requests that arrive together.
    let head = SharedRead()

    /// Starts following at `sequence` (the log's settled head when the engine opened).
    func start(at sequence: Int) { state.withLock { $0.applied = sequence } }

    var isFollowing: Bool { state.withLock { $0.applied != nil } }

    /// Records that this process published its own event `sequence`.
    func published(_ sequence: Int) {
        state.withLock { state in
            guard let current = state.applied, sequence > current else { return }
            state.above.insert(sequence)
            while state.above.remove(state.applied! + 1) != nil { state.applied! += 1 }
        }
    }

    fileprivate var current: Int { state.withLock { $0.applied ?? 0 } }

    /// Whether the log needs reading with `newest` its head: something after what was published, or a number
    /// below a published event that may have committed since.
    fileprivate func behind(_ newest: Int) -> Bool {
        state.withLock { state in
            let applied = state.applied ?? 0
            return newest > max(applied, state.above.max() ?? applied) || !state.above.isEmpty
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
        }
    }

    /// The last sequence published here with nothing missing before it, or nil where only this process writes
    /// (it publishes each commit itself).
    var publishedUpTo: Int? { state.withLock { $0.applied } }

    fileprivate func exclusively<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await reading.withLock(body)
    }
}

extension RecordStore {
    /// Publishes what other processes committed since this one last looked: every event of the log after
    /// ``SharedChanges``'s mark, in order, to the caches and followers here, reloading the catalog first when a
    /// change touched the schema. Called before each request is answered (so a cache is never staler than the
    /// last answered write, wherever it was written) and on each notification (so live followers hear of changes
    /// at once). Returns at once where only this process writes.
    ///
    /// Events above a number still in flight are published too (followers read what they miss from the log, and
    /// wait there for the number in flight); the mark stays below that number until it commits or can no longer.
    func catchUp() async throws {
        guard shared.isFollowing else { return }
        let newest = try await shared.head.value { try await self.newestSequence() }
        guard shared.behind(newest) else { return }
        try await shared.exclusively {
            var cursor = self.shared.current
            var waiting = false
            while true {
                let page = try await self.eventPage(after: cursor, limit: 1_000, stoppingAtGaps: false)
                let fresh = page.events.filter { !self.shared.wasPublished($0.sequence) }
                if fresh.contains(where: { SchemaCatalog.sourceTables.contains($0.table) }) {
                    try await self.reloadCatalog()
                }
                // Events this process wrote itself may come again: observers forget idempotently and followers
                // skip sequences they passed.
                for event in fresh { self.broadcaster.publish(event) }
                if !waiting {
                    self.shared.advance(published: fresh.map(\.sequence), through: page.settledThrough)
                    waiting = page.waiting
                } else {
                    self.shared.advance(published: fresh.map(\.sequence), through: 0)
                }
                guard page.events.count == 1_000, let last = page.events.last else { break }
                cursor = last.sequence
            }
        }
    }
}

/// One read shared by every caller that asked for it before it started: a caller never gets a value read
/// before it asked (it would miss a commit answered just before), and concurrent callers cost one read between
/// them. While a read runs, new callers queue for the next one, which starts when it ends.
final class SharedRead: Sendable {
    private struct State {
        var running: (id: Int, task: Task<Int, any Error>)?
        var queued: (id: Int, task: Task<Int, any Error>)?
        var nextID = 0
    }

    private let state = Mutex(State())

    func value(_ read: @escaping @Sendable () async throws -> Int) async throws -> Int {
        let task = state.withLock { state -> Task<Int, any Error> in
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
