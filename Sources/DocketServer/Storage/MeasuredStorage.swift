import Synchronization
import Tracing

/// A storage that reports to ``ServerMetrics`` how long each read and write waited for its connection, how long
/// it held it, how long each statement took, and which failed because the database could not be used.
///
/// When the request is traced (``Traces``), each read and write is a client span (`db.read`, `db.write`) with the
/// time it waited for its connection, and each statement a span of its own under it with the statement's text
/// (placeholders, never values).
struct MeasuredStorage: Storage {
    let base: any Storage
    let metrics: ServerMetrics

    var dialect: StorageDialect { base.dialect }
    var faults: StatementFaults { base.faults }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("read") { enter in try await base.read { db in try await enter(db, body) } }
    }

    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("write") { enter in try await base.write(scope: scope) { db in try await enter(db, body) } }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("write") { enter in try await base.writeUnordered { db in try await enter(db, body) } }
    }

    /// OpenTelemetry's `db.system.name` of the database.
    private var systemName: String { dialect == .postgres ? "postgresql" : "sqlite" }

    func close() async throws { try await base.close() }
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>? { base.logSignals(ignoring: ignoring) }
    var isAlone: Bool { base.isAlone }
    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async { await base.tryBeingAlone(catchingUp: catchingUp) }
    func latestEventSequence() async throws -> Int {
        let span = Traces.start("db.read", kind: .client)
        span?.attributes["db.system.name"] = systemName
        span?.attributes["db.operation.name"] = "event log head"
        defer { span?.end() }
        do {
            return try await base.latestEventSequence()
        } catch {
            if let span { Traces.failed(span, error) }
            if StorageUnavailable.classify(error) != nil { metrics.storageUnavailable("read") }
            throw error
        }
    }

    /// Runs `run`, whose body enters the given ``Entry`` with its connection as it starts: the time before that is
    /// the wait, the time after it the hold.
    private func measure<T: Sendable>(_ kind: String, _ run: (Entry) async throws -> T) async throws -> T {
        let asked = ContinuousClock.now
        let started = Started()
        let span = Traces.start(kind == "read" ? "db.read" : "db.write", kind: .client)
        span?.attributes["db.system.name"] = systemName
        do {
            let result = try await run(Entry(kind: kind, metrics: metrics, started: started, span: span))
            report(kind, asked: asked, started: started.instant, span: span)
            return result
        } catch {
            if let span, !Traces.isAnswer(error) { Traces.failed(span, error) }
            report(kind, asked: asked, started: started.instant, span: span)
            if StorageUnavailable.classify(error) != nil { metrics.storageUnavailable(kind) }
            throw error
        }
    }

    /// How a read's or write's body starts on its connection: the start is marked, statements are timed, and when
    /// traced the body runs in the read's or write's span (the storage may run it in a task of its own).
    private struct Entry: Sendable {
        let kind: String
        let metrics: ServerMetrics
        let started: Started
        let span: (any Span)?

        func callAsFunction<T: Sendable>(
            _ db: SQLExecutor, _ body: @Sendable (SQLExecutor) async throws -> T
        ) async throws -> T {
            started.mark()
            let traced = span.flatMap { span in Traces.tracer.map { ($0, span.context) } }
            let db = SQLExecutor(
                runner: MeasuredRunner(base: db.runner, kind: kind, metrics: metrics, traced: traced), dialect: db.dialect
            )
            guard let span else { return try await body(db) }
            return try await ServiceContext.$current.withValue(span.context) { try await body(db) }
        }
    }

    private func report(
        _ kind: String, asked: ContinuousClock.Instant, started: ContinuousClock.Instant?, span: (any Span)?
    ) {
        let now = ContinuousClock.now
        let waited = (started ?? now) - asked
        metrics.storage(kind, waited: waited, held: started.map { now - $0 } ?? .zero)
        guard let span else { return }
        span.attributes["docket.db.wait_ms"] = Double(waited.components.attoseconds) / 1e15
            + Double(waited.components.seconds) * 1000
        span.end()
    }

    /// When the body got its connection (the first time: a retried body keeps its first start).
    private final class Started: Sendable {
        private let value = Mutex<ContinuousClock.Instant?>(nil)
        func mark() { value.withLock { if $0 == nil { $0 = .now } } }
        var instant: ContinuousClock.Instant? { value.withLock { $0 } }
    }
}

/// Times each statement of a connection; when traced, each is a span under the read's or write's.
private struct MeasuredRunner: SQLRunner {
    let base: any SQLRunner
    let kind: String
    let metrics: ServerMetrics
    /// The tracer and the read's or write's span context, when traced.
    let traced: (any Tracer, ServiceContext)?

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try await measure(sql) { try await base.rows(sql) }
    }

    func lastRows(_ sql: SQLFragment) async throws -> [ResultRow] {
        try await measure(sql) { try await base.lastRows(sql) }
    }

    var ranAlone: Bool { base.ranAlone }
    // A transaction's `BEGIN`, sent just before its first statement (``DeferredTransaction``), is timed with that
    // statement: the round trip it costs is part of what the first statement waited for.

    private func measure(_ sql: SQLFragment, _ run: () async throws -> [ResultRow]) async throws -> [ResultRow] {
        let start = ContinuousClock.now
        defer { metrics.statement(kind, took: ContinuousClock.now - start) }
        guard let (tracer, parent) = traced else { return try await run() }
        let span = tracer.startSpan("db.statement", context: parent, ofKind: .client)
        span.attributes["db.query.text"] = sql.tracedText()
        defer { span.end() }
        do {
            let rows = try await run()
            span.attributes["db.response.returned_rows"] = Int64(rows.count)
            return rows
        } catch {
            if !Traces.isAnswer(error) { Traces.failed(span, error) }
            throw error
        }
    }
}
