import Foundation
import Logging
import Synchronization
import Tracing

/// SQLite's one writer: the writes of the process wait in one queue, first come first served, and one task runs
/// them on the writer connection, one after the other with no hand-over between them. While writes are waiting,
/// several share one transaction (group commit): each after the first runs inside a savepoint of its own, so one that
/// fails is rolled back alone, and all are committed at once. No caller hears of its write before that commit:
/// a write that succeeded is answered only once the commit it is part of has succeeded, and fails with it otherwise.
///
/// Before, each write took an async lock (an actor hop in and out, a timer task for every write that had to wait,
/// and the lock handed to the next writer's task, which then had to be scheduled) and committed alone. Under a
/// steady stream of POSTs the writer's critical path was mostly that hand-over and the commit's WAL frames
/// (docs/performance.md).
///
/// A write still queued after ``timeout`` fails with ``StorageUnavailable`` (the write ahead of it is stuck); a
/// write whose caller is cancelled while it is queued leaves the queue with `CancellationError`. Once a write has
/// begun it runs to its end whatever happens to its caller: a transaction that began must commit or roll back.
final class SQLiteWriter: Sendable {
    /// How many writes share a transaction at most.
    static let batchLimit = 32
    /// How long a write may wait in the queue.
    let timeout: Duration

    private struct State: ~Copyable {
        var queue: [any QueuedWrite] = []
        /// The task running the queue exists.
        var running = false
        /// The task failing writes queued past ``timeout`` exists.
        var watching = false
        /// Set when the storage is closed: every write from then on fails with ``StorageUnavailable/closed``.
        var closed = false
        /// The writer's thread was let go (the storage is closed and the queue's task ended).
        var threadStopped = false
    }

    private let state = Mutex(State())
    /// The connection; replaced when a transaction on it could not be rolled back.
    private let connection: Mutex<SQLiteDirectConnection>
    private let path: String
    private let faults: StatementFaults
    private let logger: Logger
    /// The thread the queue's task runs on, one per storage.
    private let thread = SQLiteWriterThread()
    /// Until when the file's write lock is known to be held by another process: set when a transaction could not
    /// begin for it after the whole busy timeout, cleared when one begins. The writes queued then are answered with
    /// that failure at once (not a busy timeout each, one after another), and until then a write waits only
    /// ``contendedWaitMilliseconds`` for the lock; after it, the whole busy timeout again.
    private let contendedUntil = Mutex<ContinuousClock.Instant?>(nil)
    /// How long a write waits for another process's lock while it is known to be held (``contendedUntil``).
    static let contendedWaitMilliseconds: Int32 = 100
    /// How long the lock counts as known to be held after a write found it so.
    static let contendedWindow = Duration.seconds(5)

    deinit {
        // A storage let go without its close: its thread ends all the same.
        thread.stopWhenIdle()
    }

    init(connection: SQLiteDirectConnection, path: String, faults: StatementFaults, logger: Logger, timeout: Duration = .seconds(4)) {
        self.connection = Mutex(connection)
        self.path = path
        self.faults = faults
        self.logger = logger
        self.timeout = timeout
    }

    /// Whether the storage was closed (``markClosed()``).
    var isClosed: Bool { state.withLock { $0.closed } }

    /// How many writes are waiting (not yet begun).
    var waiting: Int { state.withLock { $0.queue.count } }

    /// From now on every write fails with ``StorageUnavailable/closed`` (the storage is closing).
    func markClosed() { state.withLock { $0.closed = true } }

    /// The writer connection, in WAL mode, waiting a bounded time for other processes' locks.
    static func open(path: String) throws -> SQLiteDirectConnection {
        // Another process holding the file's lock (a backup tool, sqlite3 in a shell) makes a write fail after a
        // bounded wait, answered 503, never hang it.
        let writer = try SQLiteDirectConnection.open(path: path, busyTimeoutMilliseconds: Int32(SQLiteStorage.busyTimeoutMilliseconds))
        do {
            _ = try writer.rows("PRAGMA journal_mode=WAL", [])
            _ = try writer.rows("PRAGMA synchronous=NORMAL", [])
            return writer
        } catch {
            writer.close()
            throw error
        }
    }

