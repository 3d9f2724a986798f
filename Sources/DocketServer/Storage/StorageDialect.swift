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
        // Named, not left to the server's default: an exclusive write's reads must see every commit made before its
        // advisory lock was granted (``UserDirectory/holds(_:_:)``), which REPEATABLE READ, set as a default, would not.
        case .postgres: return "BEGIN ISOLATION LEVEL READ COMMITTED"
        }
    }

    /// Whether a record's insert answers with its row as inserted (`INSERT INTO t AS alias … RETURNING <the
    /// columns of its read>`; ``SelectPlan/Returning``), one round trip fewer than a read after it. PostgreSQL only:
    /// on SQLite the read after the insert runs on the writer's own connection, with no round trip to save.
    var insertAnswersRow: Bool {
        switch self {
        case .sqlite: return false
        case .postgres: return true
        }
    }

    /// Whether the statement that writes a record's row (an insert or an update) also appends its event and adds its
    /// journal entries (``insertAppendingEvent(_:returnsRows:event:also:)``,
    /// ``updateAppendingEvent(_:returnsRows:event:also:)``): PostgreSQL only.
    var writeAppendsEvent: Bool { self == .postgres }

    /// The event log's columns an append writes, in the order ``appendingEvent(_:)`` takes their values.
    static let eventColumns = [
        "table_name", "root_table", "record_id", "operation", "fields", "user_name", "created_on", "values_after", "values_before",
    ]

    /// One statement that appends an event (the values of ``eventColumns``) and returns its sequence, first column
    /// of its one row.
    ///
    /// SQLite: an `INSERT … RETURNING seq` (one connection writes, so sequences commit in the order they are drawn).
    ///
    /// PostgreSQL: `docket_append_event` (``SchemaStore``'s `2026-11-30-concurrent-writes`), so that writers need
    /// no lock for the log to be read without gaps. Writes commit in any order there, so a reader may see sequence
    /// 12 while 11 is still in flight. The function draws the number after the transaction has its id, and writes
    /// the row in a subtransaction whose id is given after the number was drawn: the row's `xmin`. Every
    /// transaction that could hold a smaller number therefore has an id below that `xmin`, and once a reader's
    /// snapshot has every transaction below it ended (`pg_snapshot_xmin`), a number missing below the row will
    /// never appear (its transaction rolled back). See ``eventsAfter(_:limit:columns:)``. The processes listening
    /// on the schema's channel are woken after the commit, by the writer (``PostgresStorage/announce(_:)``).
    func appendingEvent(_ values: [SQLFragment]) -> SQLFragment {
        switch self {
        case .sqlite:
            return "INSERT INTO docket_event_log (" + SQLFragment(Self.eventColumns.joined(separator: ", ")) + ") VALUES ("
                + values.joined(", ") + ") RETURNING seq"
        case .postgres:
            return "SELECT docket_append_event(" + values.joined(", ") + ") AS seq"
        }
    }

    /// An insert (`INSERT …`, with or without `RETURNING`) that also appends its record's event in the same
    /// statement, one round trip fewer than the two apart: its rows are the insert's (`RETURNING`'s columns, or
    /// none named) with the event's sequence as `docket_event_seq`. `event`: the values of ``eventColumns`` for
    /// ``appendingEvent(_:)``, whose `values_after` may take the inserted row's number (``withInsertedNumber(_:)``).
    /// PostgreSQL only (nil on SQLite, where the append costs no round trip).
    /// `also`: statements that run with it, in its `WITH` (a journal entry's insert, reading the inserted row from
    /// ``WrittenRows/inserted``).
    func insertAppendingEvent(_ insert: SQLFragment, returnsRows: Bool, event: [SQLFragment], also: [SQLFragment] = []) -> SQLFragment? {
        writeAppendingEvent(insert, named: .inserted, returnsRows: returnsRows, event: event, also: also, oneRow: false)
    }

    /// An update of one row (`UPDATE …`, with or without `RETURNING`) that also appends the record's event in the
    /// same statement, as ``insertAppendingEvent(_:returnsRows:event:also:)`` does for an insert, with the statements of
    /// `also` (reading the updated row from ``WrittenRows/updated``). An update that matches no row appends nothing and
    /// runs nothing of `also` that reads its row. `oneRow`: the statement returns one row whatever the update matched,
    /// its `docket_event_seq` null when it matched none (so that a missing row means an answer lost, never a row
    /// unmatched); otherwise a row for each row updated. PostgreSQL only.
    func updateAppendingEvent(
        _ update: SQLFragment, returnsRows: Bool, event: [SQLFragment], also: [SQLFragment] = [], oneRow: Bool = false
    ) -> SQLFragment? {
        writeAppendingEvent(update, named: .updated, returnsRows: returnsRows, event: event, also: also, oneRow: oneRow)
    }

    /// The names under which the statements of ``insertAppendingEvent(_:returnsRows:event:also:)`` and
    /// ``updateAppendingEvent(_:returnsRows:event:also:oneRow:)`` give the rows they wrote to the statements of their
    /// `also`.
    enum WrittenRows: String, Sendable {
        case inserted = "docket_inserted"
        case updated = "docket_updated"

        var fragment: SQLFragment { SQLFragment(rawValue) }
    }

    private func writeAppendingEvent(
        _ write: SQLFragment, named name: WrittenRows, returnsRows: Bool, event: [SQLFragment], also: [SQLFragment], oneRow: Bool
    ) -> SQLFragment? {
        switch self {
        case .sqlite: return nil
        case .postgres:
            // The data-modifying WITH runs its write before the outer query (and the statements of `also`) read its
            // row: the event is appended after the row is written, as when the two are apart, and once for each row
            // written. A write that returns no columns of its own returns `<name>_row` (1); so does one that must answer
            // with one row (`oneRow`), whose `RETURNING` is its last clause.
            let rows = name.fragment
            let marker = rows + SQLFragment("_row")
            let returned: SQLFragment = !returnsRows ? " RETURNING 1 AS " + marker : oneRow ? ", 1 AS " + marker : ""
            var statement: SQLFragment = "WITH " + rows + " AS (" + write + returned + ")"
            for (index, other) in also.enumerated() {
                statement += ", " + rows + SQLFragment("_also\(index)") + " AS (" + other + ")"
            }
            let append: SQLFragment = "docket_append_event(" + event.joined(", ") + ")"
            guard oneRow else { return statement + " SELECT " + rows + ".*, " + append + " AS docket_event_seq FROM " + rows }
            // One row whatever was written: the event appended only for a row written.
            return statement + " SELECT " + rows + ".*, CASE WHEN " + rows + "." + marker + " IS NOT NULL THEN " + append
                + " END AS docket_event_seq FROM (SELECT 1) AS docket_one LEFT JOIN " + rows + " ON true"
        }
    }

    /// The JSON object `json` (text, bound) with the `number` the statement of
    /// ``insertAppendingEvent(_:returnsRows:event:also:)`` drew added first: its `values_after`.
    func withInsertedNumber(_ json: String) -> SQLFragment {
        "('{\"number\":' || to_json(docket_inserted." + .identifier("number") + "::text)::text || "
            + .bind(json == "{}" ? "}" : "," + json.dropFirst()) + ")"
    }

    /// The PostgreSQL function behind ``appendingEvent(_:)``.
    static let appendEventFunction = """
        CREATE OR REPLACE FUNCTION docket_append_event(p_table text, p_root text, p_record text, p_operation text, \
        p_fields text, p_user text, p_created text, p_after text, p_before text) RETURNS bigint LANGUAGE plpgsql AS $$
        DECLARE
            drawn bigint;
        BEGIN
            -- The transaction has its id before the number is drawn.
            PERFORM pg_current_xact_id();
            -- A block with an exception clause is a subtransaction: its id, the row's xmin, is given at the insert,
            -- after the default (nextval) drew the number.
            BEGIN
                INSERT INTO docket_event_log (table_name, root_table, record_id, operation, fields, user_name, \
        created_on, values_after, values_before, writer)
                VALUES (p_table, p_root, p_record, p_operation, p_fields, p_user, p_created, p_after, p_before, 2)
                RETURNING seq INTO drawn;
            EXCEPTION WHEN query_canceled THEN
                RAISE;
            END;
            RETURN drawn;
        END
        $$
        """

    /// Whether the event row `e` may be passed by a reader: everything numbered below it committed or rolled
    /// back for good. Always on SQLite. On PostgreSQL, when no transaction of this database that was in flight in
    /// the reader's snapshot has an id below the row's `xmin` (made 64 bits against the snapshot's `xmax`; see
    /// ``appendingEvent(_:)``): the snapshot's in-progress ids, less those of sessions and prepared transactions
    /// of other databases (they never write this log), so that a long transaction elsewhere on the server holds
    /// nothing up. Needs the `horizon` of ``eventHorizon`` in the statement.
    private var settledExpression: SQLFragment {
        switch self {
        case .sqlite: return "1"
        case .postgres: return SQLFragment(Self.postgresSettled)
        }
    }

    private static let postgresSettled =
        "(pg_snapshot_xmax(pg_current_snapshot())::text::bigint - ((pg_snapshot_xmax(pg_current_snapshot())::text::bigint"
        + " - e.xmin::text::bigint) % 4294967296 + 4294967296) % 4294967296 < horizon.h)"

    /// The `horizon` (column `h`) ``settledExpression`` compares with: the oldest transaction of this database in
    /// flight in the statement's snapshot, or the snapshot's `xmax` when there is none. Ids of other databases'
    /// sessions are known only after the snapshot was taken: a transaction that ended in between stays in (it
    /// holds nothing up for longer than it ran), and one that is not listed as another database's is counted.
    private static let postgresHorizon =
        "(SELECT COALESCE((SELECT min(x::text::bigint) FROM pg_snapshot_xip(pg_current_snapshot()) AS x"
        + " WHERE x::text::bigint % 4294967296 NOT IN (SELECT backend_xid::text::bigint FROM pg_stat_activity"
        + " WHERE backend_xid IS NOT NULL AND datname IS DISTINCT FROM current_database()"
        + " UNION ALL SELECT transaction::text::bigint FROM pg_prepared_xacts WHERE database <> current_database())),"
        + " pg_snapshot_xmax(pg_current_snapshot())::text::bigint) AS h) AS horizon"

    private var eventsFrom: String {
        switch self {
        case .sqlite: return "docket_event_log e"
        case .postgres: return "docket_event_log e, " + Self.postgresHorizon
        }
    }

    /// The events after `sequence`, oldest first, at most `limit`, with `columns` and a column `settled`
    /// (1 or true when the row may be passed over a gap before it: ``settledExpression``).
    func eventsAfter(_ sequence: Int, limit: Int, columns: String) -> SQLFragment {
        "SELECT " + SQLFragment(columns) + ", " + settledExpression + " AS settled FROM " + SQLFragment(eventsFrom)
            + " WHERE e.seq > " + .bind(sequence) + " ORDER BY e.seq LIMIT " + .bind(limit)
    }

    /// The newest sequence in the event log (0 when it is empty), committed or not below it.
    static let newestEventSequenceSQL = "SELECT COALESCE(MAX(seq), 0) FROM docket_event_log"

    /// The event log's head as a follower may start from it: the newest sequence below which nothing is still in
    /// flight (0 when the log is empty). On SQLite the newest sequence.
    var settledEventSequenceSQL: String {
        switch self {
        case .sqlite: return Self.newestEventSequenceSQL
        case .postgres:
            return "SELECT COALESCE((SELECT e.seq FROM " + eventsFrom + " WHERE " + Self.postgresSettled
                + " ORDER BY e.seq DESC LIMIT 1), 0)"
        }
    }

    /// One statement that takes the next number from a numbered table's `sequence` and inserts a row with it as
    /// `number` (prefix, then the value padded with zeros to `digits`), returning the number: PostgreSQL, where
    /// ``NumberSequences`` hand numbers out without a lock. nil on SQLite (its counter row costs no round trip).
    /// `returning`: more of the inserted row to return, its columns named through `alias`.
    func insertTakingNumber(
        into table: String, columns: [SQLFragment], values: [SQLFragment], sequence: String, prefix: String, digits: Int,
        returning: (alias: String, columns: SQLFragment)? = nil
    ) -> SQLFragment? {
        switch self {
        case .sqlite: return nil
        case .postgres:
            let number: SQLFragment = "(SELECT " + .bind(prefix) + " || lpad(taken::text, GREATEST(" + .bind(digits)
                + ", length(taken::text)), '0') FROM (SELECT nextval(" + .bind(sequence) + "::regclass) AS taken) AS drawn)"
            let target: SQLFragment = returning.map { .identifier(table) + " AS " + .identifier($0.alias) } ?? .identifier(table)
            return "INSERT INTO " + target + " (" + (columns + [.identifier("number")]).joined(", ") + ") VALUES ("
                + (values + [number]).joined(", ") + ") RETURNING number" + (returning.map { ", " + $0.columns } ?? "")
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

    /// What makes a read of a write's transaction lock the rows it reads of the table under `alias` until the
    /// transaction ends (`FOR UPDATE OF`, never a joined table's), reading them as their newest committed version.
    /// Nothing on SQLite, whose one writer has every row to itself.
    func lockingRows(of alias: String) -> SQLFragment {
        switch self {
        case .sqlite: return ""
        case .postgres: return " FOR UPDATE OF " + .identifier(alias)
        }
    }

    /// The version of the row of the table under `alias`, as text, which every change of the row renews: PostgreSQL's
    /// `xmin` (the transaction that wrote the row as it is; a lock does not change it, freezing keeps it). Nil on
    /// SQLite, whose one writer needs none.
    func rowVersion(of alias: String) -> SQLFragment? {
        switch self {
        case .sqlite: return nil
        case .postgres: return .identifier(alias) + ".xmin::text"
        }
    }

    /// The condition that the row written is still at `version` (``rowVersion(of:)``).
    func rowIsAt(_ version: String) -> SQLFragment {
        "xmin = " + .bind(version) + "::xid"
    }

    /// Whether `error` is a serialization failure (SQLSTATE 40001): on PostgreSQL under an isolation stricter than
    /// READ COMMITTED (a server whose default is REPEATABLE READ), what a statement that meets a row changed since its
    /// snapshot gets.
    func isSerializationFailure(_ error: any Error) -> Bool {
        self == .postgres && (error as? PostgresStatementError)?.sqlState == "40001"
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
