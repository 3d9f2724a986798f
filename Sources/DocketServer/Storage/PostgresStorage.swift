import DocketModel
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresKit
import PostgresNIO
import SQLKit
import Synchronization

/// PostgreSQL storage: a pool of connections (``PostgresConnections``), statements serialised by SQLKit's PostgreSQL
/// dialect.
///
/// Writes of records hold no lock that other writes wait for but the rows they change (``WriteScope/rows(table:sysIDs:)``):
/// an update or a delete locks its record's row first, so writes of one record follow each other, and every other
/// write, in this process or another docketd sharing the database, goes on in parallel. Numbers come from sequences
/// (``NumberSequences``), and the event log is read without gaps however writers commit (its `xmin` watermark:
/// ``StorageDialect/appendingEvent(_:)``). The few writes that decide from many rows at once (schema, users and
/// credentials, sessions, the notifier's bookkeeping) are exclusive: they take one transaction-scoped advisory lock
/// (`pg_advisory_xact_lock`) and wait for each other across every instance. A write that loses a race PostgreSQL
/// settles by ending a transaction (a deadlock, a unique key inserted at once) runs again from the start. Reads run
/// concurrently on the other connections, each statement seeing every transaction committed before it started.
final class PostgresStorage: Storage {
    let dialect = StorageDialect.postgres
    let faults = StatementFaults()
    let location: PostgresLocation
    let logger: Logger
    /// Exclusive writers of this process queue here, so that they wait without holding a pooled connection. A few
    /// pass at once: the one holding the advisory lock, and the next ones already waiting for it on the server, so
    /// that the lock passes from one write to the next inside PostgreSQL, without a round trip between them.
    private let writeLock: AsyncLock
    /// Writers of rows (``WriteScope/rows(table:sysIDs:)``) of this process that hold a connection at once.
    private let rowWriters: AsyncLock
    /// Whether other processes use the schema (``PostgresPresence``).
    let presence: PostgresPresence
    let headConnection: HeadConnection
    private let pool: Mutex<Pool>
    /// The connections requests use.
    private let connectionPool: PostgresConnections
    /// Statements prepared once per connection (nil with `prepare=off`).
    private let prepared: PreparedStatements?
    /// Tells other instances of this process's commits (``announce(_:)``).
    private let announcer = CommitAnnouncer()

    /// What is known of the server's health.
    private struct Pool {
        /// Set while the server cannot be reached: requests fail at once instead of each waiting for a lease.
        var down: StorageUnavailable?
        var downSince: ContinuousClock.Instant?
        /// The probe under way, if any (see ``PostgresStorage/probe()``).
        var probing = false
        var closed = false
    }

    /// How long a request waits for a pooled connection before it is answered 503: the pool itself waits without
    /// end while it cannot connect.
    static let leaseTimeout = Duration.seconds(4)
    /// How long a write waits for a lock on the server (PostgreSQL's `lock_timeout`), as text: ``leaseTimeout``.
    static let lockTimeout = "\(leaseTimeout.components.seconds * 1000)ms"
    /// After this long without a connection, the server's health is checked (without failing the request).
    static let probeAfter = Duration.seconds(1)
    /// The most connections a pool opens.
    private let connections: Int

    /// How many writers of one process hold a connection at once: a third of the pool (at least one), leaving
    /// the rest to reads.
    static func writersAtOnce(connections: Int) -> Int {
        max(1, min(4, connections / 3))
    }

    /// How many writers of rows of one process hold a connection at once: two thirds of the pool (at least one),
    /// leaving the rest to reads. They wait for nobody else's lock but the rows they name.
    static func rowWritersAtOnce(connections: Int) -> Int {
        max(1, connections * 2 / 3)
    }

    /// The advisory lock key every exclusive write transaction holds: one per schema, so that docketd instances of
    /// different deployments sharing a database (each in its own schema) do not wait for each other.
    var writeLockKey: Int64 { Self.writeLockKey(schema: location.schema ?? "public") }

