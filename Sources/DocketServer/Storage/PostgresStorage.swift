import DocketModel
import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresKit
import PostgresNIO
import SQLKit
import Synchronization

/// PostgreSQL storage: a pool of connections (postgres-nio's `PostgresClient`), statements serialised by
/// SQLKit's PostgreSQL dialect.
///
/// Writes are serialised across every docketd sharing the database: each write transaction first takes one
/// transaction-scoped advisory lock (`pg_advisory_xact_lock`), as SQLite's `BEGIN IMMEDIATE` takes its write
/// lock. That keeps the engine's read-then-write steps (numbering, version checks, quotas) exact without
/// retry loops, and makes the event log's sequence numbers commit in the order they were drawn, so a follower
/// never passes a number that a slower transaction commits later. Reads run concurrently on the other
/// connections, each statement seeing every transaction committed before it started.
final class PostgresStorage: Storage {
    let dialect = StorageDialect.postgres
    let faults = StatementFaults()
    let location: PostgresLocation
    private let logger: Logger
    /// Writers of this process queue here, so that they wait without holding a pooled connection.
    private let writeLock = AsyncLock()
    let headConnection: HeadConnection
    private let pool: Mutex<Pool>

    /// The connection pool in use and what is known of the server's health.
    private struct Pool {
        var client: PostgresClient
        var runTask: Task<Void, Never>
        /// Set while the server cannot be reached: requests fail at once instead of each waiting for a lease.
        var down: StorageUnavailable?
        var downSince: ContinuousClock.Instant?
        /// The probe under way, if any (see ``PostgresStorage/probe()``).
        var probing = false
        var closed = false
        /// Pools replaced after an outage, still finishing the requests that hold their connections.
        var retired: [Task<Void, Never>] = []
    }

    /// How long a request waits for a pooled connection before it is answered 503: postgres-nio's pool waits
    /// without end while it cannot connect.
    static let leaseTimeout = Duration.seconds(4)
    /// After this long without a connection, the server's health is checked (without failing the request).
    static let probeAfter = Duration.seconds(1)
    /// The most connections a pool opens.
    private let connections: Int

    /// The advisory lock key every write transaction holds: one per schema, so that docketd instances of
    /// different deployments sharing a database (each in its own schema) do not wait for each other.
    var writeLockKey: Int64 { Self.writeLockKey(schema: location.schema ?? "public") }

    /// FNV-1a of "docket:" and the schema name: stable across processes and versions.
    static func writeLockKey(schema: String) -> Int64 {
        Int64(bitPattern: FNV1a.hash(("docket:" + schema).utf8))
    }

