import NIOCore
import SQLKit
import SQLiteKit
import Synchronization

/// Runs SQL for the engine. Reads may run concurrently; writes run one at a time, each in a transaction.
protocol Storage: Sendable {
    var dialect: StorageDialect { get }
    /// Runs `body` with a connection suitable for reading.
    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T
    /// Runs `body` in a write transaction: committed when it returns, rolled back when it throws. `scope` says what
    /// the transaction must have to itself where several processes write the same database (see ``WriteScope``).
    /// A body may be run more than once (its transaction lost and run again, only the last run committed): it changes
    /// nothing but the database, or only what a later run overwrites.
    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T
    /// Runs one self-contained statement that writes outside the ordered write path: no event, nothing read
    /// first (an atomic upsert of a counter). PostgreSQL runs it at once, without the write lock; SQLite queues it
    /// with the other writes.
    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T
    /// Closes every connection; no call may follow.
    func close() async throws
    /// Wake-ups whenever some process appended to the event log, for databases that several processes may
    /// share (PostgreSQL); nil where only this process writes (SQLite). A wake-up also follows every
    /// (re)connection of the listener, since changes may have been missed meanwhile. A notification that names
    /// an event's number for which `ignoring` is true (published here already, or this process's own, drawn by a
    /// write still under way that publishes it) wakes nothing.
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>?
    /// Failures planned by tests for statements of this storage (nothing is planned otherwise).
    var faults: StatementFaults { get }
    /// The newest sequence in the event log (0 when it is empty), whether or not a smaller one is still in flight.
    /// Shared databases read it before answering each batch of requests (``RecordStore/catchUp()``), so a storage
    /// may make it cheaper than a plain read.
    func latestEventSequence() async throws -> Int
    /// Whether no other process uses the database now (``PostgresPresence``): requests then need not read the
    /// event log's head before they are answered. False where that cannot be known.
    var isAlone: Bool { get }
    /// Becomes alone (``isAlone``) if no other process uses the database, after `catchingUp` has published what
    /// others committed before they left. Called every second by the follower of the log (``SharedChangesService``).
    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async
}

/// What a write transaction has to itself on a database that several processes write (PostgreSQL). SQLite runs one
/// write at a time whatever the scope.
enum WriteScope: Sendable, Equatable {
    /// No other exclusive write of any process runs meanwhile (one advisory lock, held to the commit): for the rare
    /// writes that read, decide and write across many rows (schema changes, users and credentials, sessions, the
    /// notifier's bookkeeping, retention).
    case exclusive
    /// Only the rows it writes: a delete, or an update in a transaction, locks its record's row as it first reads it
    /// (`SELECT … FOR UPDATE OF`, ``RecordStore/SelectPlan/run(sysID:limit:offset:count:locking:db:)``); an update
    /// without a transaction writes the row in one statement only if it is still the version it read. Two writes of one
    /// record follow each other and see each other's result, while writes of other records (and every insert) go on
    /// in parallel.
    case rows
}

extension Storage {
    /// Whether other processes may write the same database.
    var isShared: Bool { dialect == .postgres }

    /// Runs `body` in an exclusive write transaction (``WriteScope/exclusive``).
    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await write(scope: .exclusive, body)
    }

    func latestEventSequence() async throws -> Int {
        try await read { db in try await db.integer(SQLFragment(StorageDialect.newestEventSequenceSQL)) }
    }

    var isAlone: Bool { false }

    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async {}

    /// Wake-ups for every append to the event log (``logSignals(ignoring:)``, ignoring none).
    func logSignals() -> AsyncStream<Void>? { logSignals(ignoring: { _ in false }) }
}

/// Executes serialised statements on one connection of some driver.
protocol SQLRunner: Sendable {
    func rows(_ sql: SQLFragment) async throws -> [ResultRow]
    /// Runs `sql` as the last statement of the transaction it is in (``SQLExecutor/lastRows(_:)``): a runner whose
    /// transaction has not begun yet may run it on its own, which commits it (``DeferredTransaction``).
    func lastRows(_ sql: SQLFragment) async throws -> [ResultRow]
    /// Whether the statement run with ``lastRows(_:)`` ran on its own (``DeferredTransaction``): once it has
    /// returned, it has committed, and no rollback can undo it. A runner that wraps another must say what that one
    /// says (``MeasuredStorage``'s does); the default says no, and a create whose answer is lost is then a failure.
    var ranAlone: Bool { get }
}

