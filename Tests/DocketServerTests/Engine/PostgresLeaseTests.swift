import Foundation
import Logging
import Synchronization
import Testing

@testable import DocketServer

/// The lease of a pooled PostgreSQL connection (``PostgresStorage``): bounded by ``PostgresStorage/leaseTimeout``
/// through alarms (``Alarms``), never running its body once given up, and ending at once for a cancelled caller.
@Suite("A pooled connection's lease (PostgreSQL)", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct PostgresLeaseTests {
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    @Test("every connection held: a read gets StorageUnavailable at the lease's limit without running; a cancelled one ends by its cancellation; then the pool serves again")
    func givesUp() async throws {
        guard case .postgres(let location) = try #require(TestDatabase.freshPostgres()) else { return }
        let storage = try await PostgresStorage.open(location, connections: 2, logger: Logger(label: "test"))
        let gate = BoundedTests.Gate()
        do {
            let (held, holding) = AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded)
            let holders = (0..<2).map { _ in
                Task {
                    try await storage.read { db in
                        try await db.run("SELECT 1")
                        holding.yield()
                        await gate.wait()
                    }
                }
            }
            var inside = 0
            for await _ in held {
                inside += 1
                if inside == 2 { break }
            }

            let ran = Flag()
            let start = ContinuousClock.now
            await #expect(throws: StorageUnavailable.self) { try await storage.read { _ in ran.set() } }
            let waited = ContinuousClock.now - start
            // Not before the limit (a busy machine can only make it later).
            #expect(waited >= PostgresStorage.leaseTimeout - .milliseconds(100), "gave up after \(waited)")

            let cancelled = Task { try await storage.read { _ in ran.set() } }
            try await Task.sleep(for: .milliseconds(300))
            cancelled.cancel()
            // Ended by its cancellation (the pool's "request cancelled"), not by the lease's limit (which answers
            // StorageUnavailable): no timing needed.
            switch await cancelled.result {
            case .success: Issue.record("a cancelled read ran")
            case .failure(let error): #expect(!(error is StorageUnavailable), "ended by \(error)")
            }
            #expect(!ran.isSet)

            gate.open()
            for holder in holders { try await holder.value }
            #expect(try await storage.read { db in try await db.integer("SELECT 2") } == 2)
        } catch {
            gate.open()
            try? await storage.close()
            throw error
        }
        try await storage.close()
    }
}