    /// Runs `body` in a write transaction (shared with other writes, each in its savepoint): its result once that
    /// transaction is committed; its error when it fails (rolled back) or when the commit fails.
    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withoutActuallyEscaping(body) { body in
            // The job lets go of `body` before its caller is resumed, so nothing holds it once this returns.
            let job = PendingWrite(body: body, closes: false)
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    job.begin(continuation)
                    enqueue(job)
                }
            } onCancel: {
                self.leave(job, with: CancellationError())
            }
        }
    }

    /// Runs `body` once every write queued before it has ended, outside any transaction (closing the storage); not
    /// cancellable, and bounded like a write.
    func last(_ body: @escaping @Sendable () async throws -> Void) async throws {
        let job = PendingWrite<Void>(body: { _ in try await body() }, closes: true)
        try await withCheckedThrowingContinuation { continuation in
            job.begin(continuation)
            enqueue(job)
        }
    }

    private func enqueue(_ job: any QueuedWrite) {
        let (start, onThread, watch) = state.withLock { state -> (Bool, Bool, Bool) in
            state.queue.append(job)
            defer { state.running = true; state.watching = true }
            return (!state.running, !state.threadStopped, !state.watching)
        }
        // Detached: the queue's task runs many callers' writes and must carry none's task-local values (each write
        // runs with its own caller's, see ``PendingWrite``). Once the storage is closed, the writes that still come
        // are refused on any thread.
        if start {
            if onThread {
                Task.detached(executorPreference: thread) { await self.run() }
            } else {
                Task.detached { await self.run() }
            }
        }
        if watch { Task.detached { await self.watch() } }
    }

    /// Takes a write out of the queue before it began, answering it with `error` (a cancelled caller, a timeout).
    private func leave(_ job: any QueuedWrite, with error: any Error) {
        let left = state.withLock { state -> Bool in
            guard let index = state.queue.firstIndex(where: { $0 === job }) else { return false }
            state.queue.remove(at: index)
            return true
        }
        if left { job.finish(error) }
    }

    /// The next write to run; nil (and the task ends) when none is waiting. With `joining`, only a write that may
    /// join the transaction in progress (not the storage's close).
    private func next(joining: Bool = false) -> (any QueuedWrite)? {
        state.withLock { state in
            guard let first = state.queue.first else {
                if !joining {
                    state.running = false
                    if state.closed && !state.threadStopped {
                        // The last task on the thread: it ends once this task has.
                        state.threadStopped = true
                        thread.stopWhenIdle()
                    }
                }
                return nil
            }
            if joining && first.closes { return nil }
            return state.queue.removeFirst()
        }
    }

    /// Fails the writes that have waited longer than ``timeout``, as long as any is waiting.
    private func watch() async {
        while true {
            let deadline = state.withLock { state -> ContinuousClock.Instant? in
                guard let oldest = state.queue.first else {
                    state.watching = false
                    return nil
                }
                return oldest.enqueued + timeout
            }
            guard let deadline else { return }
            // Nothing cancels this task; a sleep cut short only means looking again.
            try? await Task.sleep(until: deadline, clock: .continuous)
            let now = ContinuousClock.now
            let expired = state.withLock { state -> [any QueuedWrite] in
                let expired = state.queue.filter { $0.enqueued + timeout <= now }
                if !expired.isEmpty { state.queue.removeAll { $0.enqueued + timeout <= now } }
                return expired
            }
            for job in expired {
                job.finish(StorageUnavailable(reason: "writes have waited \(timeout) for the one before them"))
            }
        }
    }

    /// Runs the queue until it is empty.
    private func run() async {
        while let first = next() {
            if first.closes {
                await first.runAlone()
            } else {
                await transaction(startingWith: first)
            }
        }
    }

    /// One transaction: `first`, then up to half of the writes waiting (at most ``batchLimit`` in all), each after
    /// `first` in a savepoint.
    private func transaction(startingWith first: any QueuedWrite) async {
        if isClosed {
            first.finish(StorageUnavailable.closed)
            return
        }
        var connection = self.connection.withLock { $0 }
        if connection.isClosed {
            // Closed after a failed rollback and not yet opened again.
            do {
                connection = try Self.open(path: path)
            } catch {
                first.finish(StorageUnavailable(reason: "the database file cannot be opened for writing"))
                return
            }
            self.connection.withLock { $0 = connection }
        }
        let now = ContinuousClock.now
        let known = contendedUntil.withLock { $0 }
        // Set on every transaction (a field of the connection): the connection may have been opened again.
        connection.setBusyTimeout(
            milliseconds: known.map { now < $0 } == true ? Self.contendedWaitMilliseconds : Int32(SQLiteStorage.busyTimeoutMilliseconds)
        )
        do {
            let begin = SQLiteDirectRunner(connection: connection, faults: faults)
            _ = try await begin.rows(SQLFragment(StorageDialect.sqlite.beginTransaction))
        } catch {
            guard let lock = error as? SQLiteDirectError, lock.isBusy else {
                first.finish(error)
                return
            }
            contendedUntil.withLock { $0 = .now + Self.contendedWindow }
            if known == nil {
                logger.warning("Another process holds the database file's write lock; writes are answered 503 until it lets go")
            }
            // The writes that waited meanwhile would each wait for the same lock: they are answered now.
            let waiting = state.withLock { state -> [any QueuedWrite] in
                let waiting = state.queue.filter { !$0.closes }
                state.queue.removeAll { !$0.closes }
                return waiting
            }
            first.finish(error)
            for write in waiting { write.finish(error) }
            return
        }
        if known != nil {
            contendedUntil.withLock { $0 = nil }
            logger.notice("The database file's write lock is had again; writes go on")
        }
        let db = SQLExecutor(
            runner: SQLiteDirectRunner(connection: connection, faults: faults, withinTransaction: true), dialect: .sqlite
        )
        // The first write needs no savepoint: when it fails, the whole transaction is rolled back.
        do {
            try await first.run(db)
            try Self.stillInTransaction(connection)
        } catch {
            await rollBack(db, connection: connection)
            first.finish(error)
            return
        }
        var done = [first]
        // Writes refused on their own: answered after the commit, since what refused them may be an earlier write
        // of this transaction that is not committed yet.
        var refused: [(write: any QueuedWrite, error: any Error)] = []
        // Half of the writes in hand, rounded up (this one and half of those waiting now), share the transaction:
        // the others run in the next while this one's answers go out and their callers' next requests are read.
        // Taking every waiting write made the two alternate (the writer busy while every request waited in it, then
        // request work while it waited for writes): 16 callers writing at once kept the machine 68 % busy
        // (docs/performance.md).
        let limit = Swift.min(Self.batchLimit, Swift.max(1, (state.withLock { $0.queue.count } + 2) / 2))
        while done.count + refused.count < limit, let write = next(joining: true) {
            do {
                try await db.run("SAVEPOINT docket_write")
            } catch {
                // None of these is answered yet: they run again in a transaction of their own.
                await rollBack(db, connection: connection)
                requeue(done + refused.map(\.write) + [write])
                return
            }
            do {
                try await write.run(db)
                try Self.stillInTransaction(connection)
                try await db.run("RELEASE docket_write")
                done.append(write)
            } catch let failure {
                do {
                    // SQLite ends the whole transaction on some failures (a full disk, a trigger's RAISE(ROLLBACK)).
                    try Self.stillInTransaction(connection)
                    try await db.run("ROLLBACK TO docket_write")
                    try await db.run("RELEASE docket_write")
                    refused.append((write, failure))
                } catch {
                    // What the transaction held is gone: this write is answered with its error, and the others,
                    // none of which is answered yet, run again in a transaction of their own.
                    await rollBack(db, connection: connection)
                    write.finish(failure)
                    requeue(done + refused.map(\.write))
                    return
                }
            }
        }
        do {
            try await db.run("COMMIT")
        } catch {
            await rollBack(db, connection: connection)
            for ran in done { ran.finish(error) }
            for (other, _) in refused { other.finish(error) }
            return
        }
        for ran in done { ran.finish(nil) }
        for (other, error) in refused { other.finish(error) }
    }

    /// Throws when the connection's transaction has ended behind the writer's back (SQLite rolled it back).
    private static func stillInTransaction(_ connection: SQLiteDirectConnection) throws {
        guard connection.inTransaction else {
            throw StorageUnavailable(reason: "the database ended the write's transaction")
        }
    }

    /// Puts writes that ran in a transaction that was then lost back at the head of the queue, in their order.
    /// They wait anew: the queue's bound counts from now.
    private func requeue(_ writes: [any QueuedWrite]) {
        guard !writes.isEmpty else { return }
        let now = ContinuousClock.now
        for write in writes { write.enqueued = now }
        let watch = state.withLock { state -> Bool in
            state.queue.insert(contentsOf: writes, at: 0)
            defer { state.watching = true }
            return !state.watching
        }
        if watch { Task.detached { await self.watch() } }
    }

    /// Rolls the transaction back, if there still is one; when that fails, the connection may still be inside it
    /// (holding the file's write lock), so it is closed, and opened again here or by the next write.
    private func rollBack(_ db: SQLExecutor, connection: SQLiteDirectConnection) async {
        guard connection.inTransaction else { return }
        do {
            try await db.run("ROLLBACK")
        } catch {
            logger.error("A write could not be rolled back; the writer connection is opened again", metadata: ["error": "\(error)"])
            connection.close()
            do {
                let fresh = try Self.open(path: path)
                self.connection.withLock { $0 = fresh }
            } catch {
                logger.error("The writer connection could not be opened again; the next write tries", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Closes the connection (the storage's close, once no write is left).
    func closeConnection() {
        connection.withLock { $0 }.close()
    }
}

/// A write in ``SQLiteWriter``'s queue, whatever it returns.
private protocol QueuedWrite: AnyObject, Sendable {
    /// When it began to wait (again, when it was put back).
    var enqueued: ContinuousClock.Instant { get set }
    /// Whether it closes the storage (runs alone, outside a transaction).
    var closes: Bool { get }
    /// Runs the write's body, keeping its result for ``finish(_:)``.
    func run(_ db: SQLExecutor) async throws
    /// Runs a write that ``closes`` and answers it.
    func runAlone() async
    /// Answers the caller: its result (nil) or `error`; later calls do nothing.
    func finish(_ error: (any Error)?)
}

private final class PendingWrite<T: Sendable>: QueuedWrite {
    private struct State {
        var body: (@Sendable (SQLExecutor) async throws -> T)?
        var continuation: CheckedContinuation<T, any Error>?
        var result: T?
    }

    private let waitingSince = Mutex(ContinuousClock.now)
    var enqueued: ContinuousClock.Instant {
        get { waitingSince.withLock { $0 } }
        set { waitingSince.withLock { $0 = newValue } }
    }
    let closes: Bool
    private let state: Mutex<State>
    /// The caller's tracer and trace context, for the statements' spans (the body runs in the queue's task).
    private let tracer = Traces.tracer
    private let context = ServiceContext.current

    init(body: @escaping @Sendable (SQLExecutor) async throws -> T, closes: Bool) {
        self.closes = closes
        state = Mutex(State(body: body))
    }

    func begin(_ continuation: CheckedContinuation<T, any Error>) {
        state.withLock { $0.continuation = continuation }
    }

    func run(_ db: SQLExecutor) async throws {
        guard let body = state.withLock({ $0.body }) else { return }
        let value = try await Traces.$tracer.withValue(tracer) {
            try await ServiceContext.$current.withValue(context) { try await body(db) }
        }
        state.withLock { $0.result = value }
    }

    func runAlone() async {
        guard let body = state.withLock({ $0.body }) else { return }
        do {
            let value = try await body(SQLExecutor(runner: NoStatements(), dialect: .sqlite))
            state.withLock { $0.result = value }
            finish(nil)
        } catch {
            finish(error)
        }
    }

    func finish(_ error: (any Error)?) {
        let (continuation, result) = state.withLock { state in
            defer { state = State() }
            return (state.continuation, state.result)
        }
        guard let continuation else { return }
        if let error {
            continuation.resume(throwing: error)
        } else if let result {
            continuation.resume(returning: result)
        } else {
            continuation.resume(throwing: StorageUnavailable(reason: "a write ended without a result"))
        }
    }
}

/// The executor handed to work that runs no statement (the storage's close).
private struct NoStatements: SQLRunner {
    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        throw StorageUnavailable(reason: "no statement runs here")
    }
}

/// The thread SQLite's writes run on: ``SQLiteWriter``'s task prefers it, so that the writer's statements, which
/// call SQLite on the calling thread (a commit's WAL writes, a checkpoint, a wait of up to the busy timeout for
/// another process's lock), never hold a thread of Swift's cooperative pool, where request work runs, and so that
/// the writer never waits behind that work for a thread. One per storage; what a write's body awaits elsewhere (an
/// actor) comes back here. The thread ends once the storage is closed and its last task has run.
final class SQLiteWriterThread: TaskExecutor, @unchecked Sendable {
    /// Guards `jobs` and `stopping`.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    init() {
        // The thread holds the executor until it ends.
        let thread = Thread { self.serve() }
        thread.name = "docketd-sqlite-writer"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once no job is left (no task prefers it any more).
    func stopWhenIdle() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func serve() {
        var ready: [UnownedJob] = []
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            swap(&ready, &jobs)
            condition.unlock()
            for job in ready { job.runSynchronously(on: asUnownedTaskExecutor()) }
            ready.removeAll(keepingCapacity: true)
        }
    }
}