extension SQLRunner {
    func lastRows(_ sql: SQLFragment) async throws -> [ResultRow] { try await rows(sql) }
    var ranAlone: Bool { false }
}

/// A connection and its dialect, handed to engine code for the span of one read or one transaction.
struct SQLExecutor: Sendable {
    let runner: any SQLRunner
    let dialect: StorageDialect

    /// Runs a statement and returns its rows.
    func rows(_ sql: SQLFragment) async throws -> [ResultRow] { try await runner.rows(sql) }

    /// Runs a statement that returns no rows.
    func run(_ sql: SQLFragment) async throws { _ = try await runner.rows(sql) }

    /// Runs a statement and returns its rows, telling the storage that the transaction runs no statement after it
    /// (the caller has checked that nothing after it can fail or run SQL): where it is also the transaction's
    /// first, it runs on its own, without `BEGIN` and `COMMIT` (``DeferredTransaction``), and has committed when
    /// it returns. Elsewhere the same as ``rows(_:)``.
    func lastRows(_ sql: SQLFragment) async throws -> [ResultRow] { try await runner.lastRows(sql) }

    /// Whether the transaction's statement run with ``lastRows(_:)`` ran on its own: after it returned, the write
    /// has committed, and no rollback can undo it.
    var committedAlone: Bool { runner.ranAlone }

    /// Runs `body` in a transaction on this connection: the statements of `first` (a lock to take), then `body`;
    /// committed when it returns, rolled back when anything throws. `dialect.beginTransaction` opens it. When
    /// the rollback fails too, ``RollbackFailed`` says so: the connection may still be inside the transaction
    /// (holding its locks) and must not be used again.
    ///
    /// With nothing to run `first`, the transaction begins with the body's first statement
    /// (``DeferredTransaction``): a body that runs none costs no round trip, and one whose only statement is run
    /// with ``lastRows(_:)`` runs it on its own, one round trip instead of three.
    func transaction<T: Sendable>(
        first: [SQLFragment] = [], _ body: @Sendable (SQLExecutor) async throws -> T
    ) async throws -> T {
        let deferred = DeferredTransaction(base: runner, begin: SQLFragment(dialect.beginTransaction))
        if !first.isEmpty { try await deferred.begin() }
        do {
            for statement in first { try await run(statement) }
            let result = try await body(SQLExecutor(runner: deferred, dialect: dialect))
            if deferred.isOpen {
                try await run("COMMIT")
                DrawnEvents.current?.committed()
            }
            return result
        } catch let failure {
            guard deferred.isOpen else { throw failure }
            do {
                try await run("ROLLBACK")
            } catch {
                throw RollbackFailed(cause: failure)
            }
            throw failure
        }
    }

    /// Runs a statement that returns one integer (a count).
    func integer(_ sql: SQLFragment) async throws -> Int {
        try await rows(sql).first?.first.intValue ?? 0
    }
}

/// A transaction that begins with its first statement (``SQLExecutor/transaction(first:_:)``). Its body runs its
/// statements one after another on one connection. `BEGIN` goes before the first of them, unless that one is run
/// as the transaction's last (``SQLExecutor/lastRows(_:)``): then it runs on its own, which commits it, and the
/// transaction is over.
final class DeferredTransaction: SQLRunner {
    private enum Phase {
        /// Nothing run yet: no `BEGIN` sent.
        case waiting
        /// `BEGIN` sent: the transaction ends with `COMMIT` or `ROLLBACK`.
        case open
        /// Its only statement ran on its own: committed if it succeeded, nothing done if the server refused it,
        /// unknown if the connection broke while it ran (as for a `COMMIT` whose answer never came).
        case over
    }

    private let base: any SQLRunner
    private let beginStatement: SQLFragment
    private let phase = Mutex(Phase.waiting)

    init(base: any SQLRunner, begin: SQLFragment) {
        self.base = base
        self.beginStatement = begin
    }

    /// Whether `BEGIN` was sent: the transaction must end with `COMMIT` or `ROLLBACK`.
    var isOpen: Bool { phase.withLock { $0 == .open } }

