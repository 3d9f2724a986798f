import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import DocketServer

/// Whether a docketd is alone on its schema of a PostgreSQL database (``PostgresPresence``): what lets it leave out
/// the read of the log's head before each request and the announcement of its commits, and what ends it.
@Suite(
    "PostgreSQL presence (alone on a schema)", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint),
    .timeLimit(.minutes(1))
)
struct PostgresPresenceTests {
    /// A storage on `location`, listening on its channel as a server's follower does (nil: no listener, as a
    /// `docketd` command).
    static func open(_ location: StorageLocation, listening: Bool = true) async throws -> (PostgresStorage, AsyncStream<Void>?) {
        let storage = try #require(try await location.open(logger: Logger(label: "test")) as? PostgresStorage)
        return (storage, listening ? storage.logSignals(ignoring: { _ in false }) : nil)
    }

    /// Tries to be alone, as the follower's tick does, until it is (or 10 s have passed).
    static func becomeAlone(_ storage: PostgresStorage) async throws {
        let start = ContinuousClock.now
        while !storage.isAlone, ContinuousClock.now - start < .seconds(10) {
            await storage.tryBeingAlone {}
            if !storage.isAlone { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(storage.isAlone)
    }

    /// Waits until `condition` holds (or 5 s have passed).
    static func until(_ condition: () -> Bool) async throws {
        let start = ContinuousClock.now
        while !condition(), ContinuousClock.now - start < .seconds(5) { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// How many sessions hold `key` exclusively (what makes a process alone; pg_locks: classid is the key's high
    /// half, objid its low).
    static func exclusiveHolders(_ location: StorageLocation, key: Int64) async throws -> Int {
        let connection = try await raw(location)
        let bits = UInt64(bitPattern: key)
        let count = Mutex(-1)
        try await closing(connection: connection) {
            let held = try await PostgresRunner(connection: connection, logger: Logger(label: "test")).rows(
                "SELECT count(*) AS held FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND granted"
                    + " AND classid = " + .bind(Int(bits >> 32)) + " AND objid = " + .bind(Int(bits & 0xFFFF_FFFF))
                    + " AND objsubid = 1"
            ).first?.first.intValue ?? -1
            count.withLock { $0 = held }
        }
        return count.withLock { $0 }
    }

    /// Runs `body`, then closes `storage` however it ended: postgres-nio stops the process when a connection is released
    /// open, so a failed expectation must not skip the close.
    static func closing(_ storage: any Storage, _ body: () async throws -> Void) async throws {
        try await running(body, then: { try await storage.close() })
    }

    /// Runs `body`, then closes `connection` however it ended.
    static func closing(connection: PostgresConnection, _ body: () async throws -> Void) async throws {
        try await running(body, then: { try await connection.close() })
    }

    /// Runs `body`, then `close`, also when `body` throws (whose error is then the one thrown).
    private static func running(_ body: () async throws -> Void, then close: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            try? await close()
            throw error
        }
        try await close()
    }

    /// A connection of the test's own to the server, with the schema as its search path.
    static func raw(_ location: StorageLocation) async throws -> PostgresConnection {
        guard case .postgres(let postgres) = location else { throw CancellationError() }
        return try await PostgresConnection.connect(
            configuration: try postgres.connectionConfiguration(searchPath: true), id: 9, logger: Logger(label: "test")
        )
    }

    /// The payloads a connection of the test's own (no process of docketd's: it holds no key) hears on the schema's
    /// channel while `body` runs and for `window` after it.
    static func heard(_ location: StorageLocation, within window: Duration, while body: () async throws -> Void) async throws -> [String] {
        let listener = try await raw(location)
        let schema: String
        do {
            schema = try await PostgresRunner(connection: listener, logger: Logger(label: "test"))
                .rows("SELECT current_schema() AS name").first?.value(at: "name", kind: .text).text ?? "public"
        } catch {
            try? await listener.close()
            throw error
        }
        let heard = Mutex<[String]>([])
        let (ready, started) = AsyncStream<Void>.makeStream()
        let listening = Task {
            try await listener.listen(on: PostgresStorage.channelPrefix + schema) { notifications in
                started.yield()
                for try await notification in notifications { heard.withLock { $0.append(notification.payload) } }
            }
        }
        for await _ in ready { break }
        do {
            try await body()
            try await Task.sleep(for: window)
        } catch {
            listening.cancel()
            try? await listener.close()
            throw error
        }
        listening.cancel()
        try await listener.close()
        return heard.withLock { $0 }
    }

    @Test("a server alone announces no commit; once another process opens the schema, it has stopped being alone and announces again")
    func newcomerEndsBeingAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (first, signals) = try await Self.open(location)
        try await Self.closing(first) {
            try await Self.becomeAlone(first)
            // Alone: the announcement is left out.
            #expect(try await Self.heard(location, within: .milliseconds(500)) { first.announce(.numbers([41])) }.isEmpty)
            // Another process opens the schema: by the time its open returns, the first is no longer alone.
            let (second, _) = try await Self.open(location, listening: false)
            try await Self.closing(second) {
                #expect(!first.isAlone)
                let heard = try await Self.heard(location, within: .seconds(1)) { first.announce(.numbers([42])) }
                #expect(heard == ["42;" + first.presence.id])
                // While the second holds its key, the first cannot be alone.
                await first.tryBeingAlone {}
                #expect(!first.isAlone)
            }
            // When it has gone, the first can again.
            try await Self.becomeAlone(first)
            _ = signals
        }
    }

    @Test("a process without a listener (a docketd command) is never alone, and its open does not wait for one that is not")
    func withoutListenerNeverAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (storage, _) = try await Self.open(location, listening: false)
        try await Self.closing(storage) {
            for _ in 0..<3 { await storage.tryBeingAlone {} }
            #expect(!storage.isAlone)
            // It never took the key exclusively, so another process joins without waiting for anyone to let go.
            #expect(try await Self.exclusiveHolders(location, key: try #require(storage.presence.key)) == 0)
            let (other, _) = try await Self.open(location, listening: false)
            try await other.close()
        }
    }

    @Test("a commit announced by a process that takes no key (an older docketd) ends being alone, and no new try follows for a while; its own hello does not")
    func foreignNotificationEndsBeingAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (storage, signals) = try await Self.open(location)
        try await Self.becomeAlone(storage)
        try await Self.closing(storage) {
            let other = try await Self.raw(location)
            try await Self.closing(connection: other) {
                // The listener's wake-ups show how far it has read: the one it gave when it began listening is taken first.
                var wakes = try #require(signals).makeAsyncIterator()
                _ = await wakes.next()
                // Its own announcement of itself (a hello with its own id: the echo it sends each second while alone) does not,
                // nor does a late announcement of its own commits (one that lists no numbers, too: many folded into one). An
                // announcement wakes the follower after it was heard (a hello does not), and the channel keeps their order:
                // each wake below shows that everything sent before it was heard.
                try await PostgresRunner(connection: other, logger: Logger(label: "test"))
                    .run(PostgresStorage.notification(payload: storage.presence.hello))
                for own in [CommitAnnouncer.Announcement.numbers([5]), .unnumbered] {
                    try await PostgresRunner(connection: other, logger: Logger(label: "test"))
                        .run(PostgresStorage.notification(payload: own.payload(from: storage.presence.id)))
                    _ = await wakes.next()
                    #expect(storage.isAlone)
                }
                try await PostgresRunner(connection: other, logger: Logger(label: "test")).run(PostgresStorage.notification(payload: "99"))
                try await Self.until { !storage.isAlone }
                #expect(!storage.isAlone)
                for _ in 0..<3 {
                    await storage.tryBeingAlone {}
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(!storage.isAlone)
            }
        }
    }

    @Test("a lost listener ends being alone (a newcomer's hello would go unheard)")
    func lostListenerEndsBeingAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (storage, signals) = try await Self.open(location)
        try await Self.becomeAlone(storage)
        try await Self.closing(storage) {
            let admin = try await Self.raw(location)
            try await Self.closing(connection: admin) {
                let killed = try await PostgresRunner(connection: admin, logger: Logger(label: "test")).rows(
                    // This test's listener only: its channel names the test's own schema.
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' || current_schema() || '%'"
                        + " AND pid <> pg_backend_pid() AND datname = current_database()"
                )
                #expect(!killed.isEmpty)
                try await Self.until { !storage.isAlone }
                #expect(!storage.isAlone)
                _ = signals
            }
        }
    }

