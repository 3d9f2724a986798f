import DocketModel
import Logging
import PostgresNIO
import Synchronization

/// Whether this process is the only one that uses its schema of the database, so that it may leave out what is there
/// for the others: reading the event log's head before each request (``RecordStore/catchUpBeforeRequest()``) and
/// announcing its commits (``PostgresStorage/announce(_:)``). Measured on 2026-12-04: 0.7 statements of every POST.
///
/// How it is known, with PostgreSQL's advisory locks on one key per schema (``key(schema:)``, of `current_schema()`):
/// - every process that opens the storage (a server, or a `docketd` command) holds the key *shared*, on a connection
///   of its own, from before its first statement to its close (``join(limit:)``);
/// - a server whose listener hears the channel may also take the key *exclusively*, which PostgreSQL grants only
///   while no other session holds it: it is then alone (``tryBeingAlone(catchingUp:)``);
/// - every process that opens the storage first announces itself on the channel (`hello:` and its id), and waits for
///   its shared lock, announcing itself again each second. One that is alone hears it, stops being alone (its
///   requests read the head again, its commits are announced) and only then lets go of the key.
///
/// What ends being alone besides: the listener lost, or deaf (this process's own `hello:`, sent each second while
/// alone, not heard back within ``echoLimit``; no new try for ``pause``); the presence connection lost (its locks go with its session; writes
/// then wait until it has joined again); a notification of a commit by a process that takes no key (a docketd of a
/// release before this one: no new try for ``pause``). The presence connection asks PostgreSQL to find a
/// peer that vanished within about 15 s (TCP keep-alives and `tcp_user_timeout`), so a host that died alone does not
/// keep others from starting for long.
final class PostgresPresence: Sendable {
    private enum Phase { case shared, taking, alone }

    private struct State {
        var connection: PostgresConnection?
        /// Counts the connections adopted: an exclusive lock belongs to the session it was taken on.
        var generation = 0
        /// The generation whose session holds the key exclusively.
        var exclusiveOn: Int?
        var backendPID: Int?
        var key: Int64?
        var phase = Phase.shared
        var listening = false
        var closed = false
        var task: Task<Void, Never>?
        /// Since when a `hello:` this process sent while alone has not been heard back by its listener.
        var unanswered: ContinuousClock.Instant?
        /// No try to be alone before this (a commit of a process that takes no key was heard).
        var pausedUntil: ContinuousClock.Instant?
        var rejoinFailures = 0
        /// The join under way after a loss, shared by ``keep()`` and the writes that wait for it.
        var rejoining: Task<Void, Never>?
    }

    /// The presence key of `schema`: FNV-1a of "docket-presence:" and the schema's name.
    static func key(schema: String) -> Int64 { Int64(bitPattern: FNV1a.hash(("docket-presence:" + schema).utf8)) }

    /// How long a process that opens the storage waits for one alone to let go before it gives up.
    static let joinLimit = Duration.seconds(30)
    /// How often the presence connection is used (its session checked), and a server tries to be alone.
    static let tick = Duration.seconds(1)
    /// How long an instance alone goes without hearing its own `hello:` before it takes its listener for deaf.
    static let echoLimit = Duration.seconds(3)
    /// How long an instance that heard another process's commit while alone, or found its listener deaf, waits
    /// before it tries again.
    static let pause = Duration.seconds(60)

    private let location: PostgresLocation
    private let logger: Logger
    /// This process's id in its `hello:` notifications (so that its own listener knows them).
    let id: String
    private let state = Mutex(State())
    /// Written only with `state` held, so that it never disagrees with the phase.
    private let alone = Atomic<Bool>(false)
    /// Serialises the statements that take and let go of the exclusive lock.
    private let exclusive = AsyncLock(permits: 1)

    init(location: PostgresLocation, logger: Logger) {
        self.location = location
        self.logger = logger
        id = SysID.generate()
    }

    /// Whether this process is alone on its schema now.
    var isAlone: Bool { alone.load(ordering: .acquiring) }

