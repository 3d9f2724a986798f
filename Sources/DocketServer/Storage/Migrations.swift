import Foundation

/// Schema changes as named, append-only migrations, applied in order and recorded in `docket_migration`.
///
/// The `schema_version` in `docket_meta` says which layout a database has; a database whose version, or one of
/// whose recorded migrations, this docketd does not know was written by a newer docketd and is refused before
/// anything is changed. A database from before migrations were recorded (version 1) runs every migration once:
/// each is written to do nothing where its change is already there.
public enum Migrations {
    /// One step of bringing a database up to date.
    struct Step: Sendable {
        let name: String
        /// Run once and recorded (a migration), or on every start (a reconciliation with this binary's base schema).
        let once: Bool
        let apply: @Sendable (SQLExecutor, String) async throws -> Void

        static func once(_ name: String, _ apply: @escaping @Sendable (SQLExecutor, String) async throws -> Void) -> Step {
            Step(name: name, once: true, apply: apply)
        }

        static func everyStart(_ name: String, _ apply: @escaping @Sendable (SQLExecutor, String) async throws -> Void) -> Step {
            Step(name: name, once: false, apply: apply)
        }
    }

    /// A database this docketd cannot open safely.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// The version a database records (0 when it records none).
    static func version(_ db: SQLExecutor) async throws -> Int {
        let text = try await db.rows("SELECT value FROM docket_meta WHERE key = 'schema_version'").first?
            .value(at: "value", kind: .text).text
        return text.flatMap { Int($0) } ?? 0
    }

    /// The migrations a database records as applied (none before they were recorded).
    static func applied(_ db: SQLExecutor) async throws -> Set<String> {
        guard try await !db.rows(db.dialect.tableExists("docket_migration")).isEmpty else { return [] }
        return Set(try await db.rows("SELECT name FROM docket_migration").compactMap { try $0.value(at: "name", kind: .text).text })
    }

    /// How a database's schema stands against this docketd's.
    enum Standing: Equatable {
        case current
        /// Migrations this docketd has and the database has not run (an older docketd wrote it).
        case older(version: Int)
        /// The database records a later version, or migrations this docketd does not know: `what` says which.
        case newer(what: String)
    }

    /// Reads a database's version and migrations and compares them with `steps` and `version`.
    static func standing(_ db: SQLExecutor, steps: [Step], version: Int) async throws -> Standing {
        standing(stored: try await Self.version(db), done: try await applied(db), steps: steps, version: version)
    }

    private static func standing(stored: Int, done: Set<String>, steps: [Step], version: Int) -> Standing {
        let known = Set(steps.filter(\.once).map(\.name))
        let unknown = done.subtracting(known).sorted()
        if stored > version || !unknown.isEmpty {
            return .newer(what: unknown.isEmpty ? "schema version \(stored)" : "migration \(unknown.joined(separator: ", "))")
        }
        return stored < version || done != known ? .older(version: stored) : .current
    }

    /// Brings an existing database up to date, in the caller's transaction (a failure changes nothing).
    static func upgrade(_ db: SQLExecutor, steps: [Step], version: Int, now: String) async throws {
        let stored = try await Self.version(db)
        let done = try await applied(db)
        if case .newer(let what) = standing(stored: stored, done: done, steps: steps, version: version) {
            throw Refusal(
                description: "This database was written by a newer docketd (it has \(what); this docketd knows schema version "
                    + "\(version)). Run the newer docketd, or point --data-dir at another folder. Nothing was changed."
            )
        }
        try await createTable(db)
        for step in steps where !step.once || !done.contains(step.name) {
            try await step.apply(db, now)
            if step.once { try await record(step.name, db: db, now: now) }
        }
        if stored != version { try await setVersion(version, db: db) }
    }

    private static func createTable(_ db: SQLExecutor) async throws {
        try await db.run("CREATE TABLE IF NOT EXISTS docket_migration (name TEXT PRIMARY KEY, applied_on TEXT NOT NULL)")
    }

    private static func record(_ name: String, db: SQLExecutor, now: String) async throws {
        try await db.run("INSERT INTO docket_migration (name, applied_on) VALUES (" + .bind(name) + ", " + .bind(now) + ")")
    }

    private static func setVersion(_ version: Int, db: SQLExecutor) async throws {
        try await db.run("DELETE FROM docket_meta WHERE key = 'schema_version'")
        try await db.run("INSERT INTO docket_meta (key, value) VALUES ('schema_version', " + .bind(String(version)) + ")")
    }
}