    /// FNV-1a of "docket:" and the schema name: stable across processes and versions.
    static func writeLockKey(schema: String) -> Int64 {
        Int64(bitPattern: FNV1a.hash(("docket:" + schema).utf8))
    }

    /// The advisory lock key held while a schema is created (``open(_:connections:logger:)``).
    static func schemaCreationKey(schema: String) -> Int64 {
        Int64(bitPattern: FNV1a.hash(("docket-schema:" + schema).utf8))
    }

    private init(location: PostgresLocation, connections: Int, logger: Logger) {
        self.location = location
        self.connections = connections
        self.logger = logger
        writeLock = AsyncLock(permits: Self.writersAtOnce(connections: connections))
        rowWriters = AsyncLock(permits: Self.rowWritersAtOnce(connections: connections))
        headConnection = HeadConnection(location: location)
        presence = PostgresPresence(location: location, logger: logger)
        prepared = location.prepare ? .shared : nil
        pool = Mutex(Pool())
        connectionPool = PostgresConnections(maximum: connections) { id in
            try await PostgresConnection.connect(
                configuration: try location.connectionConfiguration(searchPath: true), id: id, logger: logger
            )
        } check: { connection in
            do {
                return try await bounded(.seconds(2), { try await PostgresRunner(connection: connection, logger: logger).rows("SELECT 1") }) != nil
            } catch {
                return false
            }
        }
    }

    /// Connects, creating the location's schema when it names one that does not exist yet. Fails with a clear
    /// error when the server cannot be reached or refuses the credentials.
    static func open(_ location: PostgresLocation, connections: Int = 8, logger: Logger) async throws -> PostgresStorage {
        // One direct connection first: it fails fast with the server's own words, where a pool would retry.
        let probe: PostgresConnection
        do {
            probe = try await PostgresConnection.connect(
                configuration: try location.connectionConfiguration(searchPath: false), id: 0, logger: logger
            )
        } catch {
            throw PostgresStorageError.unreachable(location.redacted, reason: Self.describe(error))
        }
        do {
            let runner = PostgresRunner(connection: probe, logger: logger)
            if let schema = location.schema,
                try await runner.rows("SELECT 1 FROM pg_namespace WHERE nspname = " + .bind(schema)).isEmpty
            {
                // Under a lock of its own (not the write lock, which an instance preparing the schema holds for long):
                // instances starting at once would otherwise both try to create it, and all but one fail (CREATE
                // SCHEMA IF NOT EXISTS is not safe against itself). Held only for the CREATE.
                try await runner.run("BEGIN")
                try await runner.run("SELECT pg_advisory_xact_lock(" + .bind(Int(Self.schemaCreationKey(schema: schema))) + ")")
                try await runner.run("CREATE SCHEMA IF NOT EXISTS " + .identifier(schema))
                try await runner.run("COMMIT")
            }
            try await probe.close()
        } catch {
            try? await probe.close()
            throw PostgresStorageError.unreachable(location.redacted, reason: Self.describe(error))
        }
        let storage = PostgresStorage(location: location, connections: max(2, connections), logger: logger)
        do {
            try await storage.presence.start()
        } catch {
            try? await storage.close()
            throw PostgresStorageError.unreachable(location.redacted, reason: Self.describe(error))
        }
        return storage
    }

