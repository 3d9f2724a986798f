/// A first-come, first-served asynchronous mutex (or, with more than one permit, a semaphore): PostgreSQL's
/// writers, a few of a process at once (see ``PostgresStorage``). SQLite's one writer has a queue of its own that
/// also runs waiting writes in one transaction (``SQLiteWriter``). A wait is bounded and cancellable: a writer still queued after
/// `timeout` gets ``StorageUnavailable`` (the write ahead of it is stuck on a database that does not answer), and a
/// cancelled one (its client went away) leaves the queue at once.
actor AsyncLock {
    /// How many holders may be inside at once.
    private let permits: Int
    private var holders = 0
    private var waiters: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextID = 0

    init(permits: Int = 1) {
        self.permits = max(1, permits)
    }

    /// Takes the lock (one permit), waiting at most `timeout`.
    func lock(timeout: Duration) async throws {
        if holders < permits {
            holders += 1
            return
        }
        let id = nextID
        nextID += 1
        let expiry = Alarms.shared.set(after: timeout) { [weak self] in
            guard let self else { return }
            Task { await self.fail(id, with: StorageUnavailable(reason: "writes have waited \(timeout) for the one before them")) }
        }
        defer { Alarms.shared.cancel(expiry) }
        try await withTaskCancellationHandler {
            try Task.checkCancellation()
            try await withCheckedThrowingContinuation { continuation in waiters.append((id, continuation)) }
        } onCancel: {
            Task { await self.fail(id, with: CancellationError()) }
        }
    }

    /// Ends a wait that is still queued (it may have been handed the lock meanwhile: then nothing happens).
    private func fail(_ id: Int, with error: any Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        waiters.remove(at: index).continuation.resume(throwing: error)
    }

    func unlock() {
        if waiters.isEmpty {
            holders -= 1
        } else {
            // The permit passes to the first waiter.
            waiters.removeFirst().continuation.resume()
        }
    }

    /// Runs `body` holding the lock; throws ``StorageUnavailable`` when the lock was not had within `timeout`.
    nonisolated func withLock<T: Sendable>(
        timeout: Duration = .seconds(4), _ body: @Sendable () async throws -> T
    ) async throws -> T {
        try await lock(timeout: timeout)
        do {
            let result = try await body()
            await unlock()
            return result
        } catch {
            await unlock()
            throw error
        }
    }
}
