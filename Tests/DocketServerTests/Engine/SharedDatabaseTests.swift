import DocketModel
import Foundation
import Logging
import PostgresNIO
import Synchronization
import Testing

@testable import DocketServer

/// Two engines on one PostgreSQL database, as two docketd instances behind a load balancer: what one writes,
/// the other serves at once (caches, catalog) and carries to its live followers, in order, once. Runs when
/// `DOCKET_TEST_POSTGRES_URL` names a server (as in `.ci/run`).
@Suite("Shared database (several instances)", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct SharedDatabaseTests {
    /// Two engines on a new copy of the demo database, each with its own storage (connections, caches,
    /// broadcaster), the second following the first's notifications as ``SharedChangesService`` does.
    static func withTwoInstances(_ test: @Sendable (RecordStore, RecordStore) async throws -> Void) async throws {
        let location = try #require(try await TestDatabase.demoPostgres())
        let hasher = PasswordHasher(cost: 4)
        let storageA = try await location.open(logger: Logger(label: "a"))
        let storageB = try await location.open(logger: Logger(label: "b"))
        let (a, _) = try await RecordStore.open(storage: storageA, logger: Logger(label: "a"), hashPassword: hasher.hash)
        let (b, _) = try await RecordStore.open(storage: storageB, logger: Logger(label: "b"), hashPassword: hasher.hash)
        let signals = try #require(storageB.logSignals())
        let follower = Task {
            for await _ in signals { try? await b.catchUp() }
        }
        do {
            try await test(a, b)
        } catch {
            follower.cancel()
            try? await storageA.close()
            try? await storageB.close()
            await hasher.shutdown()
            throw error
        }
        follower.cancel()
        try await storageA.close()
        try await storageB.close()
        await hasher.shutdown()
    }

    @Test("a record cached by one instance is fresh there once another instance's write has answered")
    func cacheFollowsOtherInstances() async throws {
        try await Self.withTwoInstances { a, b in
            let id = DemoData.id("incident", 5)
            _ = try await b.get(id, in: "incident", caller: Callers.john)
            #expect(b.cache.entry(table: "task", sysID: id) != nil)
            try await a.update(id, in: "incident", values: ["short_description": "Changed on A"], caller: Callers.john)
            // What each request does first on a shared database (``SharedChangesResponder``).
            try await b.catchUp()
            #expect(try await b.get(id, in: "incident", caller: Callers.john).record["short_description"] == "Changed on A")
        }
    }

    @Test("a table an admin adds through one instance is known to the other")
    func catalogFollowsOtherInstances() async throws {
        try await Self.withTwoInstances { a, b in
            _ = try await a.insert(
                into: "sys_db_object", values: ["name": "u_shared", "label": "Shared"], caller: Callers.admin
            )
            // B's notification follower may already have applied it; catching up is what a request does first.
            try await b.catchUp()
            #expect(b.catalog.table("u_shared") != nil)
            let id = try await a.insert(into: "u_shared", values: [:], caller: Callers.admin)
            try await b.catchUp()
            #expect(try await b.get(id, in: "u_shared", caller: Callers.admin).record["sys_id"] == id)
        }
    }

    @Test("a follower on one instance receives every change written through both, in order, once", .timeLimit(.minutes(3)))
    func liveAcrossInstances() async throws {
        try await Self.withTwoInstances { a, b in
            let start = try await b.latestSequence()
            let perInstance = 20
            let reader = b.subscribe(after: start).first(2 * perInstance)
            // Both instances write at once; sequences are drawn under the shared write lock.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (store, name) in [(a, "A"), (b, "B")] {
                    group.addTask {
                        for index in 0..<perInstance {
                            _ = try await store.insert(
                                into: "incident", values: ["short_description": "\(name) \(index)"], caller: Callers.admin
                            )
                        }
                    }
                }
                try await group.waitForAll()
            }
            let events = try await reader.value
            #expect(events.map(\.sequence) == Array(start + 1...start + 2 * perInstance))
            let descriptions = events.compactMap { $0.values["short_description"] }
            #expect(descriptions.filter { $0.hasPrefix("A ") } == (0..<perInstance).map { "A \($0)" })
            #expect(descriptions.filter { $0.hasPrefix("B ") } == (0..<perInstance).map { "B \($0)" })
        }
    }

    /// Collects what a broadcaster publishes.
    final class Published: ChangeObserver, Sendable {
        private let events = Mutex<[ChangeEvent]>([])
        func observe(_ event: ChangeEvent) { events.withLock { $0.append(event) } }
        var all: [ChangeEvent] { events.withLock { $0 } }
    }

    @Test("an instance that serves no request hears of another's writes by notification alone", .timeLimit(.minutes(3)))
    func notified() async throws {
        try await Self.withTwoInstances { a, b in
            // B neither writes nor answers requests here: only the notification path can publish on it.
            let published = Published()
            b.broadcaster.add(observer: published)
            let start = try await b.latestSequence()
            let id = try await a.insert(into: "incident", values: ["short_description": "from A"], caller: Callers.admin)
            try await a.update(id, in: "incident", values: ["short_description": "from A, changed"], caller: Callers.admin)
            try await a.delete(id, from: "incident", caller: Callers.admin)
            while published.all.count < 3 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(published.all.map(\.operation) == [.insert, .update, .delete])
            #expect(published.all.map(\.sequence) == [start + 1, start + 2, start + 3])
        }
    }

    @Test("numbers stay unique when both instances create at once")
    func numbering() async throws {
        try await Self.withTwoInstances { a, b in
            let ids = try await withThrowingTaskGroup(of: [String].self) { group in
                for store in [a, b, a, b] {
                    group.addTask {
                        var ids: [String] = []
                        for _ in 0..<10 {
                            ids.append(try await store.insert(into: "incident", values: [:], caller: Callers.admin))
                        }
                        return ids
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            var numbers: [String] = []
            for id in ids {
                numbers.append(try await a.get(id, in: "incident", caller: Callers.admin).record["number"])
            }
            #expect(Set(numbers).count == 40)
            #expect(numbers.allSatisfy { $0.hasPrefix("INC") })
        }
    }

    @Test("the log's head is read on a connection of its own, which is replaced when it breaks")
    func headReadSurvivesItsConnection() async throws {
        try await Self.withTwoInstances { a, b in
            let storage = try #require(b.storage as? PostgresStorage)
            let logger = Logger(label: "test")
            let start = try await storage.latestEventSequence()
            #expect(start == (try await a.latestSequence()))
            let first = try #require(await storage.headConnection.connection(logger: logger))
            try await first.close()
            _ = try await a.insert(into: "incident", values: [:], caller: Callers.admin)
            // Read through the pool or a new connection, never a stale answer.
            #expect(try await storage.latestEventSequence() == start + 1)
            // The follower's catch-up (woken by the insert's notification) may be connecting it right now: a caller
            // meanwhile gets none and reads through the pool, so wait for the new connection.
            var replacement: PostgresConnection?
            for _ in 0..<200 {
                replacement = await storage.headConnection.connection(logger: logger)
                if replacement != nil { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            let second = try #require(replacement)
            #expect(second !== first)
            #expect(!second.isClosed)
            // Several requests' reads at once share what they can and all see the newest event.
            _ = try await a.insert(into: "incident", values: [:], caller: Callers.admin)
            let heads = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 { group.addTask { try await storage.latestEventSequence() } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(heads == Array(repeating: start + 2, count: 8))
        }
    }
}
