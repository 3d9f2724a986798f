import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import DocketServer

/// docketd's own pool of PostgreSQL connections (``PostgresConnections``), on a real server.
@Suite(
    "PostgreSQL connection pool", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint), .timeLimit(.minutes(1))
)
struct PostgresConnectionsTests {
    /// Opens connections to the test server, counting the attempts; `failing` attempts fail first, and each waits
    /// for `gate` when one is given.
    final class Opener: Sendable {
        let location: PostgresLocation
        let attempts = Atomic<Int>(0)
        let failing: Int
        let gate: AsyncStream<Void>?
        let started: AsyncStream<Void>.Continuation?

        init(failing: Int = 0, gate: AsyncStream<Void>? = nil, started: AsyncStream<Void>.Continuation? = nil) throws {
            guard let location = TestDatabase.postgres else { throw CancellationError() }
            self.location = location
            self.failing = failing
            self.gate = gate
            self.started = started
        }

        func open(_ id: Int) async throws -> PostgresConnection {
            let attempt = attempts.add(1, ordering: .relaxed).newValue
            started?.yield()
            if let gate { for await _ in gate { break } }
            if attempt <= failing { throw StorageUnavailable(reason: "attempt \(attempt) fails, as planned") }
            return try await PostgresConnection.connect(
                configuration: try location.connectionConfiguration(searchPath: false), id: id, logger: Logger(label: "test")
            )
        }
    }

    final class Order: Sendable {
        let names = Mutex<[String]>([])
    }

    static func pool(
        _ maximum: Int, _ opener: Opener, retryAfter: Duration = .milliseconds(10), checkIdleAfter: Duration = .seconds(30),
        check: @escaping PostgresConnections.Check = { _ in true }
    ) -> PostgresConnections {
        PostgresConnections(maximum: maximum, retryAfter: retryAfter, checkIdleAfter: checkIdleAfter, open: opener.open, check: check)
    }

    static func one(_ connection: PostgresConnection) async throws -> Int? {
        try await PostgresRunner(connection: connection, logger: Logger(label: "test")).rows("SELECT 1 AS one").first?
            .value(at: "one", kind: .integer).intValue
    }

