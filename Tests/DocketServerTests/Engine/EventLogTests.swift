import DocketModel
import Foundation
import Synchronization
import Testing

@testable import DocketServer

/// Following the event log: replay, then live, with no gap and no duplicate at the seam.
@Suite("Event log subscriptions")
struct EventLogTests {
    @Test("a subscription started while eight clients write sees every event after its start once, in order", .timeLimit(.minutes(3)))
    func seamUnderConcurrentWrites() async throws {
        try await TestApp.withStore { store in
            let start = try await store.events(after: 0, limit: 100_000).last?.sequence ?? 0
            let (writers, perWriter) = (8, 15)
            let stream = store.subscribe(after: start, batchSize: 7)
            // The follower stops at the last sequence once the writers are done (so that a missed event fails the
            // expectations below, saying which, rather than leaving the follower waiting).
            let last = Mutex<Int?>(nil)
            async let followed: [ChangeEvent] = {
                var seen: [ChangeEvent] = []
                var iterator = stream.makeAsyncIterator()
                while true {
                    if let last = last.withLock({ $0 }), (seen.last?.sequence ?? start) >= last { break }
                    guard let step = try await iterator.nextStep() else { break }
                    if case .event(let event) = step { seen.append(event) }
                }
                return seen
            }()
            // The writers run while the subscription replays and then follows live.
            let created = try await withThrowingTaskGroup(of: [String].self) { group in
                for worker in 0..<writers {
                    group.addTask {
                        var ids: [String] = []
                        for index in 0..<perWriter {
                            ids.append(try await store.insert(
                                into: "incident", values: ["short_description": "seam \(worker)-\(index)"], caller: Callers.admin
                            ))
                        }
                        return ids
                    }
                }
                var all: [String] = []
                for try await ids in group { all += ids }
                return all
            }
            let newest = try await store.latestSequence()
            last.withLock { $0 = newest }
            // Ticks wake a follower that already has everything (one tick could come before it waits again).
            let ticker = Task {
                while !Task.isCancelled {
                    store.broadcaster.tick()
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            let seen = try await followed
            ticker.cancel()
            let sequences = seen.map(\.sequence)
            #expect(sequences == Array((start + 1)...(start + sequences.count)))
            #expect(Set(seen.filter { $0.operation == .insert }.map(\.sysID)) == Set(created))
            #expect(created.count == writers * perWriter)
        }
    }

    @Test("a subscription from now sees only what commits after it, as it commits", .timeLimit(.minutes(3)))
    func live() async throws {
        try await TestApp.withStore { store in
            let now = try await store.events(after: 0, limit: 100_000).last?.sequence ?? 0
            let reader = store.subscribe(after: now).first(3)
            let id = try await store.insert(into: "incident", values: ["short_description": "live"], caller: Callers.admin)
            try await store.update(id, in: "incident", values: ["short_description": "live, changed"], caller: Callers.admin)
            try await store.delete(id, from: "incident", caller: Callers.admin)
            let events = try await reader.value
            #expect(events.map(\.operation) == [.insert, .update, .delete])
            #expect(events.map(\.sysID) == [id, id, id])
            #expect(events.map(\.sequence) == [now + 1, now + 2, now + 3])
            #expect(events[1].fields.contains("short_description"))
        }
    }

    @Test("a subscription that ends stops following the broadcaster", .timeLimit(.minutes(3)))
    func stops() async throws {
        try await TestApp.withStore { store in
            let now = try await store.events(after: 0, limit: 100_000).last?.sequence ?? 0
            do {
                let stream = store.subscribe(after: now - 2)
                var count = 0
                for try await _ in stream {
                    count += 1
                    if count == 2 { break }
                }
                #expect(count == 2)
            }
            // Termination is asynchronous: this loop ends only when the follower is gone (else the time limit fails it).
            while store.broadcaster.count > 0 { await Task.yield() }
            #expect(store.broadcaster.count == 0)
        }
    }

    @Test("the lag metrics: how far the furthest behind follower of each kind is from the head")
    func followerLag() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            #expect(store.broadcaster.lags(head: start) == [.live: 0, .notifier: 0])
            var live = store.subscribe(after: start).makeAsyncIterator()
            var notifier = store.subscribe(after: start, replayLimited: false, kind: .notifier).makeAsyncIterator()
            for index in 0..<3 {
                _ = try await store.insert(into: "incident", values: ["short_description": "lag \(index)"], caller: Callers.admin)
            }
            let head = try await store.latestSequence()
            #expect(store.broadcaster.lags(head: head) == [.live: head - start, .notifier: head - start])
            _ = try await live.next()
            #expect(store.broadcaster.lags(head: head)[.live] == head - start - 1)
            for _ in 0..<2 { _ = try await live.next() }
            #expect(store.broadcaster.lags(head: head) == [.live: 0, .notifier: head - start])
            for _ in 0..<3 { _ = try await notifier.next() }
            #expect(store.broadcaster.lags(head: head) == [.live: 0, .notifier: 0])
            // A follower that stops no longer counts.
            withExtendedLifetime(live) {}
        }
    }

