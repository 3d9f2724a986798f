import DocketModel

extension SchemaStore {
    /// Writes without a cluster-wide lock on PostgreSQL: the event log's append function (read without gaps
    /// however writers commit: ``StorageDialect/appendingEvent(_:)``) and a sequence per numbered table
    /// (``NumberSequences``).
    ///
    /// The log gets a `writer` column that only the function fills (2: this way of appending): on PostgreSQL it has
    /// no default, so an older docketd still running on the database, which appends in its own way and takes
    /// numbers from the counters, can no longer write at all (every write of it fails) rather than break the
    /// order newer readers rely on or give a number twice. SQLite's column has the default (one process writes).
    static func allowConcurrentWrites(_ db: SQLExecutor) async throws {
        let present = Set(try await db.rows(db.dialect.columnNames(of: "docket_event_log"))
            .compactMap { try $0.value(at: "name", kind: .text).text })
        if !present.contains("writer") {
            try await db.run(
                "ALTER TABLE docket_event_log ADD COLUMN writer " + SQLFragment(db.dialect.integerType) + " NOT NULL DEFAULT 2"
            )
        }
        guard db.dialect == .postgres else { return }
        try await db.run("ALTER TABLE docket_event_log ALTER COLUMN writer DROP DEFAULT")
        try await db.run(SQLFragment(StorageDialect.appendEventFunction))
        try await NumberSequences.createAll(db)
    }

    /// PostgreSQL: the log's notification of a commit carries the event's number, so that an instance need not catch
    /// up on its own commits (``Storage/logSignals(ignoring:)``). Since ``announceAfterCommit(_:)`` the writer sends
    /// it, and this step writes the function as this version has it.
    static func notifyEventNumbers(_ db: SQLExecutor) async throws {
        guard db.dialect == .postgres else { return }
        try await db.run(SQLFragment(StorageDialect.appendEventFunction))
    }

    /// PostgreSQL: the append no longer notifies in the writing transaction (``StorageDialect/appendEventFunction``);
    /// the writer announces its events after the commit (``PostgresStorage/announce(_:)``). The function is the
    /// database's, so an older docketd still running on it during an upgrade then notifies nobody of its own writes:
    /// this version hears of them within a second (``SharedChangesService``'s poll), another older one only when it
    /// reads the log before a request. Older instances do hear this version's announcements (same channel).
    static func announceAfterCommit(_ db: SQLExecutor) async throws {
        guard db.dialect == .postgres else { return }
        try await db.run(SQLFragment(StorageDialect.appendEventFunction))
    }
}