    @Test("the catch-up runs after the key is taken and before being alone; one that fails leaves it sharing")
    func catchUpBeforeAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (storage, signals) = try await Self.open(location)
        try await Self.closing(storage) {
            let ran = Atomic<Int>(0)
            let start = ContinuousClock.now
            while ran.load(ordering: .relaxed) == 0, ContinuousClock.now - start < .seconds(10) {
                await storage.tryBeingAlone {
                    ran.add(1, ordering: .relaxed)
                    throw StorageUnavailable(reason: "planned")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(ran.load(ordering: .relaxed) == 1)
            #expect(!storage.isAlone)
            // The key it took was let go (once the unlock has run): another process opens the schema.
            let key = try #require(storage.presence.key)
            var holders = try await Self.exclusiveHolders(location, key: key)
            while holders > 0 {
                try await Task.sleep(for: .milliseconds(20))
                holders = try await Self.exclusiveHolders(location, key: key)
            }
            #expect(holders == 0)
            let (other, _) = try await Self.open(location, listening: false)
            try await other.close()
            _ = signals
        }
    }

    @Test("a lost presence connection ends being alone; a write waits for the join again, and is refused (503) when it cannot join within its bound")
    func lostPresenceConnection() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (storage, signals) = try await Self.open(location)
        try await Self.becomeAlone(storage)
        try await Self.closing(storage) {
            let admin = try await Self.raw(location)
            try await Self.closing(connection: admin) {
                let key = try #require(storage.presence.key)
                // The presence connection's backend, found by the lock it holds (classid: the key's high half, objid: its low).
                let killed = try await PostgresRunner(connection: admin, logger: Logger(label: "test")).rows(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND classid = "
                        + .bind(Int(UInt64(bitPattern: key) >> 32)) + " AND objid = " + .bind(Int(UInt64(bitPattern: key) & 0xFFFF_FFFF))
                        + " AND pid <> pg_backend_pid()"
                )
                #expect(!killed.isEmpty)
                try await Self.until { !storage.isAlone && !storage.presence.isJoined }
                #expect(!storage.isAlone)
                // Someone holds the key exclusively: the join cannot complete, and the write gives up at its bound.
                let runner = PostgresRunner(connection: admin, logger: Logger(label: "test"))
                try await runner.run("SELECT pg_advisory_lock(" + .bind(Int(key)) + ")")
                let ran = Atomic<Bool>(false)
                await #expect(throws: StorageUnavailable.self) {
                    try await storage.write(scope: .exclusive) { db in
                        ran.store(true, ordering: .relaxed)
                        try await db.run("SELECT 1")
                    }
                }
                let bodyRan = ran.load(ordering: .relaxed)
                #expect(!bodyRan)
                #expect(!storage.presence.isJoined)
                // Let go: the next write joins first, then runs.
                try await runner.run("SELECT pg_advisory_unlock(" + .bind(Int(key)) + ")")
                try await storage.write(scope: .exclusive) { db in try await db.run("SELECT 1") }
                #expect(storage.presence.isJoined)
                _ = signals
            }
        }
    }

    @Test("two processes opening a schema at once, with a third alone on it: both join, none waits for ever")
    func concurrentNewcomers() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let (first, signals) = try await Self.open(location)
        try await Self.closing(first) {
            try await Self.becomeAlone(first)
            async let a = Self.open(location, listening: false)
            async let b = Self.open(location, listening: false)
            let (one, two) = try await (a, b)
            try await Self.closing(one.0) {
                try await Self.closing(two.0) {
                    #expect(!first.isAlone)
                }
            }
            _ = signals
        }
    }
}

