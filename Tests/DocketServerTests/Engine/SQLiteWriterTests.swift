import CDocketSQLite
import Foundation
import Logging
import NIOCore
import SQLKit
import SQLiteKit
import Synchronization
import Testing
import VaporCSQLite

@testable import DocketServer

/// The SQLite writer's own connection (``SQLiteDirectConnection``): statements kept prepared and run again with
/// other values, after the schema changed, past the number kept; and the SQL text it is given (``SQLFragment/sqlite()``).
@Suite("SQLite writer")
struct SQLiteWriterTests {
    static func withStorage(_ test: (SQLiteStorage) async throws -> Void) async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await SQLiteStorage.open(path: directory.path + "/w.sqlite", readers: 1, logger: Logger(label: "test"))
        do {
            try await test(storage)
            try await storage.close()
        } catch {
            try? await storage.close()
            throw error
        }
    }

    @Test("the SQLite text and values are SQLKit's: quoted identifiers (a quote in one doubled), ?n placeholders, typed values")
    func sameAsSQLKit() async throws {
        let blob = SQLBlob(ByteBuffer(bytes: [0, 1, 2, 255]))
        let fragments: [SQLFragment] = [
            "SELECT 1",
            "SELECT " + .column("t", "sys_id") + " FROM " + .identifier("incident") + " AS " + .identifier("t")
                + " WHERE " + .identifier("odd\"name") + " = " + .bind("it's") + " AND n IN (" + .bindList([1, 2, 3]) + ")",
            "INSERT INTO x (a, b, c, d) VALUES (" + .bind(2.5) + ", " + .bind(blob) + ", " + .bind(true) + ", " + .bind("") + ")",
        ]
        try await Self.withStorage { storage in
            // Any SQLiteNIO connection serialises in SQLite's dialect; this one runs nothing.
            let connection = try await SQLiteConnection.open(storage: .memory, logger: Logger(label: "test"))
            // A fragment compacted (its text and plain names joined into one piece) is the same SQL with the same values.
            for fragment in fragments + fragments.map({ $0.compacted() }) {
                let (expectedText, expectedBinds) = connection.sql().serialize(fragment)
                let (text, binds) = try fragment.sqlite()
                #expect(text == expectedText)
                // Blobs are bound as they are (SQLKit would encode their bytes as an array).
                let expected = try expectedBinds.map { bind -> SQLiteData in
                    if let blob = bind as? SQLBlob { return .blob(blob.buffer) }
                    return try SQLiteDataEncoder().encode(bind)
                }
                #expect(binds == expected)
            }
            for fragment in fragments {
                #expect(connection.sql().serialize(fragment.compacted()).sql == connection.sql().serialize(fragment).sql)
                #expect(try fragment.compacted().sqlite().text == fragment.sqlite().text)
            }
            // Joined: everything but the values and the name that needs escaping.
            let compacted = fragments[1].compacted()
            #expect(compacted.pieces.count < fragments[1].pieces.count)
            #expect(compacted.identifiers == ["odd\"name"])
            try await connection.close()
        }
    }

    @Test("a kept statement runs again with other values, LIMIT values that change its plan included, and reads what it should")
    func keptStatements() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in
                try await db.run("CREATE TABLE t (n INTEGER, s TEXT)")
                for n in 1...20 { try await db.run("INSERT INTO t (n, s) VALUES (" + .bind(n) + ", " + .bind("v\(n)") + ")") }
            }
            for limit in [0, 1, 5, 1, 0, 20, 3] {
                let rows = try await storage.write { db in
                    try await db.rows("SELECT n, s FROM t WHERE n > " + .bind(2) + " ORDER BY n LIMIT " + .bind(limit))
                }
                #expect(rows.count == min(limit, 18))
                if let first = rows.first {
                    #expect(try first.value(at: "n", kind: .integer) == .integer(3))
                    #expect(try first.value(at: "s", kind: .text) == .text("v3"))
                }
            }
            for n in [4, 17, 4] {
                let text = try await storage.write { db in
                    try await db.rows("SELECT s FROM t WHERE n = " + .bind(n)).first?.value(at: "s", kind: .text)
                }
                #expect(text == .text("v\(n)"))
            }
        }
    }

    @Test("a kept statement whose table gained and renamed a column reads the new columns")
    func schemaChanged() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in
                try await db.run("CREATE TABLE t (n INTEGER)")
                try await db.run("INSERT INTO t (n) VALUES (1)")
            }
            let select: SQLFragment = "SELECT * FROM t"
            let before = try await storage.write { db in try await db.rows(select) }
            #expect(try before.first?.value(at: "n", kind: .integer) == .integer(1))
            try await storage.write { db in
                try await db.run("ALTER TABLE t ADD COLUMN label TEXT DEFAULT 'new'")
                try await db.run("ALTER TABLE t RENAME COLUMN n TO number")
            }
            let after = try await storage.write { db in try await db.rows(select) }
            #expect(try after.first?.value(at: "number", kind: .integer) == .integer(1))
            #expect(try after.first?.value(at: "label", kind: .text) == .text("new"))
            #expect(try after.first?.value(at: "n", kind: .integer) == .null)
        }
    }

    @Test("more texts than are kept: every statement still runs, the first ones again after the rest")
    func pastTheKeptNumber() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            let count = SQLiteDirectConnection.keptStatements + 40
            try await storage.write { db in
                for n in 0..<count { try await db.run(SQLFragment("INSERT INTO t (n) VALUES (\(n))")) }
                for n in 0..<10 { try await db.run(SQLFragment("INSERT INTO t (n) VALUES (\(n))")) }
            }
            let total = try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t") }
            #expect(total == count + 10)
        }
    }

    @Test("large values (kept bound only for their run) and text with any characters are written and read back whole")
    func largeValues() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (k TEXT, b BLOB)") }
            let big = ByteBuffer(bytes: (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            let text = "a\u{0}b ✓ " + String(repeating: "x", count: 10_000)
            for key in ["one", "two"] {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (k, b) VALUES (" + .bind(key == "one" ? text : key) + ", " + .bind(SQLBlob(big)) + ")")
                }
            }
            let rows = try await storage.write { db in try await db.rows("SELECT k, b FROM t ORDER BY rowid") }
            #expect(rows.count == 2)
            #expect(try rows.first?.value(at: "k", kind: .text) == .text(text))
            #expect(try rows.last?.buffer(at: "b") == big)
        }
    }

    @Test("a statement SQLite refuses fails the write as itself (not an outage) and rolls it back; the writer goes on")
    func refusedStatement() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER NOT NULL UNIQUE)") }
            for _ in 0..<2 {
                do {
                    try await storage.write { db in
                        try await db.run("INSERT INTO t (n) VALUES (1)")
                        try await db.run("INSERT INTO t (n) VALUES (1)")
                    }
                    Issue.record("a duplicate was written")
                } catch {
                    #expect(StorageUnavailable.classify(error) == nil)
                    #expect("\(error)".contains("UNIQUE"))
                }
            }
            await #expect(throws: (any Error).self) { try await storage.write { db in try await db.run("   ") } }
            await #expect(throws: (any Error).self) { try await storage.write { db in try await db.run("SELEC 1") } }
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (2)") }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 2)
        }
    }

    @Test("writes from many tasks at once are each committed once, in one order")
    func concurrentWrites() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER PRIMARY KEY, seen INTEGER)") }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 1...200 {
                    group.addTask {
                        try await storage.write { db in
                            let seen = try await db.integer("SELECT COUNT(*) FROM t")
                            try await db.run("INSERT INTO t (n, seen) VALUES (" + .bind(n) + ", " + .bind(seen) + ")")
                        }
                    }
                }
                try await group.waitForAll()
            }
            // Each write saw exactly the writes before it: 0, 1, …, 199 once each.
            let seen = try await storage.read { db in
                try await db.rows("SELECT seen FROM t ORDER BY seen").map { $0.first.intValue ?? -1 }
            }
            #expect(seen == Array(0..<200))
        }
    }

    struct Refused: Error {}

    /// Starts a write that holds the writer until `release` yields, and waits until it runs.
    static func holdWriter(_ storage: SQLiteStorage) async -> (task: Task<Void, any Error>, release: AsyncStream<Void>.Continuation) {
        let (entered, entering) = AsyncStream<Void>.makeStream()
        let (released, release) = AsyncStream<Void>.makeStream()
        let task = Task {
            try await storage.write { db in
                try await db.run("INSERT INTO t (n) VALUES (100)")
                entering.yield()
                for await _ in released { break }
            }
        }
        for await _ in entered { break }
        return (task, release)
    }

    /// Waits until `count` writes are queued behind the one holding the writer.
    static func waitForQueue(_ storage: SQLiteStorage, count: Int) async throws {
        while storage.writesWaiting < count { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test("writes that waited share one transaction: one that fails is rolled back alone, the others are committed")
    func sharedTransaction() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            let (holder, release) = await Self.holdWriter(storage)
            let one = Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (1)") } }
            try await Self.waitForQueue(storage, count: 1)
            let failing = Task {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (2)")
                    throw Refused()
                }
            }
            try await Self.waitForQueue(storage, count: 2)
            let three = Task { try await storage.write { db in try await db.integer("SELECT SUM(n) FROM t") } }
            try await Self.waitForQueue(storage, count: 3)
            // Three more (writing 0), so that the four before them are half of those in hand (the holder and six waiting), rounded up.
            let more = try await Self.queue(3, storage: storage, after: 3)
            release.yield()
            try await holder.value
            try await one.value
            await #expect(throws: Refused.self) { try await failing.value }
            // The third saw the first's row and not the failed one's.
            #expect(try await three.value == 101)
            for write in more { try await write.value }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 101)
        }
    }

    @Test("a transaction takes half of the writes in hand, rounded up; when its commit fails, every write in it fails and none is committed, and the others are committed in the next")
    func sharedCommitFails() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            let (holder, release) = await Self.holdWriter(storage)
            // Six in hand: the holder and five waiting. The holder's transaction takes the first two of them.
            var behind: [Task<Void, any Error>] = []
            for n in 1...5 {
                behind.append(Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (" + .bind(n) + ")") } })
                try await Self.waitForQueue(storage, count: n)
            }
            storage.faults.failNext { $0 == "COMMIT" }
            release.yield()
            await #expect(throws: StorageUnavailable.self) { try await holder.value }
            for write in behind.prefix(2) { await #expect(throws: StorageUnavailable.self) { try await write.value } }
            for write in behind.suffix(3) { try await write.value }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 3 + 4 + 5)
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (7)") }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 3 + 4 + 5 + 7)
        }
    }

    /// Queues `count` writes of 0 behind the `waiting` ones already queued, and waits until they are queued.
    static func queue(_ count: Int, storage: SQLiteStorage, after waiting: Int) async throws -> [Task<Void, any Error>] {
        var writes: [Task<Void, any Error>] = []
        for index in 1...count {
            writes.append(Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (0)") } })
            try await waitForQueue(storage, count: waiting + index)
        }
        return writes
    }

    @Test("when a failed write's savepoint cannot be rolled back, it alone fails: the writes before it in its transaction run again and are committed once")
    func savepointUndoFails() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            let runs = Mutex(0)
            let (entered, entering) = AsyncStream<Void>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            let holder = Task {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (100)")
                    // Only its first run waits.
                    if runs.withLock({ $0 += 1; return $0 }) == 1 {
                        entering.yield()
                        for await _ in released { break }
                    }
                }
            }
            for await _ in entered { break }
            let failing = Task {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (2)")
                    throw Refused()
                }
            }
            try await Self.waitForQueue(storage, count: 1)
            // One more (writing 0), so that the failing one shares the holder's transaction.
            let more = try await Self.queue(1, storage: storage, after: 1)
            storage.faults.failNext { $0.hasPrefix("ROLLBACK TO") }
            release.yield()
            try await holder.value
            await #expect(throws: Refused.self) { try await failing.value }
            for write in more { try await write.value }
            #expect(runs.withLock { $0 } == 2)
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 100)
        }
    }

    @Test("a write after which SQLite ended the whole transaction (a trigger's RAISE(ROLLBACK)) fails alone; the others are committed once")
    func transactionEndedBySQLite() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in
                try await db.run("CREATE TABLE t (n INTEGER)")
                try await db.run("CREATE TRIGGER no_thirteen BEFORE INSERT ON t WHEN NEW.n = 13 BEGIN SELECT RAISE(ROLLBACK, 'no thirteen'); END")
            }
            let (holder, release) = await Self.holdWriter(storage)
            let one = Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (1)") } }
            try await Self.waitForQueue(storage, count: 1)
            let bad = Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (13)") } }
            try await Self.waitForQueue(storage, count: 2)
            let two = Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (2)") } }
            try await Self.waitForQueue(storage, count: 3)
            // Three more (writing 0), so that the four before them share one transaction.
            let more = try await Self.queue(3, storage: storage, after: 3)
            release.yield()
            // The holder runs again after the loss: its second run does not wait.
            release.finish()
            try await holder.value
            try await one.value
            try await two.value
            do {
                try await bad.value
                Issue.record("the refused insert was answered as written")
            } catch {
                #expect(StorageUnavailable.classify(error) == nil, "\(error)")
                #expect("\(error)".contains("no thirteen"))
            }
            for write in more { try await write.value }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 103)
            #expect(try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t") } == 3 + 3)
        }
    }

    @Test("a body that goes on after SQLite ended its transaction commits none of what follows")
    func goingOnAfterTheEnd() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in
                try await db.run("CREATE TABLE t (n INTEGER)")
                try await db.run("CREATE TRIGGER no_thirteen BEFORE INSERT ON t WHEN NEW.n = 13 BEGIN SELECT RAISE(ROLLBACK, 'no thirteen'); END")
            }
            await #expect(throws: StorageUnavailable.self) {
                try await storage.write { db in
                    try await db.run("INSERT INTO t (n) VALUES (1)")
                    do {
                        try await db.run("INSERT INTO t (n) VALUES (13)")
                    } catch {
                        // Swallowed: the body goes on as if nothing had happened.
                    }
                    try await db.run("INSERT INTO t (n) VALUES (5)")
                }
            }
            #expect(try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t") } == 0)
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (2)") }
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 2)
        }
    }

    @Test("a statement given fewer values than it has placeholders is refused, never run with the last run's values")
    func placeholdersAndValues() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (" + .bind(5) + ")") }
            await #expect(throws: (any Error).self) {
                try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (?1)") }
            }
            #expect(try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t") } == 1)
        }
    }

    @Test("a write whose caller is cancelled while it waits leaves the queue and never runs")
    func cancelledWhileWaiting() async throws {
        try await Self.withStorage { storage in
            try await storage.write { db in try await db.run("CREATE TABLE t (n INTEGER)") }
            let (holder, release) = await Self.holdWriter(storage)
            let cancelled = Task { try await storage.write { db in try await db.run("INSERT INTO t (n) VALUES (5)") } }
            try await Self.waitForQueue(storage, count: 1)
            cancelled.cancel()
            await #expect(throws: CancellationError.self) { try await cancelled.value }
            #expect(storage.writesWaiting == 0)
            release.yield()
            try await holder.value
            #expect(try await storage.read { db in try await db.integer("SELECT SUM(n) FROM t") } == 100)
        }
    }

    @Test("preparing a database waits while another process holds its write lock longer than one lock wait, then prepares it; a lock held past the start's bound fails the start as unavailable")
    func prepareWaitsForAnotherWriter() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let path = directory.path + "/w.sqlite"
        let storage = try await SQLiteStorage.open(path: path, readers: 1, logger: Logger(label: "test"))
        // Another process's transaction, held past the writer's busy timeout (2 s).
        let other = try SQLiteDirectConnection.open(path: path, busyTimeoutMilliseconds: 0)
        defer { other.close() }
        do {
            _ = try other.rows("BEGIN IMMEDIATE", [])
            // Without a wait (a command): refused at once as a lock held, not an outage.
            let refused = await #expect(throws: StorageUnavailable.self) { _ = try await SchemaStore.prepare(storage) }
            #expect(refused?.lockWait == true)
            let preparing = Task { try await SchemaStore.prepare(storage, lockWait: .seconds(60)) }
            try await Task.sleep(for: .seconds(3))
            _ = try other.rows("COMMIT", [])
            #expect(try await preparing.value == true)
            #expect(try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM sys_db_object") } > 0)
            try await storage.close()
        } catch {
            try? await storage.close()
            throw error
        }
    }

    #if os(Linux)
    /// SQLite's temporary files this process holds open, as `fd -> target`: deleted as soon as made, named `#<inode>`
    /// (made with `O_TMPFILE`) or `etilqs_…` (where the folder's file system cannot).
    static func openTemporaryFiles() -> Set<String> {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return Set(fds.compactMap { fd -> String? in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd),
                target.hasSuffix("(deleted)"), target.contains("/#") || target.contains("/etilqs_")
            else { return nil }
            return fd + " -> " + target
        })
    }

    /// How many temporary files `statement` opened, run in a savepoint of a write (each write after the first of a
    /// transaction runs in one, SQLiteWriter; here the savepoint is the test's own, so that the journal is written
    /// whether or not other writes share the transaction). Other tests running meanwhile can only add files.
    static func temporaryFiles(of statement: SQLFragment, storage: SQLiteStorage) async throws -> Int {
        try await storage.write { db in
            try await db.run("SAVEPOINT journal_test")
            let before = Self.openTemporaryFiles()
            try await db.run(statement)
            let made = Self.openTemporaryFiles().subtracting(before).count
            try await db.run("RELEASE journal_test")
            return made
        }
    }

    @Test(
        "a write's savepoint journal stays in memory up to the spill threshold set in SQLite (64 KiB by default), and a larger one spills to a file"
    )
    func savepointJournalInMemory() async throws {
        // Set when the program was loaded, before anything used SQLite: never skipped for want of it.
        #expect(SQLiteLibrary.configured)
        #expect(SQLiteLibrary.statementJournalSpill == 128 * 1024 - 1)
        try await Self.withStorage { storage in
            // Once SQLite is in use it refuses the option: the C function reaches `sqlite3_config`.
            #expect(docket_sqlite_set_statement_journal_spill(SQLiteLibrary.statementJournalSpill) == SQLITE_MISUSE)
            // About one page per row: changing n rows journals about n pages (4 KiB each) of the write's savepoint.
            try await storage.write { db in
                try await db.run("CREATE TABLE t (n INTEGER PRIMARY KEY, s TEXT)")
                for n in 1...1_500 { try await db.run("INSERT INTO t (n, s) VALUES (" + .bind(n) + ", " + .bind(String(repeating: "a", count: 3_000)) + ")") }
            }
            // 20 pages, 80 KiB: past SQLite's default, within the threshold. Tried three times: a file another test
            // opens at that moment is counted too; with the default threshold every try makes one.
            var smallest = Int.max
            for letter in ["b", "c", "d"] where smallest > 0 {
                let made = try await Self.temporaryFiles(
                    of: "UPDATE t SET s = " + .bind(String(repeating: letter, count: 3_000)) + " WHERE n <= 20", storage: storage
                )
                smallest = min(smallest, made)
            }
            #expect(smallest == 0)
            // 1,500 pages, 6 MiB: spills (and the spill works: SQLite fails it when the threshold is 128 KiB or more),
            // so that a large write never holds all it changes in memory.
            let large = try await Self.temporaryFiles(
                of: "UPDATE t SET s = " + .bind(String(repeating: "e", count: 3_000)), storage: storage
            )
            #expect(large >= 1)
            let count = try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM t WHERE s LIKE 'e%'") }
            #expect(count == 1_500)
        }
    }
    #endif
}
