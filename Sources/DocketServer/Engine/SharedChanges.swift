import Synchronization

/// How far this process has published the event log's events to its broadcaster, when other processes write
/// the same database (PostgreSQL shared by several docketd).
///
/// Every event up to `applied` has been published here: by the writing request itself for this process's
/// commits, by ``RecordStore/catchUp()`` for everyone else's. Writes are serialised across processes (see
/// ``PostgresStorage``), so sequences commit in order and reading the log after `applied` never passes an
/// event that commits later with a smaller number.
final class SharedChanges: Sendable {
    private let applied = Mutex<Int?>(nil)
    private let reading = AsyncLock()
    /// Reads of the log's head, shared by requests that arrive together.
    let head = SharedRead()

    /// Starts following at `sequence` (the log's head when the engine opened).
    func start(at sequence: Int) { applied.withLock { $0 = sequence } }

    var isFollowing: Bool { applied.withLock { $0 != nil } }

    /// Records that this process published its own event `sequence` (advances only when nothing is missing
    /// before it; otherwise ``RecordStore/catchUp()`` reads the gap).
    func published(_ sequence: Int) {
        applied.withLock { value in
            if let current = value, sequence == current + 1 { value = sequence }
        }
    }

    fileprivate var current: Int { applied.withLock { $0 ?? 0 } }

    /// The last sequence published here, or nil where only this process writes (it publishes each commit itself).
    var publishedUpTo: Int? { applied.withLock { $0 } }

    fileprivate func advance(to sequence: Int) {
        applied.withLock { value in value = max(value ?? 0, sequence) }
    }

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
    func catchUp() async throws {
        guard shared.isFollowing else { return }
        let head = try await shared.head.value { try await self.latestSequence() }
        guard head > shared.current else { return }
        try await shared.exclusively {
            while self.shared.current < head {
                let events = try await self.events(after: self.shared.current, limit: 1_000)
                guard let last = events.last else { break }
                if events.contains(where: { SchemaCatalog.sourceTables.contains($0.table) }) {
                    try await self.reloadCatalog()
                }
                // Events this process wrote itself may come again: observers forget idempotently and followers
                // skip sequences they passed.
                for event in events { self.broadcaster.publish(event) }
                self.shared.advance(to: last.sequence)
            }
            self.shared.advance(to: head)
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