    private init(location: PostgresLocation, connections: Int, logger: Logger) async {
        self.location = location
        self.connections = connections
        self.logger = logger
        headConnection = HeadConnection(location: location)
        let (client, runTask) = await Self.startClient(location, connections: connections, logger: logger)
        pool = Mutex(Pool(client: client, runTask: runTask))
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
            if let schema = location.schema {
                // Under the schema's lock: instances starting at once would otherwise both try to create it, and
                // all but one fail (CREATE SCHEMA IF NOT EXISTS is not safe against itself).
                let runner = PostgresRunner(connection: probe, logger: logger)
                try await runner.run("BEGIN")
                try await runner.run("SELECT pg_advisory_xact_lock(" + .bind(Int(Self.writeLockKey(schema: schema))) + ")")
                try await runner.run("CREATE SCHEMA IF NOT EXISTS " + .identifier(schema))
                try await runner.run("COMMIT")
            }
            try await probe.close()
        } catch {
            try? await probe.close()
            throw PostgresStorageError.unreachable(location.redacted, reason: Self.describe(error))
        }
        return await PostgresStorage(location: location, connections: max(2, connections), logger: logger)
    }

    /// A new pool, running: it serves leases only once run() has begun, so this returns when it has (no
    /// statement of run() suspends before it marks the client running).
    private static func startClient(
        _ location: PostgresLocation, connections: Int, logger: Logger
    ) async -> (PostgresClient, Task<Void, Never>) {
        var configuration = location.clientConfiguration
        configuration.options.maximumConnections = connections
        configuration.options.connectTimeout = .seconds(3)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let (started, starting) = AsyncStream<Void>.makeStream()
        let runTask = Task {
            starting.yield()
            starting.finish()
            await client.run()
        }
        for await _ in started { break }
        return (client, runTask)
    }

    /// Runs `body` on a pooled connection. Fails at once with ``StorageUnavailable`` while the server is known to
    /// be unreachable, and after ``leaseTimeout`` when no connection could be had; a connection that breaks under
    /// `body` is reported the same way. Either starts a probe that watches for the server's return.
    private func withConnection<T: Sendable>(_ body: @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        let (client, down) = pool.withLock { ($0.client, $0.down) }
        if let down { throw down }
        do {
            return try await withoutActuallyEscaping(body) { body in
                try await Self.lease(
                    client, within: Self.leaseTimeout, onSlowLease: { self.startProbe() }, isDown: { self.unavailable }, body
                )
            }
        } catch {
            guard let unavailable = StorageUnavailable.classify(error) else { throw error }
            startProbe()
            throw unavailable
        }
    }

    /// A lease that gives up after `timeout`, or sooner once the probe started after ``probeAfter`` finds the
    /// server unreachable: the pool's own wait is cancelled (postgres-nio withdraws the request), and the caller
    /// learns that the database did not answer in time.
    private static func lease<T: Sendable>(
        _ client: PostgresClient, within timeout: Duration, onSlowLease: @escaping @Sendable () -> Void,
        isDown: @escaping @Sendable () -> StorageUnavailable?, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        // 0: waiting for a connection; 1: leased (the timer stands down); 2: given up (a lease that comes after
        // is returned unused). Decided once, so a body never starts after its request was answered 503.
        let state = LeaseState()
        let unavailable = StorageUnavailable(reason: "no connection to PostgreSQL within \(timeout)")
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    guard state.value.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged else {
                        throw unavailable
                    }
                    return try await body(connection)
                }
            }
            group.addTask {
                try await Task.sleep(for: probeAfter)
                if state.value.load(ordering: .acquiring) == 1 { return nil }
                onSlowLease()
                // Until the deadline, or until the probe finds the server unreachable: then at once.
                let deadline = ContinuousClock.now + (timeout - probeAfter)
                var reason = unavailable
                while ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(100))
                    if state.value.load(ordering: .acquiring) == 1 { return nil }
                    if let down = isDown() {
                        reason = down
                        break
                    }
                }
                guard state.value.compareExchange(expected: 0, desired: 2, ordering: .acquiringAndReleasing).exchanged else { return nil }
                throw reason
            }
            defer { group.cancelAll() }
            while let result = try await group.next() {
                if let result { return result }
            }
            throw CancellationError()
        }
    }

    private final class LeaseState: Sendable {
        let value = Atomic<Int>(0)
    }

    /// Checks, on a connection of its own, whether the server answers. When it does not, requests fail at once
    /// from then on, and it tries again (every 250 ms, then up to every second) until the server answers; then a
    /// fresh pool takes over, since postgres-nio's pool may wait up to a minute between its own tries after a
    /// long outage. When the server answers at once, nothing changes: the pool recovers by itself.
    private func startProbe() {
        let start = pool.withLock { pool -> Bool in
            guard !pool.probing, !pool.closed else { return false }
            pool.probing = true
            return true
        }
        guard start else { return }
        Task { await self.probe() }
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
                    _ = try await PostgresRunner(connection: connection, logger: logger).rows("SELECT 1")
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
                if pool.withLock({ $0.closed }) { break }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(1))
            }
        }
        guard failures > 0 else {
            pool.withLock { $0.probing = false }
            return
        }
        let (client, runTask) = await Self.startClient(location, connections: connections, logger: logger)
        let replaced = pool.withLock { pool -> (Task<Void, Never>, Duration?)? in
            guard !pool.closed else { return nil }
            defer {
                pool.retired.append(pool.runTask)
                pool.client = client
                pool.runTask = runTask
                pool.down = nil
                pool.downSince = nil
                pool.probing = false
            }
            return (pool.runTask, pool.downSince.map { ContinuousClock.now - $0 })
        }
        guard let replaced else {
            runTask.cancel()
            return
        }
        let (old, outage) = replaced
        logger.notice("The database answers again; serving requests", metadata: ["after": "\(outage ?? .zero)"])
        // Requests that still hold a connection of the old pool finish first.
        Task {
            try? await Task.sleep(for: .seconds(30))
            old.cancel()
            self.pool.withLock { $0.retired.removeAll { $0 == old } }
        }
    }

    /// Whether the server is known to be unreachable right now (for `/health`).
    var unavailable: StorageUnavailable? { pool.withLock { $0.down } }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await body(SQLExecutor(runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults), dialect: self.dialect))
        }
    }

    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        if let down = unavailable { throw down }
        return try await writeLock.withLock(timeout: Self.leaseTimeout) {
            try await self.withConnection { connection in
                let executor = SQLExecutor(
                    runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults), dialect: self.dialect
                )
                do {
                    return try await executor.transaction(
                        first: ["SELECT pg_advisory_xact_lock(" + .bind(Int(self.writeLockKey)) + ")"], body
                    )
                } catch let failed as RollbackFailed {
                    // Never back to the pool still inside the transaction, holding the write lock of every
                    // instance: closed, the pool replaces it, and the server ends the transaction.
                    self.logger.error("A write could not be rolled back; its connection is closed", metadata: ["error": "\(failed.cause)"])
                    try? await connection.close()
                    throw failed.cause
                }
            }
        }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await withConnection { connection in
            try await body(SQLExecutor(runner: PostgresRunner(connection: connection, logger: self.logger, faults: self.faults), dialect: self.dialect))
        }
    }

    /// The log's head, read before answering each batch of requests (``RecordStore/catchUp()``): a prepared
    /// statement on a connection of its own, so that the read costs no parse, plan or pool lease. Falls back to
    /// the pool while that connection cannot be had.
    func latestEventSequence() async throws -> Int {
        if let down = unavailable { throw down }
        if let connection = await headConnection.connection(logger: logger) {
            do {
                return try await Self.sequence(from: connection.execute(LatestEventSequence(), logger: logger))
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                // The connection broke (or the server dropped the prepared statement's table): replaced later.
                await headConnection.failed(connection)
            }
        }
        return try await withConnection { connection in
            try await Self.sequence(from: connection.execute(LatestEventSequence(), logger: self.logger))
        }
    }

    private static func sequence(from rows: AsyncThrowingMapSequence<PostgresRowSequence, Int>) async throws -> Int {
        var sequence = 0
        for try await value in rows { sequence = value }
        return sequence
    }

    private struct LatestEventSequence: PostgresPreparedStatement {
        static let name = "docket_latest_event_sequence"
        static let sql = PostgresStorage.latestEventSequenceSQL
        typealias Row = Int
        func makeBindings() -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int { try row.decode(Int.self) }
    }

    func close() async throws {
        await headConnection.close()
        let runTasks = pool.withLock { pool in
            pool.closed = true
            return [pool.runTask] + pool.retired
        }
        for task in runTasks {
            task.cancel()
            await task.value
        }
    }

    /// Notification channels are `docket_` and the schema's name, so that deployments in different schemas of
    /// one database do not wake each other.
    static let channelPrefix = "docket_"

    /// Listens on a connection of its own; when it breaks, connects again (waiting up to 5 s between tries)
    /// and signals once after each connection, since notifications sent meanwhile were lost.
    func logSignals() -> AsyncStream<Void>? {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let (location, logger) = (self.location, self.logger)
        let task = Task {
            var delay = Duration.milliseconds(100)
            // Since when the notifications were lost, to say when they are back.
            var lostSince: ContinuousClock.Instant? = nil
            while !Task.isCancelled {
                do {
                    let connection = try await PostgresConnection.connect(
                        configuration: try location.connectionConfiguration(searchPath: true), id: 2, logger: logger
                    )
                    do {
                        let schema = try await PostgresRunner(connection: connection, logger: logger)
                            .rows("SELECT current_schema() AS name").first?.value(at: "name", kind: .text).text ?? "public"
                        try await connection.listen(on: Self.channelPrefix + schema) { notifications in
                            continuation.yield()
                            delay = .milliseconds(100)
                            if let since = lostSince {
                                logger.notice(
                                    "Listening for the event log's notifications again",
                                    metadata: ["after": "\(ContinuousClock.now - since)"]
                                )
                                lostSince = nil
                            }
                            for try await _ in notifications { continuation.yield() }
                        }
                    } catch {
                        if !Task.isCancelled {
                            logger.warning("Lost the event log's notifications; listening again", metadata: ["error": "\(Self.describe(error))"])
                            lostSince = lostSince ?? .now
                        }
                    }
                    try? await connection.close()
                } catch {
                    logger.warning("Cannot listen for the event log's notifications", metadata: ["error": "\(Self.describe(error))"])
                    lostSince = lostSince ?? .now
                }
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
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

/// A statement failed on the server; carries the server's message and SQLSTATE so that callers (and
/// ``StorageDialect/isIntegerOverflow(_:)``) can tell what went wrong.
struct PostgresStatementError: Error, CustomStringConvertible {
    let message: String
    let sqlState: String?

    var description: String { sqlState.map { "\(message) (SQLSTATE \($0))" } ?? message }
}

/// Runs statements on one PostgreSQL connection. Text and integers are bound as text of no declared type, so that
/// the server infers each one's type from where it stands, as SQLite's affinity does: an integer column compared
/// with a bound "42" works on both. Doubles are bound as `float8`, blobs as `bytea`.
struct PostgresRunner: SQLRunner {
    let connection: PostgresConnection
    let logger: Logger
    var faults: StatementFaults? = nil

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try faults?.check(sql)
        let (text, binds) = connection.sql().serialize(sql)
        var bindings = PostgresBindings(capacity: binds.count)
        for bind in binds {
            switch bind {
            // PostgreSQL's text cannot hold NUL: it becomes U+FFFD (SQLite keeps it), so such input is stored or
            // matched like any other text instead of failing the statement.
            case let value as String:
                bindings.append(UntypedText(value.contains("\u{0}") ? value.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") : value))
            case let value as Int: bindings.append(UntypedText(String(value)))
            // Typed, so that an integer expression compared with it is widened rather than the number narrowed.
            case let value as Double: bindings.append(value)
            case let value as Bool: bindings.append(UntypedText(value ? "1" : "0"))
            case let value as SQLBlob: bindings.append(ByteBuffer(bytes: value.bytes))
            default: throw PostgresStorageError.unsupportedBind(String(describing: type(of: bind)))
            }
        }
        do {
            let sequence = try await connection.query(PostgresQuery(unsafeSQL: text, binds: bindings), logger: logger)
            var result: [ResultRow] = []
            var columns: PostgresColumns?
            for try await row in sequence {
                let names = columns ?? PostgresColumns(row)
                columns = names
                result.append(ResultRow(try PostgresResultRow(row, columns: names)))
            }
            return result
        } catch let error as PSQLError {
            if let message = error.serverInfo?[.message] {
                throw PostgresStatementError(message: message, sqlState: error.serverInfo?[.sqlState])
            }
            throw error
        }
    }

    func run(_ sql: SQLFragment) async throws { _ = try await rows(sql) }
}

/// Text whose type the server infers (type OID 0, text format).
private struct UntypedText: PostgresDynamicTypeEncodable {
    let text: String
    init(_ text: String) { self.text = text }

    var psqlType: PostgresDataType { .null }
    var psqlFormat: PostgresFormat { .text }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeString(text)
    }
}

/// Column names of one result, shared by its rows.
final class PostgresColumns: Sendable {
    let index: [String: Int]
    let first: String?

    init(_ row: PostgresRow) {
        var index: [String: Int] = [:]
        var first: String?
        for (position, cell) in row.enumerated() {
            if first == nil { first = cell.columnName }
            if index[cell.columnName] == nil { index[cell.columnName] = position }
        }
        self.index = index
        self.first = first
    }
}

/// A PostgreSQL row converted to driver-neutral values as it arrives, so that a value out of range fails the
/// statement (where callers handle it) rather than a later read.
struct PostgresResultRow: StorageRow {
    enum Cell: Sendable {
        case value(SQLValue)
        case bytes([UInt8])
    }

    let columns: PostgresColumns
    let cells: [Cell]

    init(_ row: PostgresRow, columns: PostgresColumns) throws {
        self.columns = columns
        var cells: [Cell] = []
        for cell in row { cells.append(try Self.cell(cell)) }
        self.cells = cells
    }

    var firstValue: SQLValue {
        guard let cell = cells.first else { return .null }
        return Self.value(cell)
    }

    func value(at column: String, kind: ColumnKind) throws -> SQLValue {
        guard let position = columns.index[column], position < cells.count else { return .null }
        return Self.value(cells[position])
    }

    func bytes(at column: String) throws -> [UInt8]? {
        guard let position = columns.index[column], position < cells.count else { return nil }
        switch cells[position] {
        case .bytes(let bytes): return bytes
        case .value(let value): return value.text.map { Array($0.utf8) }
        }
    }

    private static func value(_ cell: Cell) -> SQLValue {
        switch cell {
        case .value(let value): return value
        case .bytes(let bytes): return .text(String(decoding: bytes, as: UTF8.self))
        }
    }

    private static func cell(_ cell: PostgresCell) throws -> Cell {
        guard cell.bytes != nil else { return .value(.null) }
        switch cell.dataType {
        case .int2, .int4, .int8, .oid: return .value(.integer(try cell.decode(Int.self)))
        case .float4, .float8: return .value(.real(try cell.decode(Double.self)))
        case .bool: return .value(.integer(try cell.decode(Bool.self) ? 1 : 0))
        case .bytea:
            guard cell.format == .binary, let buffer = cell.bytes else { return .value(.null) }
            return .bytes(Array(buffer.readableBytesView))
        case .numeric:
            // SUM and AVG of integers are numeric: integral ones must fit 64 bits, as SQLite's do.
            let text = "\(try cell.decode(Decimal.self))"
            if let integer = Int(text) { return .value(.integer(integer)) }
            if !text.contains("."), !text.contains("e"), !text.contains("E") {
                throw PostgresStatementError(message: "bigint out of range", sqlState: "22003")
            }
            return .value(.real(Double(text) ?? .nan))
        case .void: return .value(.null)
        case .text, .varchar, .bpchar, .name, .json, .jsonb, .uuid:
            return .value(.text(try cell.decode(String.self)))
        default:
            if cell.format == .text, let bytes = cell.bytes { return .value(.text(String(buffer: bytes))) }
            throw PostgresStorageError.unsupportedColumn(cell.columnName, type: "\(cell.dataType)")
        }
    }
}

extension StorageUnavailable {
    /// PostgreSQL's ways of being unavailable: a connection that could not be made or broke, a server shutting
    /// down or starting, too many connections, a full disk, a read-only standby.
    static func classifyPostgres(_ error: any Error) -> StorageUnavailable? {
        func unavailable(sqlState: String?, message: String) -> StorageUnavailable? {
            guard let state = sqlState else { return nil }
            // 08: connection exception; 57P01-03: shutting down or starting; 53: insufficient resources;
            // 25006: read-only transaction (a standby); 58030: I/O error.
            guard state.hasPrefix("08") || state.hasPrefix("53") || ["57P01", "57P02", "57P03", "25006", "58030"].contains(state)
            else { return nil }
            return StorageUnavailable(reason: "PostgreSQL: \(message)")
        }
        switch error {
        case let error as PostgresStatementError:
            return unavailable(sqlState: error.sqlState, message: error.message)
        case let error as PSQLError:
            switch error.code {
            case .server:
                return unavailable(sqlState: error.serverInfo?[.sqlState], message: error.serverInfo?[.message] ?? "server error")
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .uncleanShutdown, .poolClosed,
                .sslUnsupported, .failedToAddSSLHandler:
                return StorageUnavailable(reason: "the connection to PostgreSQL failed (\(PostgresStorage.describe(error)))")
            default:
                return nil
            }
        case is NIOConnectionError, is ChannelError, is IOError:
            return StorageUnavailable(reason: "the connection to PostgreSQL failed (\(PostgresStorage.describe(error)))")
        default:
            return nil
        }
    }
}
