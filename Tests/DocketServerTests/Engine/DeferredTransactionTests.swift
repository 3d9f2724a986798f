import Synchronization
import Testing

@testable import DocketServer

/// A transaction begins with its first statement, and one whose only statement is its last runs it on its own
/// (``DeferredTransaction``, ``SQLExecutor/transaction(first:_:)``): what a connection is sent, recorded.
@Suite("Transactions begun with their first statement")
struct DeferredTransactionTests {
    struct Refused: Error {}

    /// A connection that records what it is sent and refuses the statements `refuses` picks.
    final class Recorder: SQLRunner {
        let sent = Mutex<[String]>([])
        let refuses: @Sendable (String) -> Bool

        init(refusing refuses: @escaping @Sendable (String) -> Bool = { _ in false }) { self.refuses = refuses }

        func rows(_ sql: SQLFragment) async throws -> [ResultRow] {
            let text = sql.rawText
            sent.withLock { $0.append(text) }
            if refuses(text) { throw Refused() }
            return []
        }

        var statements: [String] { sent.withLock { $0 } }
    }

    static func transaction(
        on recorder: Recorder, first: [SQLFragment] = [], _ body: @Sendable (SQLExecutor) async throws -> Void
    ) async throws {
        try await SQLExecutor(runner: recorder, dialect: .postgres).transaction(first: first, body)
    }

    @Test("a body that runs nothing sends nothing; one that runs statements is wrapped in BEGIN and COMMIT")
    func begunByTheFirst() async throws {
        let idle = Recorder()
        try await Self.transaction(on: idle) { _ in }
        #expect(idle.statements.isEmpty)
        let two = Recorder()
        try await Self.transaction(on: two) { db in
            try await db.run("UPDATE a")
            _ = try await db.lastRows("INSERT b")
        }
        #expect(two.statements == ["BEGIN ISOLATION LEVEL READ COMMITTED", "UPDATE a", "INSERT b", "COMMIT"])
        let plain = Recorder()
        try await Self.transaction(on: plain) { db in
            try await db.run("UPDATE a")
            try await db.run("UPDATE b")
        }
        #expect(plain.statements == ["BEGIN ISOLATION LEVEL READ COMMITTED", "UPDATE a", "UPDATE b", "COMMIT"])
    }

    @Test("a body whose only statement is its last runs it alone: no BEGIN, no COMMIT, no ROLLBACK when it fails")
    func alone() async throws {
        let alone = Recorder()
        try await Self.transaction(on: alone) { db in _ = try await db.lastRows("INSERT a") }
        #expect(alone.statements == ["INSERT a"])
        let refused = Recorder(refusing: { $0 == "INSERT a" })
        await #expect(throws: Refused.self) {
            try await Self.transaction(on: refused) { db in _ = try await db.lastRows("INSERT a") }
        }
        #expect(refused.statements == ["INSERT a"])
    }

    @Test("statements to run first (a lock) begin the transaction before the body: its last statement stays inside it")
    func firstStatements() async throws {
        let locked = Recorder()
        try await Self.transaction(on: locked, first: ["SELECT lock"]) { db in _ = try await db.lastRows("INSERT a") }
        #expect(locked.statements == ["BEGIN ISOLATION LEVEL READ COMMITTED", "SELECT lock", "INSERT a", "COMMIT"])
    }

    @Test("a failure after BEGIN rolls back; a failed rollback says so; a statement after the last is refused unsent")
    func failures() async throws {
        let failing = Recorder(refusing: { $0 == "UPDATE b" })
        await #expect(throws: Refused.self) {
            try await Self.transaction(on: failing) { db in
                try await db.run("UPDATE a")
                try await db.run("UPDATE b")
            }
        }
        #expect(failing.statements == ["BEGIN ISOLATION LEVEL READ COMMITTED", "UPDATE a", "UPDATE b", "ROLLBACK"])
        let thrown = Recorder()
        await #expect(throws: Refused.self) {
            try await Self.transaction(on: thrown) { db in
                try await db.run("UPDATE a")
                throw Refused()
            }
        }
        #expect(thrown.statements == ["BEGIN ISOLATION LEVEL READ COMMITTED", "UPDATE a", "ROLLBACK"])
        // A body that throws before any statement has nothing to roll back.
        let early = Recorder()
        await #expect(throws: Refused.self) { try await Self.transaction(on: early) { _ in throw Refused() } }
        #expect(early.statements.isEmpty)
        let stuck = Recorder(refusing: { $0 == "UPDATE b" || $0 == "ROLLBACK" })
        await #expect(throws: RollbackFailed.self) {
            try await Self.transaction(on: stuck) { db in
                try await db.run("UPDATE a")
                try await db.run("UPDATE b")
            }
        }
        let after = Recorder()
        await #expect(throws: StatementAfterLast.self) {
            try await Self.transaction(on: after) { db in
                _ = try await db.lastRows("INSERT a")
                try await db.run("UPDATE b")
            }
        }
        #expect(after.statements == ["INSERT a"])
    }
}