    /// Runs `body` on a pooled connection. Fails at once with ``StorageUnavailable`` while the server is known to
    /// be unreachable, and after ``leaseTimeout`` when no connection could be had; a connection that breaks under
    /// `body` is reported the same way. Either starts a probe that watches for the server's return.
    private func withConnection<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let (down, closed) = pool.withLock { ($0.down, $0.closed) }
        if closed { throw StorageUnavailable.closed }
        if let down { throw down }
        do {
            // A connection idle now: no wait to bound, so no task and no alarm (the usual case under load).
            if let connection = connectionPool.leaseIfIdle() {
                defer { connectionPool.release(connection) }
                return try await body(connection)
            }
            return try await withoutActuallyEscaping(body) { body in
                try await Self.lease(
                    connectionPool, within: Self.leaseTimeout, onSlowLease: { self.startProbe() }, isDown: { self.unavailable }, body
                )
            }
        } catch {
            // A pool shut down under a request (the storage closed meanwhile) answers as the storage does now.
            if pool.withLock({ $0.closed }) { throw StorageUnavailable.closed }
            guard let unavailable = StorageUnavailable.classify(error) else { throw error }
            // A lock not had in time says the server answers: nothing to probe.
            if !unavailable.lockWait { startProbe() }
            throw unavailable
        }
    }

    /// A lease that gives up after `timeout`, or sooner once the probe started after ``probeAfter`` finds the
    /// server unreachable: the wait in the pool is cancelled (it ends at once), and the caller
    /// learns that the database did not answer in time. The deadlines are alarms (``Alarms``), not sleeping tasks:
    /// a lease costs one task besides the caller's.
    private static func lease<T: Sendable>(
        _ connections: PostgresConnections, within timeout: Duration, onSlowLease: @escaping @Sendable () -> Void,
        isDown: @escaping @Sendable () -> StorageUnavailable?, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        // 0: waiting for a connection; 1: leased (the alarms stand down); 2: given up (a lease that comes after
        // is returned unused). Decided once, so a body never starts after its request was answered 503.
        let state = LeaseState()
        let unavailable = StorageUnavailable(reason: "no connection to PostgreSQL within \(timeout)")
        let lease = Task {
            try await connections.withConnection { connection in
                guard state.value.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged else {
                    throw unavailable
                }
                return try await body(connection)
            }
        }
        let deadline = ContinuousClock.now + timeout
        // Called from one alarm at a time. The reason is kept before the lease is given up, so that a connection
        // handed over in between (refused by the body's check) still reports it.
        @Sendable func giveUp(_ reason: StorageUnavailable) {
            state.gaveUp(reason)
            guard state.value.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged else { return }
            lease.cancel()
        }
        // Until the deadline, or until the probe finds the server unreachable: then at once.
        @Sendable func check() {
            guard state.value.load(ordering: .acquiring) == 0 else { return }
            if let down = isDown() { return giveUp(down) }
            if ContinuousClock.now >= deadline { return giveUp(unavailable) }
            state.alarm(after: min(.milliseconds(100), deadline - ContinuousClock.now), check)
        }
        state.alarm(after: probeAfter) {
            guard state.value.load(ordering: .acquiring) == 0 else { return }
            onSlowLease()
            check()
        }
        defer { state.end() }
        do {
            // The lease's task always ends before this returns (the pool ends a cancelled wait at once), so
            // `body` never outlives the call.
            return try await withTaskCancellationHandler { try await lease.value } onCancel: { lease.cancel() }
        } catch {
            // Given up: the body never ran, and the error is the give-up's (or the pool's answer to the cancellation).
            if state.value.load(ordering: .acquiring) == 2 { throw state.reason ?? unavailable }
            throw error
        }
    }

    /// Where a lease stands (``lease(_:within:onSlowLease:isDown:_:)``), and its alarm.
    private final class LeaseState: Sendable {
        let value = Atomic<Int>(0)
        private let watch = Mutex<(alarm: Alarms.Alarm?, reason: StorageUnavailable?, ended: Bool)>((nil, nil, false))

        /// Sets the lease's next alarm (none once it ended).
        func alarm(after delay: Duration, _ action: @escaping @Sendable () -> Void) {
            watch.withLock { watch in
                guard !watch.ended else { return }
                watch.alarm = Alarms.shared.set(after: delay, action)
            }
        }

        func gaveUp(_ reason: StorageUnavailable) { watch.withLock { $0.reason = reason } }
        var reason: StorageUnavailable? { watch.withLock { $0.reason } }

        /// The call returns: its alarm is called off.
        func end() {
            let alarm = watch.withLock { watch -> Alarms.Alarm? in
                watch.ended = true
                defer { watch.alarm = nil }
                return watch.alarm
            }
            if let alarm { Alarms.shared.cancel(alarm) }
        }
    }

    /// Checks, on a connection of its own, whether the server answers. When it does not, requests fail at once
    /// from then on, and it tries again (every 250 ms, then up to every second) until the server answers; then
    /// requests are served again (the pool opens connections as leases need them, and drops those found closed).
    /// When the server answers at once, nothing changes.
    private func startProbe() {
        let start = pool.withLock { pool -> Bool in
            guard !pool.probing, !pool.closed else { return false }
            pool.probing = true
            return true
        }
        guard start else { return }
        Task.detached { await self.probe() }
    }

    private func probe() async {
        var delay = Duration.milliseconds(250)
        var failures = 0
        while true {
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(searchPath: true), id: 4, logger: logger
                )
                do {
                    // A server that takes the connection but never answers is as down as one that refuses it.
                    let logger = self.logger
                    guard try await bounded(Self.leaseTimeout, {
                        try await PostgresRunner(connection: connection, logger: logger).rows("SELECT 1")
                    }) != nil else { throw StorageUnavailable(reason: "no answer to SELECT 1 within \(Self.leaseTimeout)") }
                    try? await connection.close()
                } catch {
                    try? await connection.close()
                    throw error
                }
                break
            } catch {
                failures += 1
                let reason = Self.describe(error)
                let first = pool.withLock { pool -> Bool in
                    let first = pool.down == nil
                    pool.down = StorageUnavailable(reason: "PostgreSQL cannot be reached (\(reason))")
                    pool.downSince = pool.downSince ?? .now
                    return first && !pool.closed
                }
                if first {
                    logger.error("The database cannot be reached; requests are answered 503 until it is back", metadata: ["error": "\(reason)"])
                }
                if pool.withLock({ $0.closed }) { return }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
        guard failures > 0 else {
            pool.withLock { $0.probing = false }
            return
        }
        let outage = pool.withLock { pool -> Duration? in
            guard !pool.closed else { return nil }
            defer {
                pool.down = nil
                pool.downSince = nil
                pool.probing = false
            }
            return pool.downSince.map { ContinuousClock.now - $0 } ?? .zero
        }
        guard let outage else { return }
        logger.notice("The database answers again; serving requests", metadata: ["after": "\(outage)"])
    }

    /// Whether the server is known to be unreachable right now (for `/health`).
    var unavailable: StorageUnavailable? { pool.withLock { $0.down } }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await body(SQLExecutor(runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults, prepared: self.prepared), dialect: self.dialect))
        }
    }

    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        if let down = unavailable { throw down }
        // A process whose presence connection broke has let go of its key: another might be alone, and not read
        // the log for what this one writes, until it has joined again (``PostgresPresence``): the write waits.
        if !presence.isJoined { try await presence.ensureJoined() }
        // Exclusive writes queue behind each other here (they would wait for the advisory lock anyway); writes of
        // rows queue only for a connection, leaving the rest of the pool to reads.
        let queue = scope == .exclusive ? writeLock : rowWriters
        // The events the write appends are announced as soon as they are committed (``DrawnEvents/committed()``), so
        // that other instances read them; any left when it has ended (rolled back, or not known to have committed)
        // then: a wake-up too many costs them a read of the log's head.
        let drawn = DrawnEvents(announce: { [self] announcement in announce(announcement) })
        defer { if let announcement = drawn.announcement { announce(announcement) } }
        return try await queue.withLock(timeout: Self.leaseTimeout) { try await runToCompletion { try await DrawnEvents.$current.withValue(drawn) {
            var attempt = 1
            while true {
                do {
                    return try await self.transaction(scope: scope, body)
                } catch let error as PostgresStatementError where Self.isTransient(error) {
                    // Two transactions that each wait for a row the other holds (PostgreSQL ends one of them), or
                    // two that insert the same key at once: the one that lost runs again from the start, and sees
                    // what the other committed.
                    guard attempt < Self.attempts else {
                        // Still losing: the records are fought over; the client may try again later (503).
                        if error.sqlState != "23505" {
                            throw StorageUnavailable(reason: "the write kept conflicting with others (\(error.message))")
                        }
                        throw error
                    }
                    attempt += 1
                }
            }
        } } }
    }

    /// Wakes the instances listening on this schema's channel (``logSignals(ignoring:)``) for the events of a write
    /// of this process, after its transaction ended (``CommitAnnouncer``): `pg_notify` in an
    /// implicit transaction of its own, on a pooled connection. The append no longer notifies in the write's own
    /// transaction, whose commit would then take PostgreSQL's cluster-wide lock for notifications.
    func announce(_ announcement: CommitAnnouncer.Announcement) {
        // Nobody else to tell (``PostgresPresence``): a newcomer reads the log before its first write.
        guard !presence.isAlone else { return }
        announcer.announce(announcement, send: { [self] announcement in
            // Not subject to the statement faults tests plan: it runs beside the statements they aim at.
            try await withConnection { connection in
                try await PostgresRunner(connection: connection, logger: logger, prepared: prepared)
                    .run(Self.notification(payload: announcement.payload(from: presence.id)))
            }
        }, failed: { [self, logger] error in
            // A storage closed or a database down: the others find the commit when they read the log next.
            guard !pool.withLock({ $0.closed }), !(error is StorageUnavailable) else { return }
            logger.warning(
                "Could not tell other instances of a commit; they find it within a second",
                metadata: ["error": "\(Self.describe(error))"]
            )
        })
    }

    /// A notification on the schema's channel with `payload` (read by ``logSignals(ignoring:)``): an announcement of
    /// commits (``CommitAnnouncer/Announcement/payload(from:)``) or a process's `hello:` (``PostgresPresence``).
    /// A `NOTIFY` gives its transaction an id, so its commit writes a record: not waited for here
    /// (`synchronous_commit` off for that transaction alone), since the notification need not outlive a crash.
    static func notification(payload: String) -> SQLFragment {
        "SELECT set_config('synchronous_commit', 'off', true), pg_notify('" + SQLFragment(channelPrefix)
            + "' || current_schema(), " + .bind(payload) + ")"
    }

    /// How many times a write runs when it keeps losing a race with another (``isTransient(_:)``).
    static let attempts = 4

    /// Whether a failed transaction lost a race that running it again settles: a deadlock (40P01), a serialization
    /// failure (40001), or a unique key another transaction committed first (23505: the next run finds it, and
    /// answers as the engine does when it is there, "already exists" or the stored answer of an idempotency key).
    static func isTransient(_ error: PostgresStatementError) -> Bool {
        ["40P01", "40001", "23505"].contains(error.sqlState ?? "")
    }

    private func transaction<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withConnection { connection in
            let executor = SQLExecutor(
                runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults, prepared: self.prepared), dialect: self.dialect
            )
            // Lock waits are bounded by `lock_timeout` (``lockTimeout``): a write stuck ahead (here or in another
            // instance) makes the next ones fail with 503, never hang. Set for every pooled connection when it
            // connects; through a pooler (`prepare=off`), whose server connections are shared, in each transaction.
            var first: [SQLFragment]
            switch scope {
            case .exclusive:
                first = ["SELECT pg_advisory_xact_lock(" + .bind(Int(self.writeLockKey)) + ")"]
            case .rows:
                // The write locks the row it changes as it reads it, or writes only the version it read (``WriteScope/rows``).
                first = []
            }
            if !self.location.prepare { first.insert("SELECT set_config('lock_timeout', " + .bind(Self.lockTimeout) + ", true)", at: 0) }
            do {
                return try await executor.transaction(first: first, body)
            } catch let failed as RollbackFailed {
                // Never back to the pool still inside the transaction, holding its locks: closed, the pool
                // replaces it, and the server ends the transaction.
                self.logger.error("A write could not be rolled back; its connection is closed", metadata: ["error": "\(failed.cause)"])
                try? await connection.close()
                throw failed.cause
            }
        }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await body(SQLExecutor(runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults, prepared: self.prepared), dialect: self.dialect))
        }
    }

    /// The log's head, read before answering each batch of requests (``RecordStore/catchUp()``): a prepared
    /// statement on a connection of its own, so that the read costs no parse, plan or pool lease. Falls back to
    /// the pool while that connection cannot be had.
    func latestEventSequence() async throws -> Int {
        if let down = unavailable { throw down }
        // Failures chosen by tests reach this read as they reach every other statement.
        try faults.check(SQLFragment(StorageDialect.newestEventSequenceSQL))
        let logger = self.logger
        if let connection = await headConnection.connection(logger: logger) {
            do {
                if let sequence = try await bounded(Self.leaseTimeout, {
                    try await Self.sequence(from: connection.execute(LatestEventSequence(), logger: logger))
                }) {
                    return sequence
                }
                // Every request waits for this read: one that does not come is given up, and its connection closed
                // (which ends the wait) and replaced, rather than holding every request up.
                logger.warning(
                    "The event log's head did not come on its connection; the connection is replaced",
                    metadata: ["within": "\(Self.leaseTimeout)"]
                )
                await headConnection.failed(connection)
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // The connection broke (or the server dropped the prepared statement's table): replaced later.
                await headConnection.failed(connection)
            }
        }
        return try await withConnection { connection in
            guard let sequence = try await bounded(Self.leaseTimeout, {
                try await Self.sequence(from: connection.execute(LatestEventSequence(), logger: logger))
            }) else {
                // Closing it ends the wait; the pool replaces it.
                try? await connection.close()
                throw StorageUnavailable(reason: "the event log's head did not come within \(Self.leaseTimeout)")
            }
            return sequence
        }
    }

    private static func sequence(from rows: AsyncThrowingMapSequence<PostgresRowSequence, Int>) async throws -> Int {
        var sequence = 0
        for try await value in rows { sequence = value }
        return sequence
    }

    private struct LatestEventSequence: PostgresPreparedStatement {
        static let name = "docket_latest_event_sequence"
        static let sql = StorageDialect.newestEventSequenceSQL
        typealias Row = Int
        func makeBindings() -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
    }

    func close() async throws {
        await headConnection.close()
        pool.withLock { $0.closed = true }
        // Connections still leased are closed as they come back.
        await connectionPool.close()
        // Last, once the connections still leased have come back (for a few seconds at most): no commit of this
        // process follows its leaving.
        let start = ContinuousClock.now
        while connectionPool.counts.slots > 0, ContinuousClock.now - start < Self.leaseTimeout {
            try? await Task.sleep(for: .milliseconds(10))
        }
        await presence.close()
    }

    var isAlone: Bool { presence.isAlone }

    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async {
        await presence.tryBeingAlone(catchingUp: catchingUp)
    }

    /// The server's own message where there is one (postgres-nio hides it from `description`).
    static func describe(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return describe(underlying) }
            return "\(error.code)"
        }
        if let error = error as? NIOConnectionError {
            // "connection refused", "host unreachable": the system's words for the last address tried.
            let reasons = error.connectionErrors.map { failure -> String in
                if let io = failure.error as? IOError { return String(cString: strerror(io.errnoCode)).lowercased() }
                return String(describing: failure.error)
            }
            let reason = reasons.last ?? (error.dnsAError ?? error.dnsAAAAError).map { _ in "the host name does not resolve" }
            return "cannot connect to \(error.host):\(error.port)" + (reason.map { " (\($0))" } ?? "")
        }
        if let error = error as? IOError { return String(cString: strerror(error.errnoCode)).lowercased() }
        return String(describing: error)
    }
}

/// Why a PostgreSQL database could not be used.
public enum PostgresStorageError: Error, CustomStringConvertible {
    case unreachable(String, reason: String)
    case unsupportedBind(String)
    case unsupportedColumn(String, type: String)

    public var description: String {
        switch self {
        case .unreachable(let location, let reason): return "Cannot open the PostgreSQL database \(location): \(reason)"
        case .unsupportedBind(let type): return "A value of type \(type) cannot be bound for PostgreSQL"
        case .unsupportedColumn(let column, let type): return "Column \(column) has type \(type), which docketd does not read"
        }
    }
}