    /// Whether its only statement was run on its own (``lastRows(_:)``): once that has returned, it has committed.
    var ranAlone: Bool { phase.withLock { $0 == .over } }

    /// Sends `BEGIN` unless it was sent.
    func begin() async throws {
        switch phase.withLock({ $0 }) {
        case .waiting:
            _ = try await base.rows(beginStatement)
            phase.withLock { $0 = .open }
        case .open:
            break
        case .over:
            throw StatementAfterLast()
        }
    }

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try await begin()
        return try await base.rows(sql)
    }

    func lastRows(_ sql: SQLFragment) async throws -> [ResultRow] {
        let alone = phase.withLock { phase in
            guard phase == .waiting else { return false }
            phase = .over
            return true
        }
        return try await alone ? base.rows(sql) : rows(sql)
    }
}

/// A statement ran to its end, and a value of its answer could not be read: one the driver cannot decode (a fault of
/// the driver or of Docket's code), or one beyond what docketd reads (a sum past 64 bits, which a request can cause:
/// ``StorageDialect/isIntegerOverflow(_:)`` recognises it by its description, which is the cause's). Where the
/// statement ran on its own it has committed (``SQLExecutor/committedAlone``).
struct UndecodableAnswer: Error, CustomStringConvertible {
    let cause: any Error
    var description: String { "\(cause)" }
}

/// A statement came after the one its transaction ran as its last (``SQLExecutor/lastRows(_:)``), which had
/// committed on its own: a fault of the engine's code, never of a request.
struct StatementAfterLast: Error, CustomStringConvertible {
    var description: String { "A statement came after the one run as its transaction's last" }
}

/// Runs `body` to its end even when the calling task is cancelled: a transaction that began must commit or roll
/// back. In a cancelled task no SQLite statement runs at all (SQLiteNIO runs them on NIO's thread pool, which drops
/// a cancelled task's work), a ROLLBACK and the connection's close included, so a write cancelled half-way would leave
/// the one writer connection inside its transaction and every later write failing. Used by the storages' `write`,
/// once the write holds its lock: until then a cancelled caller only leaves the queue.
func runToCompletion<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
    // The task is awaited before this returns, cancelled or not, so `body` does not outlive the call.
    try await withoutActuallyEscaping(body) { body in
        try await Task { try await body() }.value
    }
}

/// A transaction failed and so did its rollback: its connection is to be discarded (see
/// ``SQLExecutor/transaction(first:_:)``). `cause` is what made the transaction fail.
struct RollbackFailed: Error, CustomStringConvertible {
    let cause: any Error
    var description: String { "A transaction failed and could not be rolled back: \(cause)" }
}

/// How to read a column.
enum ColumnKind: Sendable {
    case text
    case integer
    case real
}

/// A row as a driver hands it over, read by column name. Each storage converts its driver's values to
/// ``SQLValue`` itself, with no Decoder round trip.
protocol StorageRow: Sendable {
    /// The first column's value (for single-value queries).
    var firstValue: SQLValue { get }
    /// One column as a driver-neutral value; `kind` is the column's declared kind, a hint for drivers that
    /// need one.
    func value(at column: String, kind: ColumnKind) throws -> SQLValue
    /// One column as raw bytes (blobs; text as its UTF-8), as the driver holds them; nil for NULL.
    func buffer(at column: String) throws -> ByteBuffer?
}

/// A result row of any storage, read by column name.
struct ResultRow: Sendable {
    let row: any StorageRow

    init(_ row: any StorageRow) { self.row = row }

    /// The first column's value (for single-value queries).
    var first: SQLValue { row.firstValue }

    /// One column as a driver-neutral value.
    func value(at column: String, kind: ColumnKind) throws -> SQLValue { try row.value(at: column, kind: kind) }

    /// One column as raw bytes (blobs; text as its UTF-8); nil for NULL.
    func bytes(at column: String) throws -> [UInt8]? { try row.buffer(at: column).map { Array($0.readableBytesView) } }

    /// One column as raw bytes without a copy (large blobs); nil for NULL.
    func buffer(at column: String) throws -> ByteBuffer? { try row.buffer(at: column) }
}

