import Foundation
import Testing

@testable import DocketServer

/// A statement's answer with a value the driver cannot decode (``UndecodableAnswer``): PostgreSQL's runner reads the
/// rest of the answer, so the statement runs to its end and the caller learns that it ran; the connection serves the
/// next statement.
@Suite("Answers with a value the driver cannot decode (PostgreSQL)", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct UndecodableAnswerTests {
    @Test("a value that cannot be decoded fails the read after the statement ran to its end; the connection serves the next")
    func readToTheEnd() async throws {
        try await PreparedStatementTests.withStorage { storage in
            let table = "undecodable_" + PreparedStatementTests.unique()
            try await storage.writeUnordered { db in
                try await db.run("CREATE TABLE " + .identifier(table) + " (n integer PRIMARY KEY, d interval)")
                // An interval is a type docketd does not read: the second of the three rows fails its reading.
                let insert: SQLFragment = "INSERT INTO " + .identifier(table)
                    + " (n, d) SELECT x, CASE WHEN x = 2 THEN interval '1 day' END FROM generate_series(1, 3) AS x RETURNING n, d"
                await #expect(throws: UndecodableAnswer.self) { try await db.rows(insert) }
                // Run on its own, it committed; the same connection answers the next statement.
                #expect(try await db.integer("SELECT COUNT(*) FROM " + .identifier(table)) == 3)
                let again: SQLFragment = "SELECT n, d FROM " + .identifier(table) + " ORDER BY n"
                for _ in 0..<3 {
                    // Prepared from its second run: the failure is the value's, never the statement's.
                    let error = await #expect(throws: UndecodableAnswer.self) { try await db.rows(again) }
                    #expect(error?.description.lowercased().contains("interval") == true, "\(String(describing: error))")
                }
                #expect(try await db.integer("SELECT SUM(n) FROM " + .identifier(table)) == 6)
                try await db.run("DROP TABLE " + .identifier(table))
            }
        }
    }

    @Test("a lone statement of a transaction whose answer cannot be decoded has committed: the transaction says so")
    func loneStatementCommitted() async throws {
        try await PreparedStatementTests.withStorage { storage in
            let table = "undecodable_" + PreparedStatementTests.unique()
            try await storage.writeUnordered { db in
                try await db.run("CREATE TABLE " + .identifier(table) + " (n integer PRIMARY KEY, d interval)")
            }
            let committed = try await storage.writeUnordered { db -> Bool in
                try await db.transaction { tx -> Bool in
                    do {
                        _ = try await tx.lastRows(
                            "INSERT INTO " + .identifier(table) + " (n, d) VALUES (1, interval '2 hours') RETURNING d"
                        )
                        return false
                    } catch is UndecodableAnswer {
                        return tx.committedAlone
                    }
                }
            }
            #expect(committed)
            let count = try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM " + .identifier(table)) }
            #expect(count == 1)
            // Inside a transaction begun before it, the same failure rolls the whole transaction back.
            await #expect(throws: UndecodableAnswer.self) {
                try await storage.writeUnordered { db in
                    try await db.transaction { tx in
                        try await tx.run("INSERT INTO " + .identifier(table) + " (n) VALUES (2)")
                        _ = try await tx.lastRows(
                            "INSERT INTO " + .identifier(table) + " (n, d) VALUES (3, interval '2 hours') RETURNING d"
                        )
                    }
                }
            }
            let after = try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM " + .identifier(table)) }
            #expect(after == 1)
            try await storage.writeUnordered { db in try await db.run("DROP TABLE " + .identifier(table)) }
        }
    }
}