/// What a request does first (``RecordStore/catchUpBeforeRequest()``), alone and not.
@Suite(
    "A request's catch-up, alone on a schema", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint),
    .timeLimit(.minutes(1))
)
struct PresenceCatchUpTests {
    @Test("alone, a request reads nothing of the log; once another process has opened the schema, it reads the log's head again")
    func requestSkipsHeadAlone() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let storage = try await location.open(logger: Logger(label: "test"))
        let hasher = PasswordHasher(cost: 4)
        do {
            try await PostgresPresenceTests.closing(storage) { try await Self.requestSkipsHeadAlone(storage, location, hasher) }
        } catch {
            await hasher.shutdown()
            throw error
        }
        await hasher.shutdown()
    }

    private static func requestSkipsHeadAlone(_ storage: any Storage, _ location: StorageLocation, _ hasher: PasswordHasher) async throws {
        let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
        let shared = store.shared
        let signals = storage.logSignals(ignoring: { shared.accountedFor($0) })
        let seen = Mutex<[String]>([])
        storage.faults.observe { text in seen.withLock { $0.append(text) } }
        func headReads(_ body: () async throws -> Void) async throws -> Int {
            seen.withLock { $0 = [] }
            try await body()
            return seen.withLock { $0 }.filter { $0 == StorageDialect.newestEventSequenceSQL }.count
        }
        // Not alone yet: the head is read.
        #expect(try await headReads { try await store.catchUpBeforeRequest() } == 1)
        let start = ContinuousClock.now
        while !storage.isAlone, ContinuousClock.now - start < .seconds(10) {
            await storage.tryBeingAlone { try await store.catchUp() }
            if !storage.isAlone { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(storage.isAlone)
        #expect(try await headReads {
            for _ in 0..<5 { try await store.catchUpBeforeRequest() }
        } == 0)
        // Another process opens the schema (a command, say): from then on each request reads the head.
        let other = try await location.open(logger: Logger(label: "other"))
        try await PostgresPresenceTests.closing(other) {
            let reads = try await headReads { try await store.catchUpBeforeRequest() }
            #expect(reads == 1)
        }
        _ = signals
    }
}