/// The database cannot be used right now: unreachable, restarting, its connections cut, locked by another
/// process past the wait, out of space. Neither the caller's fault nor an answer: every dialect says 503 with
/// `Retry-After` in its own error shape, never "not found", "invalid token" or 401.
struct StorageUnavailable: Error, CustomStringConvertible, Sendable {
    /// Why, in a few words (never a password: locations are redacted).
    let reason: String
    /// The database answered, but a lock another writer held was not had in time (PostgreSQL's `lock_timeout`,
    /// SQLite's busy timeout): a wait that may succeed if made again, where an outage would not. Never set for a
    /// failure that comes without waiting (SQLite's `SQLITE_LOCKED`), which a retry would only repeat at once.
    var lockWait = false

    /// Seconds a client is asked to wait (`Retry-After`).
    static let retryAfterSeconds = 2
    static var retryAfter: String { String(retryAfterSeconds) }

    var description: String { "The database is unavailable: \(reason)" }

    /// For work that outlives the storage (a task still finishing while docketd stops): refused, never run on a
    /// connection that was closed or opened again behind the stop.
    static let closed = StorageUnavailable(reason: "the database was closed (docketd is stopping)")

    /// The error as an outage, when it is one; nil for errors of the statement itself (a constraint, a bad
    /// value), which are answers.
    static func classify(_ error: any Error) -> StorageUnavailable? {
        if let error = error as? StorageUnavailable { return error }
        if let error = error as? SQLiteError { return classifySQLite(error) }
        if let error = error as? SQLiteDirectError { return classifySQLite(error) }
        return classifyPostgres(error)
    }

    private static func classifySQLite(_ error: SQLiteDirectError) -> StorageUnavailable? {
        guard error.isOutage else { return nil }
        if error.isLock {
            return StorageUnavailable(reason: "the database file is locked by another process", lockWait: error.isBusy)
        }
        return StorageUnavailable(reason: "the database file cannot be written (\(error.message))")
    }

    private static func classifySQLite(_ error: SQLiteError) -> StorageUnavailable? {
        switch error.reason {
        case .busy, .busyTimeout, .busyInRecovery, .busyInSnapshot:
            return StorageUnavailable(reason: "the database file is locked by another process", lockWait: true)
        case .locked, .lockedBySharedCache, .lockedVirtualTable:
            return StorageUnavailable(reason: "the database file is locked by another process")
        case .ioError, .readOnly, .readonlyInRecovery, .readonlyCantLock, .readonlyInRollback, .readonlyBackingMoved,
            .readonlyDirectory, .full, .cantOpen, .cantOpenDirectory, .cantOpenInvalidPath, .cantOpenCygwinPath,
            .cantOpenUnfollowedSymlink, .permission, .noMemory:
            return StorageUnavailable(reason: "the database file cannot be written (\(error.reason))")
        default:
            if "\(error.reason)".hasPrefix("ioError") { return StorageUnavailable(reason: "the database file cannot be read or written") }
            return nil
        }
    }
}

/// Tests only: failures planned for the statements a storage runs, its own `BEGIN`, `COMMIT` and `ROLLBACK`
/// included (a commit that fails, a rollback that fails). One atomic load per statement while none is planned.
final class StatementFaults: Sendable {
    private let armed = Atomic<Bool>(false)
    private let planned = Mutex<[(matches: @Sendable (String) -> Bool, error: (any Error)?)]>([])
    private let observers = Mutex<[@Sendable (String) -> Void]>([])
    private let lostAnswers = Mutex<[@Sendable (String) -> Bool]>([])
    private let spoiledAnswers = Mutex<[@Sendable (String) -> Bool]>([])
    private let heldAnswers = Mutex<[(matches: @Sendable (String) -> Bool, hold: @Sendable () async -> Void)]>([])

    /// Whether any fault or observer is planned (the runners look before anything slower).
    var isArmed: Bool { armed.load(ordering: .relaxed) }

    /// Fails the next statement whose SQL text (without its bound values) satisfies `matches`, once, as an
    /// unreachable database would, or with `error` when given (a statement the database refused).
    func failNext(_ matches: @escaping @Sendable (String) -> Bool, with error: (any Error)? = nil) {
        planned.withLock { $0.append((matches, error)) }
        armed.store(true, ordering: .sequentiallyConsistent)
    }

