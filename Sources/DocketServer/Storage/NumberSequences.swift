import DocketModel

/// Where records' numbers (INC0010001) come from on PostgreSQL: one sequence per numbered table, so that inserts
/// into a table never wait for each other. A row counter (`docket_number_counter`, what SQLite uses) would stay
/// locked by the inserting transaction until it commits, and every insert of the table in the whole cluster would
/// queue behind it. A sequence hands out numbers without a lock held: unique and increasing, with a gap where a
/// transaction that took one rolled back (ServiceNow's numbers have gaps too).
///
/// `docket_number_counter` stays the portable record of where each table's numbers start: each sequence is made
/// from its row, and ``carry(from:to:)`` brings the counters and sequences in line when a database is copied.
enum NumberSequences {
    /// The sequence of a numbered table (the table that owns the prefix): `docket_number_` and its name, or a
    /// digest of a name too long for PostgreSQL's 63-byte identifiers.
    static func name(of table: String) -> String {
        let name = "docket_number_" + table
        return name.utf8.count <= 63 ? name : "docket_number_" + String(FNV1a.hash(table.utf8), radix: 16)
    }

    /// Makes the table's sequence unless it exists, starting where its counter stands (or at `start`, the counter
    /// then made). Run in an exclusive write, so that two instances never create one at once.
    static func create(for table: String, start: Int, db: SQLExecutor) async throws {
        let key = SQLFragment.bind(table)
        var next = try await db.rows("SELECT next_value FROM docket_number_counter WHERE table_name = " + key).first
            .map { try $0.value(at: "next_value", kind: .integer).intValue }
        if next == nil {
            try await db.run(
                "INSERT INTO docket_number_counter (table_name, next_value) VALUES (" + key + ", " + .bind(start) + ")"
            )
            next = start
        }
        // DDL takes no parameters: the start is an integer written out.
        let first = max(0, (next ?? nil) ?? start)
        try await db.run(
            "CREATE SEQUENCE IF NOT EXISTS " + .identifier(name(of: table)) + " AS bigint MINVALUE 0 START WITH "
                + SQLFragment(String(first))
        )
    }

    /// Every counter's sequence (the migration that brought sequences in).
    static func createAll(_ db: SQLExecutor) async throws {
        guard db.dialect == .postgres else { return }
        for row in try await db.rows("SELECT table_name, next_value FROM docket_number_counter") {
            guard let table = try row.value(at: "table_name", kind: .text).text else { continue }
            try await create(for: table, start: try row.value(at: "next_value", kind: .integer).intValue ?? 1, db: db)
        }
    }

    /// The next number a table's sequence gives (nil when it has none).
    static func next(of table: String, db: SQLExecutor) async throws -> Int? {
        let sequence = name(of: table)
        guard try await db.rows("SELECT 1 FROM pg_class WHERE relkind = 'S' AND relname = " + .bind(sequence)
            + " AND relnamespace = current_schema()::regnamespace").first != nil
        else { return nil }
        guard let row = try await db.rows("SELECT last_value, is_called FROM " + .identifier(sequence)).first,
            let last = try row.value(at: "last_value", kind: .integer).intValue
        else { return nil }
        return try row.value(at: "is_called", kind: .integer).intValue == 1 ? last &+ 1 : last
    }

    /// Sets where a table's numbers go on (`nil`: where the table's numbering starts, as a new database would).
    static func restart(_ table: String, at value: Int, db: SQLExecutor) async throws {
        try await db.run("DELETE FROM docket_number_counter WHERE table_name = " + .bind(table))
        try await db.run(
            "INSERT INTO docket_number_counter (table_name, next_value) VALUES (" + .bind(table) + ", " + .bind(value) + ")"
        )
        guard db.dialect == .postgres else { return }
        try await create(for: table, start: value, db: db)
        try await db.run("SELECT setval(" + .bind(name(of: table)) + ", " + .bind(max(0, value)) + ", false)")
    }

    /// After a copy: a PostgreSQL source's counters are where its sequences stand, and a PostgreSQL target's
    /// sequences go on from the copied counters.
    static func carry(from source: SQLExecutor, to target: SQLExecutor) async throws {
        let tables = try await target.rows("SELECT table_name FROM docket_number_counter")
            .compactMap { try $0.value(at: "table_name", kind: .text).text }
        for table in tables {
            if source.dialect == .postgres, let next = try await next(of: table, db: source) {
                try await target.run(
                    "UPDATE docket_number_counter SET next_value = " + .bind(next) + " WHERE table_name = " + .bind(table)
                )
            }
            if target.dialect == .postgres {
                let next = try await target.integer(
                    "SELECT next_value FROM docket_number_counter WHERE table_name = " + .bind(table)
                )
                try await restart(table, at: next, db: target)
            }
        }
    }
}