    /// Waits until the pool's counts say what `condition` asks (they change as tasks reach the pool).
    static func until(_ pool: PostgresConnections, _ condition: @escaping ((slots: Int, idle: Int, waiting: Int)) -> Bool) async throws {
        while !condition(pool.counts) {
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test("a connection returned is the next one leased; the pool opens no more than it needs")
    func reuse() async throws {
        let opener = try Opener()
        let pool = Self.pool(4, opener)
        let first = try await pool.lease()
        #expect(try await Self.one(first) == 1)
        pool.release(first)
        let second = try await pool.withConnection { connection async throws in
            #expect(try await Self.one(connection) == 1)
            return ObjectIdentifier(connection)
        }
        #expect(second == ObjectIdentifier(first))
        // At once, without waiting: an idle connection, and nothing while none is idle.
        let third = try #require(pool.leaseIfIdle())
        #expect(third === first)
        #expect(pool.leaseIfIdle() == nil)
        pool.release(third)
        #expect(opener.attempts.load(ordering: .relaxed) == 1)
        #expect(pool.counts == (1, 1, 0))
        await pool.close()
        #expect(first.isClosed)
    }

    @Test("at most `maximum` connections; leases beyond wait in line and are served in order")
    func waitersInOrder() async throws {
        let opener = try Opener()
        let pool = Self.pool(2, opener)
        let (a, b) = (try await pool.lease(), try await pool.lease())
        let order = Order()
        let first = Task {
            let connection = try await pool.lease()
            order.names.withLock { $0.append("first") }
            return connection
        }
        try await Self.until(pool) { $0.waiting == 1 }
        let second = Task {
            let connection = try await pool.lease()
            order.names.withLock { $0.append("second") }
            return connection
        }
        try await Self.until(pool) { $0.waiting == 2 }
        #expect(pool.counts.slots == 2)
        pool.release(a)
        let handed = try await first.value
        #expect(handed === a)
        pool.release(b)
        #expect(try await second.value === b)
        #expect(order.names.withLock { $0 } == ["first", "second"])
        #expect(opener.attempts.load(ordering: .relaxed) == 2)
        pool.release(a)
        pool.release(b)
        #expect(pool.counts == (2, 2, 0))
        await pool.close()
    }

    @Test("a lease cancelled while it waits in line leaves at once and takes nothing")
    func cancelledWaiter() async throws {
        let pool = Self.pool(1, try Opener())
        let held = try await pool.lease()
        let waiting = Task { try await pool.lease() }
        try await Self.until(pool) { $0.waiting == 1 }
        waiting.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiting.value }
        #expect(pool.counts.waiting == 0)
        pool.release(held)
        #expect(pool.counts == (1, 1, 0))
        await pool.close()
    }

    @Test("a connection found closed is dropped and its slot opens a new one, for the next lease or the first in line")
    func brokenConnectionReplaced() async throws {
        let opener = try Opener()
        let pool = Self.pool(1, opener)
        let broken = try await pool.lease()
        try await broken.close()
        pool.release(broken)
        #expect(pool.counts == (0, 0, 0))
        let fresh = try await pool.lease()
        #expect(fresh !== broken)
        #expect(try await Self.one(fresh) == 1)
        // Closed while someone waits for it: the one waiting opens a connection in its slot.
        let waiting = Task { try await pool.lease() }
        try await Self.until(pool) { $0.waiting == 1 }
        try await fresh.close()
        pool.release(fresh)
        let third = try await waiting.value
        #expect(third !== fresh)
        #expect(try await Self.one(third) == 1)
        #expect(opener.attempts.load(ordering: .relaxed) == 3)
        pool.release(third)
        // An idle connection that closed meanwhile is passed over.
        try await third.close()
        let fourth = try await pool.lease()
        #expect(fourth !== third)
        pool.release(fourth)
        #expect(pool.counts == (1, 1, 0))
        await pool.close()
    }

    @Test("a connection idle a while is checked before it is leased, and replaced in its slot when it does not answer")
    func idleConnectionChecked() async throws {
        let opener = try Opener()
        final class Checks: Sendable {
            let count = Atomic<Int>(0)
            let answer = Atomic<Bool>(true)
        }
        let checks = Checks()
        let pool = Self.pool(1, opener, checkIdleAfter: .zero) { _ in
            checks.count.add(1, ordering: .relaxed)
            return checks.answer.load(ordering: .relaxed)
        }
        let first = try await pool.lease()
        pool.release(first)
        try await Task.sleep(for: .milliseconds(5))
        #expect(pool.leaseIfIdle() == nil)  // idle too long to be had unchecked
        let again = try await pool.lease()
        #expect(again === first)
        #expect(checks.count.load(ordering: .relaxed) == 1)
        pool.release(again)
        try await Task.sleep(for: .milliseconds(5))
        checks.answer.store(false, ordering: .relaxed)
        let replaced = try await pool.lease()
        #expect(replaced !== first)
        #expect(try await Self.one(replaced) == 1)
        #expect(checks.count.load(ordering: .relaxed) == 2)
        #expect(opener.attempts.load(ordering: .relaxed) == 2)
        #expect(pool.counts == (1, 0, 0))
        pool.release(replaced)
        await pool.close()
        try await first.closeFuture.get()
    }

    @Test("a lease cancelled while its idle connection is checked gives the slot back")
    func cancelledDuringTheCheck() async throws {
        let (checking, checkStarted) = AsyncStream<Void>.makeStream()
        let pool = Self.pool(1, try Opener(), checkIdleAfter: .zero) { _ in
            checkStarted.yield()
            // A check that does not answer until its lease is cancelled, and then fails.
            while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(5)) }
            return false
        }
        let idle = try await pool.lease()
        pool.release(idle)
        try await Task.sleep(for: .milliseconds(5))
        let lease = Task { try await pool.lease() }
        for await _ in checking { break }
        lease.cancel()
        await #expect(throws: CancellationError.self) { _ = try await lease.value }
        #expect(pool.counts == (0, 0, 0))
        try await idle.closeFuture.get()
        await pool.close()
    }

    @Test("a failed open is tried again by the same lease, which gets the connection once one opens")
    func failedOpenTriedAgain() async throws {
        let opener = try Opener(failing: 2)
        let pool = Self.pool(1, opener)
        let connection = try await pool.lease()
        #expect(try await Self.one(connection) == 1)
        #expect(opener.attempts.load(ordering: .relaxed) == 3)
        pool.release(connection)
        #expect(pool.counts == (1, 1, 0))
        await pool.close()
    }

    @Test("a lease cancelled while its connection opens returns at once; the connection joins the pool when it comes")
    func cancelledWhileOpening() async throws {
        let (gate, release) = AsyncStream<Void>.makeStream()
        let (started, start) = AsyncStream<Void>.makeStream()
        let opener = try Opener(gate: gate, started: start)
        let pool = Self.pool(1, opener)
        let lease = Task { try await pool.lease() }
        for await _ in started { break }
        lease.cancel()
        await #expect(throws: CancellationError.self) { _ = try await lease.value }
        #expect(pool.counts == (1, 0, 0))  // the opener still holds the slot
        release.yield()
        try await Self.until(pool) { $0.idle == 1 }
        let connection = try await pool.lease()
        #expect(try await Self.one(connection) == 1)
        #expect(opener.attempts.load(ordering: .relaxed) == 1)
        pool.release(connection)
        await pool.close()
    }

    @Test("an opener given up after a failure frees its slot for the first in line")
    func abandonedOpenerFreesItsSlot() async throws {
        // The first attempt fails, once let through; each attempt waits to be let through.
        let (gate, letThrough) = AsyncStream<Void>.makeStream()
        let (started, start) = AsyncStream<Void>.makeStream()
        let opener = try Opener(failing: 1, gate: gate, started: start)
        let pool = Self.pool(1, opener, retryAfter: .milliseconds(10))
        let first = Task { try await pool.lease() }
        var attempts = started.makeAsyncIterator()
        _ = await attempts.next()
        let second = Task { try await pool.lease() }
        try await Self.until(pool) { $0.waiting == 1 }
        first.cancel()
        await #expect(throws: CancellationError.self) { _ = try await first.value }
        // The first's attempt fails: its opener, given up, hands its slot to the second, whose own attempt succeeds.
        letThrough.yield()
        _ = await attempts.next()
        #expect(pool.counts.waiting == 0)
        letThrough.yield()
        let connection = try await second.value
        #expect(try await Self.one(connection) == 1)
        #expect(opener.attempts.load(ordering: .relaxed) == 2)
        pool.release(connection)
        #expect(pool.counts == (1, 1, 0))
        await pool.close()
    }

    @Test("after close: idle connections are closed, leases fail with StorageUnavailable, leased ones close on return")
    func close() async throws {
        let idlePool = Self.pool(1, try Opener())
        let idle = try await idlePool.lease()
        idlePool.release(idle)
        await idlePool.close()
        #expect(idle.isClosed)

        let pool = Self.pool(1, try Opener())
        let leased = try await pool.lease()
        let waiting = Task { try await pool.lease() }
        try await Self.until(pool) { $0.waiting == 1 }
        await pool.close()
        await #expect(throws: StorageUnavailable.self) { _ = try await waiting.value }
        await #expect(throws: StorageUnavailable.self) { _ = try await pool.lease() }
        #expect(!leased.isClosed)
        pool.release(leased)
        try await leased.closeFuture.get()
        #expect(pool.counts == (0, 0, 0))
    }
}