    @Test("a follower ahead of the log (a database restored from a backup) is told to resync, never skips new changes")
    func aheadOfTheLog() async throws {
        try await TestApp.withStore { store in
            let newest = try await store.latestSequence()
            do {
                for try await _ in store.subscribe(after: newest + 5) { Issue.record("a follower ahead of the log got an event") }
                Issue.record("a follower ahead of the log was not told to resync")
            } catch let error as EventLogError {
                #expect(error == .resyncNeeded(oldestAvailable: newest))
            }
            // At the head exactly, it follows.
            let follower = store.subscribe(after: newest).first(1)
            try await store.insert(into: "incident", values: ["short_description": "after"], caller: Callers.admin)
            #expect(try await follower.value.map(\.sequence) == [newest + 1])
        }
    }

    @Test("retention removes old events; a follower behind what was removed is told to resync, never left with a gap")
    func retention() async throws {
        try await TestApp.withStore { store in
            let newest = try await store.events(after: 0, limit: 100_000).last?.sequence ?? 0
            #expect(try await store.eventLogPrunedThrough() == 0)
            // Nothing is older than a day; keep only the newest 10.
            let removed = try await store.pruneEventLog(olderThan: Date().addingTimeInterval(-86_400), keepingAtMost: 10)
            #expect(removed == newest - 10)
            #expect(try await store.eventLogPrunedThrough() == newest - 10)
            do {
                for try await _ in store.subscribe(after: 0) { Issue.record("a follower behind the pruned events got an event") }
                Issue.record("a follower behind the pruned events was not told to resync")
            } catch let error as EventLogError {
                #expect(error == .resyncNeeded(oldestAvailable: newest - 10))
            }
            // From the oldest still there, everything follows.
            var seen: [Int] = []
            for try await event in store.subscribe(after: newest - 10) {
                seen.append(event.sequence)
                if seen.count == 10 { break }
            }
            #expect(seen == Array((newest - 9)...newest))
            // Pruning by age: everything is older than a moment from now.
            try await store.pruneEventLog(olderThan: Date().addingTimeInterval(60), keepingAtMost: 1_000_000)
            #expect(try await store.eventLogPrunedThrough() == newest)
            #expect(try await store.events(after: 0).isEmpty)
        }
    }

