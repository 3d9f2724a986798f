/// The SQL dialects the engine runs on. Every statement that differs between them is chosen here and only
/// here, so the engine itself stays dialect-neutral.
enum StorageDialect: Sendable {
    case sqlite
    case postgres

    /// Starts a write transaction. SQLite takes the write lock up front so that a transaction never has to
    /// upgrade a read lock (which can deadlock with another writer).
    /// Starts a read-only transaction that sees one snapshot of the database throughout (a whole copy's reads).
    var beginSnapshot: String {
        switch self {
        case .sqlite: return "BEGIN"
        case .postgres: return "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
        }
    }

    var beginTransaction: String {
        switch self {
        case .sqlite: return "BEGIN IMMEDIATE"
        case .postgres: return "BEGIN"
        }
    }

    /// An `INSERT … RETURNING seq` into the event log, as one statement that also, where several processes may
    /// follow the same database, wakes each of them when the transaction commits (PostgreSQL's `pg_notify` in the
    /// same statement: one round trip, not two). The first column of its one row is the sequence.
    func appendingEvent(_ insert: SQLFragment) -> SQLFragment {
        switch self {
        case .sqlite: return insert + " RETURNING seq"
        case .postgres:
            return "WITH appended AS (" + insert + " RETURNING seq) SELECT seq, pg_notify("
                + .bind(PostgresStorage.channelPrefix) + " || current_schema(), '') FROM appended"
        }
    }

    /// One statement that takes the next number from `counter`'s row of `docket_number_counter` and inserts a
    /// row with it as `number` (prefix, then the value padded with zeros to `digits`), returning the number:
    /// PostgreSQL's data-modifying `WITH`. It returns no number when the counter has no row (the row is inserted
    /// without one). nil where the storage cannot (SQLite: there the two statements cost no round trip).
    func insertTakingNumber(
        into table: String, columns: [SQLFragment], values: [SQLFragment], counter: String, prefix: String, digits: Int
    ) -> SQLFragment? {
        switch self {
        case .sqlite: return nil
        case .postgres:
            // The counter's row stays locked until the transaction ends, as with a separate update.
            let number: SQLFragment = "(SELECT " + .bind(prefix) + " || lpad(taken::text, GREATEST(" + .bind(digits)
                + ", length(taken::text)), '0') FROM taken)"
            return "WITH taken AS (UPDATE docket_number_counter SET next_value = next_value + 1 WHERE table_name = "
                + .bind(counter) + " RETURNING next_value - 1 AS taken) INSERT INTO " + .identifier(table) + " ("
                + (columns + [.identifier("number")]).joined(", ") + ") VALUES (" + (values + [number]).joined(", ")
                + ") RETURNING number"
        }
    }

    /// The column type for an auto-incrementing 64-bit primary key.
    var sequencePrimaryKey: String {
        switch self {
        case .sqlite: return "INTEGER PRIMARY KEY AUTOINCREMENT"
        case .postgres: return "BIGSERIAL PRIMARY KEY"
        }
    }

    var integerType: String {
        switch self {
        case .sqlite: return "INTEGER"
        case .postgres: return "BIGINT"
        }
    }

    var realType: String {
        switch self {
        case .sqlite: return "REAL"
        case .postgres: return "DOUBLE PRECISION"
        }
    }

    /// The column type for text of records. PostgreSQL compares by the "C" collation, byte by byte as SQLite
    /// does, whatever locale the database was created with, so that sorting and paging agree on both.
    var textType: String {
        switch self {
        case .sqlite: return "TEXT"
        case .postgres: return "TEXT COLLATE \"C\""
        }
    }

    /// Sort direction keywords. Empty values (NULL) come first in ascending order and last in descending
    /// order, SQLite's rule, on both.
    func direction(descending: Bool) -> String {
        switch self {
        case .sqlite: return descending ? " DESC" : " ASC"
        case .postgres: return descending ? " DESC NULLS LAST" : " ASC NULLS FIRST"
        }
    }

    /// The column type for binary content.
    var blobType: String {
        switch self {
        case .sqlite: return "BLOB"
        case .postgres: return "BYTEA"
        }
    }

    /// Lists the columns of a table (one row per column, the name in a column called `name`).
    func columnNames(of table: String) -> SQLFragment {
        switch self {
        case .sqlite: return "SELECT name FROM pragma_table_info(" + .bind(table) + ")"
        case .postgres:
            return "SELECT column_name AS name FROM information_schema.columns WHERE table_schema = current_schema()"
                + " AND table_name = " + .bind(table)
        }
    }

    /// Casts an expression to text, for LIKE on numeric columns.
    func castToText(_ expression: SQLFragment) -> SQLFragment {
        "CAST(" + expression + " AS TEXT)"
    }

    /// Whether a statement failed because integer arithmetic left the 64-bit range (SQLite's `SUM` raises
    /// "integer overflow"; PostgreSQL's `bigint out of range`, SQLSTATE 22003).
    func isIntegerOverflow(_ error: any Error) -> Bool {
        let text = String(describing: error)
        switch self {
        case .sqlite: return text.contains("integer overflow")
        case .postgres: return text.contains("out of range") || text.contains("22003")
        }
    }

    /// A query returning one row when a table exists.
    func tableExists(_ name: String) -> SQLFragment {
        switch self {
        case .sqlite: return "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = " + .bind(name)
        case .postgres:
            return "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = "
                + .bind(name)
        }
    }

    /// A query returning one row when an index exists.
    func indexExists(_ name: String) -> SQLFragment {
        switch self {
        case .sqlite: return "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = " + .bind(name)
        case .postgres: return "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() AND indexname = " + .bind(name)
        }
    }

    /// Every table of the database (of the current schema on PostgreSQL), one row each, the name in `name`.
    var tableNames: SQLFragment {
        switch self {
        case .sqlite: return "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%' ORDER BY name"
        case .postgres:
            return "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema()"
                + " AND table_type = 'BASE TABLE' ORDER BY table_name"
        }
    }

    /// After rows were copied in with their sequence numbers, makes the event log's next number follow the
    /// highest copied (SQLite keeps its AUTOINCREMENT counter up to date by itself).
    var eventLogSequenceReset: SQLFragment? {
        switch self {
        case .sqlite: return nil
        case .postgres:
            return "SELECT setval(pg_get_serial_sequence('docket_event_log', 'seq'), GREATEST(COALESCE(MAX(seq), 0), 1),"
                + " COALESCE(MAX(seq), 0) > 0) FROM docket_event_log"
        }
    }
}
