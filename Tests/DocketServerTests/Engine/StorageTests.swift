import Foundation
import Synchronization
import Testing

@testable import DocketServer

/// The storages' write contract under cancellation and shutdown, on SQLite (and PostgreSQL in the conformance run).
@Suite("Storage writes")
struct StorageTests {
    static func withStorage(_ test: (any Storage) async throws -> Void) async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await TestDatabase.open(sqlitePath: directory.path + "/t.sqlite", readers: 1)
        do {
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            try await test(storage)
            try await storage.close()
        } catch {
            try? await storage.close()
            throw error
        }
    }

    @Test("a write cancelled half-way runs to its end (commit), and the storage goes on writing", .timeLimit(.minutes(1)))
    func cancelledWrite() async throws {
        try await Self.withStorage { storage in
            let inside = AsyncStream<Void>.makeStream()
            let writing = Task {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (1)")
                    inside.continuation.yield()
                    // Cancelled here, between two statements of one transaction.
                    try? await Task.sleep(for: .milliseconds(300))
                    try await db.run("INSERT INTO t (n) VALUES (2)")
                }
            }
            var iterator = inside.stream.makeAsyncIterator()
            await iterator.next()
            writing.cancel()
            let outcome = await writing.result
            #expect(throws: Never.self) { try outcome.get() }
            // Both statements were committed, and the next write (on the same writer connection) works.
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (3)") }
            let total = try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") }
            #expect(total == 6)
        }
    }

    @Test("a write whose only statement is its last commits it (on PostgreSQL on its own); a failing one commits nothing")
    func loneLastStatement() async throws {
        try await Self.withStorage { base in
            // Measured as the server measures every storage: the mark of the last statement passes through.
            let storage = MeasuredStorage(base: base, metrics: ServerMetrics())
            let sent = Mutex<[String]>([])
            storage.faults.observe { text in sent.withLock { $0.append(text) } }
            let scope = WriteScope.rows
            let rows = try await storage.write(scope: scope) { db in
                try await db.lastRows("INSERT INTO t (n) VALUES (5) RETURNING n")
            }
            #expect(rows.first?.first.intValue == 5)
            if storage.dialect == .postgres {
                #expect(sent.withLock { $0 } == ["INSERT INTO t (n) VALUES (5) RETURNING n"])
            }
            await #expect(throws: (any Error).self) {
                try await storage.write(scope: scope) { db in _ = try await db.lastRows("INSERT INTO no_such_table (n) VALUES (1)") }
            }
            // Exclusive writes (a lock taken first), and writes with more statements, commit as before.
            try await storage.write { db in _ = try await db.lastRows("INSERT INTO t (n) VALUES (1)") }
            try await storage.write(scope: scope) { db in
                try await db.run("INSERT INTO t (n) VALUES (10)")
                _ = try await db.lastRows("INSERT INTO t (n) VALUES (20)")
            }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 36)
        }
    }

    @Test("a write from a task cancelled before it began, and a failing write in a cancelled task, leave the storage usable")
    func cancelledBeforeAndFailing() async throws {
        try await Self.withStorage { storage in
            let failing = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (10)")
                    try await db.run("INSERT INTO no_such_table (n) VALUES (1)")
                }
            }
            await #expect(throws: (any Error).self) { try await failing.value }
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (1)") }
            // The failed write was rolled back whole.
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 1)
        }
    }

    @Test("after close, reads and writes are refused as unavailable, never run on a connection opened again")
    func closed() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await TestDatabase.open(sqlitePath: directory.path + "/t.sqlite", readers: 1)
        try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
        try await storage.close()
        await #expect(throws: StorageUnavailable.self) { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (1)") } }
        await #expect(throws: StorageUnavailable.self) { try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t") } }
    }
}