    /// Whether this process holds the key shared now, as far as it knows (a loss is found within a tick and a
    /// statement's bound): ``PostgresStorage`` writes only then.
    var isJoined: Bool { state.withLock { $0.connection != nil } }

    /// The key, once joined (tests).
    var key: Int64? { state.withLock { $0.key } }

    /// The payload of this process's announcement of itself.
    var hello: String { "hello:" + id }

    /// Joins (``join(limit:)``), then keeps the presence connection in use and joins again when it breaks.
    func start() async throws {
        let joined = try await join(limit: Self.joinLimit)
        let accepted = adopt(joined) { state in state.task = Task { await self.keep() } }
        guard accepted else { throw StorageUnavailable.closed }
    }

    private struct Joined {
        let connection: PostgresConnection
        let pid: Int
        let key: Int64
    }

    /// Keeps a joined connection as the presence connection, running `also` in the same lock section; closes it
    /// instead (false) when the storage closed meanwhile.
    private func adopt(_ joined: Joined, also: (inout State) -> Void = { _ in }) -> Bool {
        let accepted = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.connection = joined.connection
            state.generation += 1
            state.exclusiveOn = nil
            state.backendPID = joined.pid
            state.key = joined.key
            also(&state)
            return true
        }
        if !accepted { Task { try? await joined.connection.close() } }
        return accepted
    }

    /// One statement on the presence connection, bounded (a server that stopped answering is a lost connection).
    private func rows(_ sql: SQLFragment, on connection: PostgresConnection) async throws -> [ResultRow] {
        guard let rows = try await bounded(PostgresStorage.leaseTimeout, {
            try await PostgresRunner(connection: connection, logger: self.logger).rows(sql)
        }) else { throw StorageUnavailable(reason: "the presence connection did not answer within \(PostgresStorage.leaseTimeout)") }
        return rows
    }

    /// Opens the presence connection and takes the key shared, announcing this process each second until whoever
    /// is alone lets go; fails after `limit`, naming the session that holds the key.
    private func join(limit: Duration) async throws -> Joined {
        var configuration = try location.connectionConfiguration(searchPath: true)
        configuration.options.additionalStartupParameters = configuration.options.additionalStartupParameters.map {
            $0.0 == "application_name" ? ($0.0, "docketd presence") : $0
        }
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 4, logger: logger)
        do {
            // PostgreSQL finds a peer gone in about 15 s (ignored on a Unix socket): its locks then go.
            let session = try await rows(
                "SELECT set_config('tcp_keepalives_idle', '5', false), set_config('tcp_keepalives_interval', '2', false),"
                    + " set_config('tcp_keepalives_count', '3', false), set_config('tcp_user_timeout', '10000', false),"
                    + " current_schema() AS schema, pg_backend_pid() AS pid",
                on: connection
            ).first
            // (A SELECT without FROM answers one row; its schema is NULL when the search path names no schema there.)
            guard let session, let schema = try session.value(at: "schema", kind: .text).text,
                let pid = try session.value(at: "pid", kind: .integer).intValue
            else {
                throw StorageUnavailable(reason: "the presence connection's session has no current schema (is the search path's schema there?)")
            }
            let key = Self.key(schema: schema)
            let start = ContinuousClock.now
            var announced: ContinuousClock.Instant?
            while true {
                if announced.map({ ContinuousClock.now - $0 >= Self.tick }) ?? true {
                    _ = try await rows(PostgresStorage.notification(payload: hello), on: connection)
                    announced = .now
                }
                let held = try await rows(
                    "SELECT CASE WHEN pg_backend_pid() <> " + .bind(pid) + " THEN -1 WHEN pg_try_advisory_lock_shared("
                        + .bind(Int(key)) + ") THEN 1 ELSE 0 END AS held",
                    on: connection
                ).first?.first.intValue
                if held == -1 { throw Self.changedSession(logger) }
                if held == 1 { return Joined(connection: connection, pid: pid, key: key) }
                guard ContinuousClock.now - start < limit else {
                    throw StorageUnavailable(reason: try await holder(of: key, on: connection, limit: limit))
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Says which session has the schema to itself (for the error of a join that gave up).
    private func holder(of key: Int64, on connection: PostgresConnection, limit: Duration) async throws -> String {
        let bits = UInt64(bitPattern: key)
        let row = try await rows(
            "SELECT l.pid AS pid, a.application_name AS application, a.client_addr::text AS address FROM pg_locks l"
                + " LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.mode = 'ExclusiveLock'"
                + " AND l.granted AND l.classid = " + .bind(Int(bits >> 32)) + " AND l.objid = " + .bind(Int(bits & 0xFFFF_FFFF))
                + " AND l.objsubid = 1",
            on: connection
        ).first
        let who = try row.map { row in
            let pid = try row.value(at: "pid", kind: .integer).text ?? "?"
            let address = try row.value(at: "address", kind: .text).text.map { " from \($0)" } ?? ""
            return "the server's process \(pid)\(address)"
        } ?? "another session"
        return "another docketd (\(who)) has this schema to itself and did not let go within \(limit); "
            + "it lets go when it hears another start, so it is hung or cut off (PostgreSQL ends a vanished peer's "
            + "session within about 15 s, or end it with pg_terminate_backend)"
    }

    /// Uses the presence connection every tick: checks its session is the same (a pooler in transaction mode would
    /// hand each statement to another), sends the echo while alone, lets go of a key still held after a failed
    /// unlock. When it breaks (its locks then went with its session), stops being alone and joins again.
    private func keep() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: Self.tick)
            guard case let (connection, generation, pid)? = state.withLock({ state in
                state.connection.map { ($0, state.generation, state.backendPID) }
            }) else {
                if state.withLock({ $0.closed }) || Task.isCancelled { break }
                await rejoinOnce()?.value
                continue
            }
            do {
                let now = try await rows("SELECT pg_backend_pid() AS pid", on: connection).first?.first.intValue
                guard now == pid else { throw Self.changedSession(logger) }
                // Alone: the echo. A hello sent longer ago than the limit and still not heard: the listener is deaf.
                let echo = state.withLock { state -> Bool? in
                    guard state.phase == .alone else { return nil }
                    if let since = state.unanswered, ContinuousClock.now - since > Self.echoLimit { return false }
                    if state.unanswered == nil { state.unanswered = .now }
                    return true
                }
                if echo == false {
                    state.withLock { $0.pausedUntil = .now + Self.pause }
                    share(because: "the listener did not hear this instance's own notification")
                } else if echo == true {
                    _ = try await rows(PostgresStorage.notification(payload: hello), on: connection)
                }
                letGo()
            } catch {
                if Task.isCancelled { break }
                discard(connection, generation: generation, because: error)
            }
        }
    }

    /// The error of a statement that reached another server session than the one that holds the key.
    private static func changedSession(_ logger: Logger) -> StorageUnavailable {
        logger.error(
            "The presence connection's statements reach another server session: docketd needs sessions, not a pooler in transaction mode"
        )
        return StorageUnavailable(reason: "the presence connection changed sessions")
    }

    /// Gives up a presence connection whose statement failed or timed out (a lock taken or let go late would
    /// otherwise go untracked): ending its session is the one sure way to let go of its locks. Stops being alone in
    /// the same step; ``keep()`` (or a write, ``ensureJoined()``) joins again.
    private func discard(_ connection: PostgresConnection, generation: Int, because error: any Error) {
        let was = state.withLock { state -> Phase? in
            guard state.generation == generation, state.connection != nil else { return nil }
            state.connection = nil
            state.exclusiveOn = nil
            defer {
                state.phase = .shared
                alone.store(false, ordering: .releasing)
            }
            return state.phase
        }
        guard let was else { return }
        logger.warning(
            "Lost the connection that tells other instances this one is here; writes wait until it is back",
            metadata: ["error": "\(PostgresStorage.describe(error))"]
        )
        if was == .alone { logger.info("No longer alone on the database's schema", metadata: ["reason": "the presence connection broke"]) }
        Task { try? await connection.close() }
    }

    /// Joins again now if the presence connection is lost (a write that finds it so waits for this, bounded by
    /// ``PostgresStorage/leaseTimeout``); throws ``StorageUnavailable`` when it could not.
    func ensureJoined() async throws {
        if isJoined { return }
        if let task = rejoinOnce() { _ = try await bounded(PostgresStorage.leaseTimeout) { await task.value } }
        guard isJoined else {
            throw StorageUnavailable(reason: "joining the database's other users again after a lost connection")
        }
    }

    /// The join under way, or a new one; nil when joined or closed.
    private func rejoinOnce() -> Task<Void, Never>? {
        state.withLock { state in
            guard !state.closed, state.connection == nil else { return nil }
            if let task = state.rejoining { return task }
            let task = Task {
                await self.rejoin()
                self.state.withLock { $0.rejoining = nil }
            }
            state.rejoining = task
            return task
        }
    }

    private func rejoin() async {
        do {
            let joined = try await join(limit: Self.tick * 4)
            let failures = state.withLock { $0.rejoinFailures }
            if adopt(joined, also: { $0.rejoinFailures = 0 }), failures > 0 {
                logger.notice("Joined the database's other users again; writes go on")
            }
        } catch {
            if Task.isCancelled { return }
            let failures = state.withLock { state in
                state.rejoinFailures += 1
                return state.rejoinFailures
            }
            if failures == 3 || failures % 60 == 0 {
                logger.warning(
                    "Still cannot join the database's other users; writes wait",
                    metadata: ["error": "\(PostgresStorage.describe(error))"]
                )
            }
        }
    }

    /// The listener hears the channel (`true`) or lost it: without it, a newcomer's announcement would go unheard.
    func listening(_ listening: Bool) {
        state.withLock { $0.listening = listening }
        if !listening { share(because: "the listener lost the channel") }
    }

    /// A notification came on the channel that does not list only this process's own commits (or ones published
    /// here already). This process's own `hello:` is its echo; while alone (or becoming so), anything else is another
    /// process: a newcomer's `hello:`, or a commit of one that takes no key.
    func heard(_ payload: String) {
        if payload == hello {
            state.withLock { $0.unanswered = nil }
            return
        }
        // This process's own commit (announced before it was alone): nobody else's.
        if CommitAnnouncer.Announcement.sender(of: payload) == id { return }
        let foreign = state.withLock { state -> Bool? in
            guard state.phase != .shared else { return nil }
            guard !payload.hasPrefix("hello:") else { return false }
            state.pausedUntil = .now + Self.pause
            return true
        }
        guard let foreign else { return }
        if foreign {
            logger.warning(
                "A process that holds no presence key committed on this schema (a docketd of a release before 2026-12-04, or one joining again); not alone for \(Self.pause)"
            )
        }
        share(because: foreign ? "another process committed" : "another instance started")
    }

    /// Takes the key exclusively if no other session holds it, then runs `catchingUp` (what other processes committed
    /// before they left is published first), and is alone unless another process was heard meanwhile.
    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async {
        let ready = state.withLock { state -> Bool in
            guard state.phase == .shared, state.listening, !state.closed, state.connection != nil,
                state.pausedUntil.map({ ContinuousClock.now >= $0 }) ?? true
            else { return false }
            state.phase = .taking
            return true
        }
        guard ready else { return }
        do {
            let taken = try await exclusive.withLock(timeout: PostgresStorage.leaseTimeout) { () -> Bool in
                guard case let (connection, generation, held, pid)? = self.state.withLock({ state in
                    state.phase == .taking
                        ? state.connection.map { ($0, state.generation, state.exclusiveOn == state.generation, state.backendPID ?? 0) } : nil
                }) else { return false }
                // Advisory locks count: taken once per session, so that one unlock lets go of it.
                if held { return true }
                let answer: Int?
                do {
                    answer = try await self.rows(
                        "SELECT CASE WHEN pg_backend_pid() <> " + .bind(pid) + " THEN -1 WHEN pg_try_advisory_lock("
                            + .bind(Int(self.key ?? 0)) + ") THEN 1 ELSE 0 END AS held",
                        on: connection
                    ).first?.first.intValue
                    if answer == -1 { throw Self.changedSession(self.logger) }
                } catch {
                    // Taken or not, late: the session goes, and its locks with it.
                    self.discard(connection, generation: generation, because: error)
                    throw error
                }
                guard answer == 1 else { return false }
                // Held by that session: a connection replaced meanwhile took it with it.
                return self.state.withLock { state in
                    guard state.generation == generation, state.connection != nil else { return false }
                    state.exclusiveOn = generation
                    return true
                }
            }
            guard taken else { throw CancellationError() }
            try await catchingUp()
        } catch {
            state.withLock { if $0.phase == .taking { $0.phase = .shared } }
            letGo()
            return
        }
        let became = state.withLock { state -> Bool in
            guard state.phase == .taking, state.exclusiveOn == state.generation else { return false }
            state.phase = .alone
            state.unanswered = nil
            alone.store(true, ordering: .releasing)
            return true
        }
        if became {
            logger.info("Alone on the database's schema: requests no longer read the event log's head, commits are not announced")
        } else {
            state.withLock { if $0.phase == .taking { $0.phase = .shared } }
            letGo()
        }
    }

    /// Stops being alone at once (requests read the head again, commits are announced), then lets go of the key.
    private func share(because reason: String) {
        let was = state.withLock { state -> Phase in
            defer {
                state.phase = .shared
                alone.store(false, ordering: .releasing)
            }
            return state.phase
        }
        guard was != .shared else { return }
        if was == .alone { logger.info("No longer alone on the database's schema", metadata: ["reason": "\(reason)"]) }
        letGo()
    }

    /// Lets go of the exclusive lock, if this session holds it and the phase is shared, after any statement taking it
    /// has ended. One that fails is tried again at the next tick (``keep()``).
    private func letGo() {
        guard state.withLock({ $0.phase == .shared && $0.exclusiveOn != nil }) else { return }
        Task {
            try? await exclusive.withLock(timeout: PostgresStorage.leaseTimeout) {
                guard case let (connection, generation, key, pid)? = self.state.withLock({ state in
                    state.phase == .shared && state.exclusiveOn == state.generation
                        ? state.connection.map { ($0, state.generation, state.key ?? 0, state.backendPID ?? 0) } : nil
                }) else { return }
                do {
                    let answer = try await self.rows(
                        "SELECT CASE WHEN pg_backend_pid() <> " + .bind(pid) + " THEN -1 WHEN pg_advisory_unlock("
                            + .bind(Int(key)) + ") THEN 1 ELSE 0 END AS released",
                        on: connection
                    ).first?.first.intValue
                    if answer == -1 { throw Self.changedSession(self.logger) }
                    self.state.withLock { if $0.exclusiveOn == generation { $0.exclusiveOn = nil } }
                } catch {
                    // Let go or not, late: the session goes, and its locks with it.
                    self.discard(connection, generation: generation, because: error)
                }
            }
        }
    }

    /// Stops, and closes the presence connection (the storage closes it after its other connections, so that no
    /// commit of this process follows its leaving).
    func close() async {
        let (task, connection) = state.withLock { state in
            state.closed = true
            state.phase = .shared
            alone.store(false, ordering: .releasing)
            defer { state.connection = nil }
            return (state.task, state.connection)
        }
        task?.cancel()
        await task?.value
        let rejoining = state.withLock { $0.rejoining }
        rejoining?.cancel()
        await rejoining?.value
        try? await connection?.close()
    }
}
