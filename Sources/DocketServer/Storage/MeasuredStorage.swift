import Synchronization

/// A storage that reports to ``ServerMetrics`` how long each read and write waited for its connection, how long
/// it held it, how long each statement took, and which failed because the database could not be used.
struct MeasuredStorage: Storage {
    let base: any Storage
    let metrics: ServerMetrics

    var dialect: StorageDialect { base.dialect }
    var faults: StatementFaults { base.faults }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("read") { wrap in try await base.read { db in try await body(wrap(db)) } }
    }

    func write<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("write") { wrap in try await base.write { db in try await body(wrap(db)) } }
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try await measure("write") { wrap in try await base.writeUnordered { db in try await body(wrap(db)) } }
    }

    func close() async throws { try await base.close() }
    func logSignals() -> AsyncStream<Void>? { base.logSignals() }
    func latestEventSequence() async throws -> Int {
        do {
            return try await base.latestEventSequence()
        } catch {
            if StorageUnavailable.classify(error) != nil { metrics.storageUnavailable("read") }
            throw error
        }
    }

    /// Runs `run`, whose body calls the given wrapper on its connection as it starts: the time before that is the
    /// wait, the time after it the hold.
    private func measure<T: Sendable>(
        _ kind: String, _ run: (@Sendable (SQLExecutor) -> SQLExecutor) async throws -> T
    ) async throws -> T {
        let asked = ContinuousClock.now
        let started = Started()
        let metrics = self.metrics
        do {
            let result = try await run { db in
                started.mark()
                return SQLExecutor(runner: MeasuredRunner(base: db.runner, kind: kind, metrics: metrics), dialect: db.dialect)
            }
            report(kind, asked: asked, started: started.instant)
            return result
        } catch {
            report(kind, asked: asked, started: started.instant)
            if StorageUnavailable.classify(error) != nil { metrics.storageUnavailable(kind) }
            throw error
        }
    }

    private func report(_ kind: String, asked: ContinuousClock.Instant, started: ContinuousClock.Instant?) {
        let now = ContinuousClock.now
        guard let started else { return metrics.storage(kind, waited: now - asked, held: .zero) }
        metrics.storage(kind, waited: started - asked, held: now - started)
    }

    /// When the body got its connection (the first time: a retried body keeps its first start).
    private final class Started: Sendable {
        private let value = Mutex<ContinuousClock.Instant?>(nil)
        func mark() { value.withLock { if $0 == nil { $0 = .now } } }
        var instant: ContinuousClock.Instant? { value.withLock { $0 } }
    }
}

/// Times each statement of a connection.
private struct MeasuredRunner: SQLRunner {
    let base: any SQLRunner
    let kind: String
    let metrics: ServerMetrics

    func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
        let start = ContinuousClock.now
        defer { metrics.statement(kind, took: ContinuousClock.now - start) }
        return try await base.rows(sql)
    }
}