    @Test("a follower that falls behind its live buffer reads what it lost from the log, in order, once", .timeLimit(.minutes(3)))
    func slowFollower() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            var iterator = store.subscribe(after: start, batchSize: 3, liveBuffer: 4).makeAsyncIterator()
            try await store.insert(into: "incident", values: ["short_description": "first"], caller: Callers.admin)
            var sequences = [try await iterator.next()?.sequence]
            // Twenty commits while the follower does not read: its buffer keeps only the newest four.
            for index in 0..<20 {
                try await store.insert(into: "incident", values: ["short_description": "behind \(index)"], caller: Callers.admin)
            }
            for _ in 0..<20 { sequences.append(try await iterator.next()?.sequence) }
            #expect(sequences == Array((start + 1)...(start + 21)).map { Optional($0) })
        }
    }

    @Test("an insert's event is the one the log keeps: its number, its fields, odd text and journal entries alike (on PostgreSQL the insert appends it itself)", .timeLimit(.minutes(2)))
    func insertEventAsLogged() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            // The events as the writes published them (not read back from the log).
            let published = PublishedEvents()
            store.broadcaster.add(observer: published)
            let odd = "quote \" backslash \\ apostrophe ' newline \n tab \t ü 雪 🚀 {\"number\":\"x\"} $1"
            let numbered = try await store.insert(
                into: "incident", values: ["short_description": odd, "comments": "first \"comment\"", "impact": "1"], caller: Callers.admin
            )
            // Given its number: nothing is drawn.
            let given = try await store.insert(
                into: "incident", values: ["short_description": "given", "number": "INC9990001"], caller: Callers.admin
            )
            let live = published.events.withLock { $0 }.filter { $0.sequence > start }
            let logged = try await store.events(after: start)
            #expect(logged == live)
            #expect(logged.map(\.sysID) == [numbered, given])
            let row = try await store.get(numbered, in: "incident", caller: Callers.admin).record
            #expect(logged.first?.values["number"] == row["number"])
            #expect(row["number"].hasPrefix("INC"))
            #expect(logged.first?.values["short_description"] == odd)
            #expect(logged.first?.values["comments"] == "first \"comment\"")
            #expect(logged.first?.fields.contains("number") == true)
            #expect(logged.first?.fields.contains("comments") == true)
            #expect(logged.last?.values["number"] == "INC9990001")
            // A write that fails with its journal entry leaves neither row nor event: on SQLite the entry's insert comes
            // after the row's; on PostgreSQL the entry is inserted by the row's own statement, which fails whole.
            store.storage.faults.failNext { $0.hasPrefix("INSERT INTO sys_journal_field") || $0.contains("_also0 AS (INSERT INTO sys_journal_field") }
            await #expect(throws: (any Error).self) {
                try await store.insert(
                    into: "incident", values: ["short_description": "rolled back", "comments": "never"], caller: Callers.admin
                )
            }
            let after = try await store.events(after: start)
            #expect(after.count == 2)
            let rolledBack = try await store.list(
                RecordQuery(table: "incident", query: try EncodedQuery("short_description=rolled back"), count: true), caller: Callers.admin
            )
            #expect(rolledBack.records.isEmpty)
        }
    }

    @Test("a follower waits live for numbers this process drew for writes still under way, and reads the log once one of them failed", .timeLimit(.minutes(2)))
    func ownNumbersInFlight() async throws {
        try await TestApp.withStore { store in
            // SQLite: one connection writes, and draws nothing ahead of its commit.
            guard store.storage.isShared else { return }
            // Counts the reads of the log (each begins with the pruned mark), failing none.
            let reads = Atomic<Int>(0)
            store.storage.faults.failNext { sql in
                if sql.contains("event_log_pruned_through") { reads.add(1, ordering: .sequentiallyConsistent) }
                return false
            }
            func event(_ sequence: Int) -> ChangeEvent {
                ChangeEvent(
                    sequence: sequence, table: "incident", rootTable: "task", sysID: "follower\(sequence)", operation: .insert,
                    fields: [], userName: "admin", time: "2026-12-02 08:00:00", values: [:], previous: [:]
                )
            }
            let start = try await store.latestSequence()
            let follower = store.subscribe(after: start)
            var iterator = follower.makeAsyncIterator()
            // The replay finds nothing after the start: one read.
            // Three writes of this process commit in the reverse order of their numbers.
            store.shared.drew(start + 1)
            store.shared.drew(start + 2)
            store.broadcaster.publish(event(start + 3))
            store.broadcaster.publish(event(start + 2))
            store.broadcaster.publish(event(start + 1))
            #expect(try await iterator.next()?.sequence == start + 1)
            #expect(try await iterator.next()?.sequence == start + 2)
            #expect(try await iterator.next()?.sequence == start + 3)
            #expect(reads.load(ordering: .sequentiallyConsistent) == 1)
            // A write of this process that drew a number is under way: the follower waits for it without reading.
            store.shared.drew(start + 4)
            store.broadcaster.publish(event(start + 5))
            let next = Task { [iterator] in
                var iterator = iterator
                return try await iterator.next()?.sequence
            }
            try await Task.sleep(for: .milliseconds(300))
            #expect(reads.load(ordering: .sequentiallyConsistent) == 1)
            // It failed: the follower is woken, reads the log, finds the number was never committed, and goes on.
            store.abandoned([start + 4])
            #expect(try await next.value == start + 5)
            #expect(reads.load(ordering: .sequentiallyConsistent) == 2)
        }
    }
}

/// Keeps every event the broadcaster publishes.
private final class PublishedEvents: ChangeObserver {
    let events = Mutex<[ChangeEvent]>([])
    func observe(_ event: ChangeEvent) { events.withLock { $0.append(event) } }
}