    /// Runs the next statement whose SQL text satisfies `matches`, once, and then gives none of its rows back, as a
    /// driver that cannot read an answer would: the statement has done its work (committed, when it ran on its own:
    /// ``SQLExecutor/lastRows(_:)``), and its caller cannot tell what it returned.
    func loseAnswerOfNext(_ matches: @escaping @Sendable (String) -> Bool) {
        lostAnswers.withLock { $0.append(matches) }
        armed.store(true, ordering: .sequentiallyConsistent)
    }

    /// Runs the next statement whose SQL text satisfies `matches`, once, and fails the reading of its first row's
    /// values (the plan is used up by that statement even when it returns no row), as a value the driver cannot
    /// decode would (PostgreSQL's runner only: SQLite's rows are read by the
    /// statement's own step). The runner reads the rest of the answer, so the statement runs to its end, and throws
    /// ``UndecodableAnswer``.
    func spoilAnswerOfNext(_ matches: @escaping @Sendable (String) -> Bool) {
        spoiledAnswers.withLock { $0.append(matches) }
        armed.store(true, ordering: .sequentiallyConsistent)
    }

    /// Runs the next statement whose SQL text satisfies `matches`, once, and hands its answer to its caller only
    /// when `hold` returns (a read's answer in flight while something else happens; PostgreSQL's runner and
    /// SQLite's readers).
    func holdAnswerOfNext(_ matches: @escaping @Sendable (String) -> Bool, until hold: @escaping @Sendable () async -> Void) {
        heldAnswers.withLock { $0.append((matches, hold)) }
        armed.store(true, ordering: .sequentiallyConsistent)
    }

    /// Waits for the hold ``holdAnswerOfNext(_:until:)`` planned for `sql`, if any (once).
    func holdAnswer(of sql: SQLFragment) async {
        let text = sql.rawText
        let hold = heldAnswers.withLock { planned -> (@Sendable () async -> Void)? in
            guard let index = planned.firstIndex(where: { $0.matches(text) }) else { return nil }
            return planned.remove(at: index).hold
        }
        await hold?()
    }

    /// Whether ``spoilAnswerOfNext(_:)`` planned to spoil the answer of `sql` (once).
    func spoils(_ sql: SQLFragment) -> Bool {
        guard armed.load(ordering: .relaxed) else { return false }
        let text = sql.rawText
        return spoiledAnswers.withLock { planned -> Bool in
            guard let index = planned.firstIndex(where: { $0(text) }) else { return false }
            planned.remove(at: index)
            return true
        }
    }

    /// The rows `sql` returned, or none when ``loseAnswerOfNext(_:)`` planned to lose them.
    func answer(of sql: SQLFragment, _ rows: [ResultRow]) -> [ResultRow] {
        guard armed.load(ordering: .relaxed) else { return rows }
        let text = sql.rawText
        let lost = lostAnswers.withLock { planned -> Bool in
            guard let index = planned.firstIndex(where: { $0(text) }) else { return false }
            planned.remove(at: index)
            return true
        }
        return lost ? [] : rows
    }

    /// Hands the SQL text of every statement the storage runs from now on to `seen` (tests that count a write's
    /// statements), before it runs.
    func observe(_ seen: @escaping @Sendable (String) -> Void) {
        observers.withLock { $0.append(seen) }
        armed.store(true, ordering: .sequentiallyConsistent)
    }

    func check(_ sql: SQLFragment) throws {
        guard armed.load(ordering: .relaxed) else { return }
        let text = sql.rawText
        for seen in observers.withLock({ $0 }) { seen(text) }
        let hit = planned.withLock { planned -> (any Error)?? in
            guard let index = planned.firstIndex(where: { $0.matches(text) }) else { return .none }
            let error = planned.remove(at: index).error
            if planned.isEmpty, observers.withLock({ $0.isEmpty }), lostAnswers.withLock({ $0.isEmpty }),
                spoiledAnswers.withLock({ $0.isEmpty }), heldAnswers.withLock({ $0.isEmpty })
            {
                armed.store(false, ordering: .sequentiallyConsistent)
            }
            return .some(error)
        }
        guard case .some(let error) = hit else { return }
        throw error ?? StorageUnavailable(reason: "a test failed the statement '\(text.prefix(40))'")
    }
}
