import Foundation
import Logging
import Testing

@testable import DocketServer

/// Statements that PostgreSQL storage runs prepared (``PreparedStatements``): the same answers as unprepared, a
/// text bound with other types is another statement, and a statement whose preparation failed on a connection
/// still runs there once the reason has passed. A process prepares a limited number of texts for good: in the whole
/// suite's process they may all be taken by the time these tests run, and then what is checked is only that the
/// answers are right. `.ci/run` runs these tests again in a process of their own, where every check applies.
@Suite("Prepared statements (PostgreSQL)", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct PreparedStatementTests {
    static func withStorage(prepare: Bool = true, _ body: @Sendable (any Storage) async throws -> Void) async throws {
        guard case .postgres(var location) = try #require(TestDatabase.freshPostgres()) else { return }
        location.prepare = prepare
        let storage = try await StorageLocation.postgres(location).open(logger: Logger(label: "test"))
        do {
            try await body(storage)
        } catch {
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }

    /// A text no other test runs, so that this one sees its first, second and later runs.
    static func unique() -> String { UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased() }

    @Test("a statement run again is prepared on its connection and answers as it did unprepared")
    func preparedAnswersAlike() async throws {
        try await Self.withStorage { storage in
            let tag = Self.unique()
            let room = PreparedStatements.shared.hasRoom
            try await storage.read { executor in
                var answers: [[String?]] = []
                for round in 0..<4 {
                    let rows = try await executor.rows(
                        "SELECT " + .bind(tag) + " || " + .bind(round) + " AS tagged, " + .bind(round) + " + 1 AS next, "
                            + .bind("a\u{0}b") + " || '' AS cleaned, 'plain' AS " + .identifier("p_" + tag)
                    )
                    let row = try #require(rows.first)
                    answers.append([
                        try row.value(at: "tagged", kind: .text).text, try row.value(at: "next", kind: .integer).text,
                        try row.value(at: "cleaned", kind: .text).text, try row.value(at: "p_" + tag, kind: .text).text,
                    ])
                }
                #expect(answers == (0..<4).map { ["\(tag)\($0)", "\($0 + 1)", "a\u{FFFD}b", "plain"] })
                // The second run took a slot; postgres-nio prepared it on this connection then.
                guard room else { return }
                let prepared = try await executor.rows(
                    "SELECT COUNT(*) AS n FROM pg_prepared_statements WHERE statement LIKE " + .bind("%p_" + tag + "%")
                )
                #expect(try prepared.first?.value(at: "n", kind: .integer).intValue == 1)
            }
        }
    }

    @Test("one text bound with an integer and then with a real number is two statements, each answering right")
    func bindTypesAreParts() async throws {
        try await Self.withStorage { storage in
            let tag = Self.unique()
            try await storage.read { executor in
                let text: (SQLFragment) -> SQLFragment = { value in "SELECT " + value + " + 1 AS v, '" + SQLFragment(tag) + "' AS tag" }
                for _ in 0..<3 {
                    let whole = try await executor.rows(text(.bind(2)))
                    #expect(try whole.first?.value(at: "v", kind: .integer).intValue == 3)
                }
                for _ in 0..<3 {
                    let real = try await executor.rows(text(.bind(2.5)))
                    #expect(try real.first?.value(at: "v", kind: .real) == .real(3.5))
                }
            }
        }
    }

    @Test("a statement whose preparation failed on a connection runs there once the reason has passed")
    func failedPreparationIsNotKept() async throws {
        try await Self.withStorage { storage in
            let table = "prep_" + Self.unique()
            try await storage.read { executor in
                let select: SQLFragment = "SELECT COUNT(*) AS n FROM " + .identifier(table) + " WHERE " + .identifier("k") + " = " + .bind("x")
                // Unprepared, then prepared: both fail, the table does not exist yet. postgres-nio keeps the
                // failed preparation's error for this connection.
                for _ in 0..<2 {
                    await #expect(throws: (any Error).self) { try await executor.rows(select) }
                }
                try await executor.run("CREATE TABLE " + .identifier(table) + " (k TEXT)")
                try await executor.run("INSERT INTO " + .identifier(table) + " (k) VALUES ('x')")
                for _ in 0..<2 {
                    let rows = try await executor.rows(select)
                    #expect(try rows.first?.value(at: "n", kind: .integer).intValue == 1)
                }
            }
        }
    }

    @Test("an error of a statement already prepared on its connection is its own: the statement stays prepared there")
    func executionErrorKeepsItPrepared() async throws {
        try await Self.withStorage { storage in
            let tag = Self.unique()
            let room = PreparedStatements.shared.hasRoom
            try await storage.read { executor in
                let divide: (Int) -> SQLFragment = { by in "SELECT 10 / " + .bind(by) + " AS " + .identifier("p_" + tag) }
                // PostgreSQL counts each run of a prepared statement as a generic or a custom plan.
                let runs: @Sendable () async throws -> Int? = {
                    let rows = try await executor.rows(
                        "SELECT generic_plans + custom_plans AS n FROM pg_prepared_statements WHERE statement LIKE "
                            + .bind("%p_" + tag + "%")
                    )
                    return try rows.first?.value(at: "n", kind: .integer).intValue
                }
                for _ in 0..<2 {
                    #expect(try await executor.rows(divide(2)).first?.value(at: "p_" + tag, kind: .integer).intValue == 5)
                }
                await #expect(throws: PostgresStatementError.self) { try await executor.rows(divide(0)) }
                guard room else { return }
                let before = try #require(try await runs())
                for _ in 0..<3 {
                    #expect(try await executor.rows(divide(5)).first?.value(at: "p_" + tag, kind: .integer).intValue == 2)
                }
                #expect(try await runs() == before + 3)
            }
        }
    }

    @Test("with prepare=off nothing is prepared")
    func off() async throws {
        try await Self.withStorage(prepare: false) { storage in
            let tag = Self.unique()
            try await storage.read { executor in
                for round in 0..<3 {
                    let rows = try await executor.rows("SELECT " + .bind(round) + " + 1 AS " + .identifier("p_" + tag))
                    #expect(try rows.first?.value(at: "p_" + tag, kind: .integer).intValue == round + 1)
                }
                let prepared = try await executor.rows("SELECT COUNT(*) AS n FROM pg_prepared_statements")
                #expect(try prepared.first?.value(at: "n", kind: .integer).intValue == 0)
            }
        }
    }

    @Test("forty callers at once, over every connection of the pool, each get their own answers")
    func concurrent() async throws {
        try await Self.withStorage { storage in
            let tag = Self.unique()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for caller in 0..<40 {
                    group.addTask {
                        for round in 0..<5 {
                            let n = caller * 10 + round
                            let rows = try await storage.read { executor in
                                try await executor.rows("SELECT " + .bind(n) + " * 2 AS " + .identifier("p_" + tag))
                            }
                            #expect(try rows.first?.value(at: "p_" + tag, kind: .integer).intValue == n * 2)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }
}

/// The statement text PostgreSQL storage sends (``SQLFragment/postgresText(_:)``): what SQLKit's serializer with
/// PostgreSQL's dialect gives.
@Suite("PostgreSQL statement text")
struct PostgresTextTests {
    @Test("values become $1, $2, … in order; identifiers are quoted, a quote in one doubled")
    func text() throws {
        let fragment: SQLFragment = "SELECT " + .column("t", "number") + ", " + .identifier("We\"ird Name") + " FROM "
            + .identifier("incident") + " t WHERE a = " + .bind("x") + " AND b IN (" + [.bind(1), .bind(2.5)].joined(", ") + ")"
        var values: [String] = []
        let text = fragment.postgresText { values.append("\($0)") }
        #expect(text == #"SELECT "t"."number", "We""ird Name" FROM "incident" t WHERE a = $1 AND b IN ($2, $3)"#)
        #expect(values == ["x", "1", "2.5"])
        #expect(SQLFragment("SELECT 1").postgresText { _ in Issue.record("no values") } == "SELECT 1")
    }
}
