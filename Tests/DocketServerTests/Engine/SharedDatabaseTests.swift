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
    /// broadcaster), each following the other's notifications as ``SharedChangesService`` does in every docketd (an
    /// instance that hears of no other's commit publishes them to its followers only when a request catches up).
    /// `followingA: false` leaves A without a follower (a test that listens on A itself).
    static func withTwoInstances(
        followingA: Bool = true, _ test: @Sendable (RecordStore, RecordStore) async throws -> Void
    ) async throws {
        let location = try #require(try await TestDatabase.demoPostgres())
        let hasher = PasswordHasher(cost: 4)
        let storageA = try await location.open(logger: Logger(label: "a"))
        let storageB = try await location.open(logger: Logger(label: "b"))
        let (a, _) = try await RecordStore.open(storage: storageA, logger: Logger(label: "a"), hashPassword: hasher.hash)
        let (b, _) = try await RecordStore.open(storage: storageB, logger: Logger(label: "b"), hashPassword: hasher.hash)
        var followers: [Task<Void, Never>] = []
        for (storage, store) in followingA ? [(storageA, a), (storageB, b)] : [(storageB, b)] {
            let shared = store.shared
            let signals = try #require(storage.logSignals(ignoring: { shared.accountedFor($0) }) as AsyncStream<Void>?)
            for wakes in [signals, shared.handedBack] {
                followers.append(Task {
                    for await _ in wakes { try? await store.catchUp() }
                })
            }
        }
        do {
            try await test(a, b)
        } catch {
            for follower in followers { follower.cancel() }
            try? await storageA.close()
            try? await storageB.close()
            await hasher.shutdown()
            throw error
        }
        for follower in followers { follower.cancel() }
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

    @Test("the log's notification of an instance's own commit wakes nothing there; another instance's commit does", .timeLimit(.minutes(2)))
    func ownCommitsWakeNothing() async throws {
        // A has no other follower: nothing but this test's listener catches up there.
        try await Self.withTwoInstances(followingA: false) { a, b in
            let shared = a.shared
            // Each notification's number and whether it was dropped, in the order they came.
            let decisions = Mutex<[(sequence: Int, dropped: Bool)]>([])
            let signals = try #require(a.storage.logSignals(ignoring: { sequence in
                let dropped = shared.accountedFor(sequence)
                decisions.withLock { $0.append((sequence, dropped)) }
                return dropped
            }) as AsyncStream<Void>?)
            let wakes = Box<Int>()
            wakes.set(0)
            let counting = Task {
                for await _ in signals { wakes.set((wakes.current ?? 0) + 1) }
            }
            defer { counting.cancel() }
            // The first wake-up follows the listener's connection.
            while wakes.current == 0 { try await Task.sleep(for: .milliseconds(5)) }
            // Writes of A that commit with COMMIT (a comment makes a create two statements): A drew their numbers
            // before they committed, so their notifications find them accounted for.
            let before = try await a.newestSequence()
            for index in 0..<4 {
                _ = try await a.insert(
                    into: "incident", values: ["short_description": "own \(index)", "comments": "note"], caller: Callers.admin
                )
            }
            _ = try await b.insert(into: "incident", values: ["short_description": "B's"], caller: Callers.admin)
            let head = try await a.newestSequence()
            #expect(head == before + 5)
            while !decisions.withLock({ $0.contains { $0.sequence == head } && $0.contains { $0.sequence == head - 1 } }) {
                try await Task.sleep(for: .milliseconds(5))
            }
            while wakes.current == 1 { try await Task.sleep(for: .milliseconds(5)) }
            // Time for any late notification of A's own commits to arrive (none may wake).
            try await Task.sleep(for: .milliseconds(300))
            // Each write announces its events after its commit; those announced while one is on its way are
            // folded into the next, which lists them all: every number comes, and A's own are dropped.
            let seen = decisions.withLock { $0 }
            let numbers = seen.map(\.sequence).sorted()
            let ownDropped = seen.filter { $0.sequence < head }.allSatisfy(\.dropped)
            let others = seen.filter { $0.sequence == head }.map(\.dropped)
            #expect(numbers == Array(before + 1...head), "every commit announced once")
            #expect(ownDropped, "A's own commits")
            #expect(others == [false], "B's commit")
            #expect(wakes.current == 2)
        }
    }

    @Test("a commit whose writer never announced it (stopped first) reaches another instance's followers by the poll alone", .timeLimit(.minutes(2)))
    func unannouncedCommitPolled() async throws {
        try await Self.withTwoInstances(followingA: false) { a, b in
            let published = Published()
            a.broadcaster.add(observer: published)
            try await a.catchUp()
            // A's SharedChangesService as docketd runs it, with notifications that never come, polling every 50 ms
            // (every second in docketd).
            let (silence, quiet) = AsyncStream<Void>.makeStream()
            defer { quiet.finish() }
            let service = SharedChangesService(store: a, signals: silence, logger: Logger(label: "a"), pollInterval: .milliseconds(50))
            let polling = Task { try await service.run() }
            defer { polling.cancel() }
            // B appends an event outside a write of its storage: committed, and never announced, as by an instance
            // killed between its commit and its announcement.
            let table = try #require(b.catalog.table("incident"))
            let event = RecordStore.event(
                table: table, sysID: SysID.generate(), operation: .insert, fields: ["short_description"],
                values: ["short_description": "never announced"], previous: [:], caller: Callers.admin, now: "2026-12-03 12:00:00"
            )
            let sequence = try await b.storage.read { db in
                try await db.integer(db.dialect.appendingEvent(RecordStore.eventValues(of: event, after: .bind(RecordStore.json(event.values)))))
            }
            while !published.all.contains(where: { $0.sequence == sequence }) { try await Task.sleep(for: .milliseconds(5)) }
            #expect(published.all.first { $0.sequence == sequence }?.values["short_description"] == "never announced")
        }
    }

    @Test("the log's append notifies nobody inside the writing transaction: PostgreSQL's notification lock stays out of every commit", .timeLimit(.minutes(2)))
    func appendDoesNotNotify() async throws {
        try await Self.withTwoInstances { a, _ in
            let source = try await a.storage.read { db in
                try await db.rows(
                    "SELECT p.prosrc AS source FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
                        + "WHERE p.proname = 'docket_append_event' AND n.nspname = current_schema()"
                ).first?.value(at: "source", kind: .text).text
            }
            let text = try #require(source)
            #expect(text.contains("docket_event_log"))
            #expect(!text.contains("pg_notify"))
        }
    }

    @Test("a number A drew whose write it cannot say committed (a COMMIT not answered) is handed back and wakes A's catch-up, which publishes it", .timeLimit(.minutes(2)))
    func handedBackWakes() async throws {
        try await Self.withTwoInstances(followingA: false) { a, b in
            // A's follower as SharedChangesService runs it, with the notifications it drops recorded.
            let shared = a.shared
            let dropped = Mutex<[Int]>([])
            let signals = try #require(a.storage.logSignals(ignoring: { sequence in
                let accounted = shared.accountedFor(sequence)
                if accounted { dropped.withLock { $0.append(sequence) } }
                return accounted
            }) as AsyncStream<Void>?)
            let listening = Box<Bool>()
            let followers = [
                Task {
                    for await _ in signals {
                        listening.set(true)
                        try? await a.catchUp()
                    }
                },
                Task { for await _ in shared.handedBack { try? await a.catchUp() } },
            ]
            defer { for follower in followers { follower.cancel() } }
            let published = Published()
            a.broadcaster.add(observer: published)
            // The first wake-up follows the listener's connection: from then on B's notifications reach A (one sent
            // before would be lost, and this test would wait for it for ever).
            _ = try await listening.wait()
            // The commit stands in for one of A's whose COMMIT was sent and never answered: A drew the number
            // (here before B's insert takes it), so the notification of its commit is dropped on A as A's own.
            try await a.catchUp()
            let sequence = try await a.newestSequence() + 1
            shared.drew(sequence)
            _ = try await b.insert(into: "incident", values: ["short_description": "in doubt"], caller: Callers.admin)
            #expect(try await b.newestSequence() == sequence)
            while !dropped.withLock({ $0.contains(sequence) }) { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(!published.all.contains { $0.sequence == sequence })
            // The write fails without knowing whether it committed: the number goes back to the log, and the
            // catch-up it wakes finds the commit there.
            a.abandoned([sequence])
            while !published.all.contains(where: { $0.sequence == sequence }) { try await Task.sleep(for: .milliseconds(5)) }
            #expect(published.all.first { $0.sequence == sequence }?.values["short_description"] == "in doubt")
        }
    }

    /// A value one task sets and another waits for.
    final class Box<Value: Sendable>: Sendable {
        private let value = Mutex<Value?>(nil)
        func set(_ new: Value) { value.withLock { $0 = new } }
        var current: Value? { value.withLock { $0 } }
        func wait() async throws -> Value {
            while true {
                if let value = current { return value }
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    /// Starts a write on `store` that draws an event number and holds it, uncommitted, until `release` is set;
    /// returns once the number is drawn. The task's value: the write's event, to publish (``RecordStore/notify(_:)``).
    static func holdNumber(
        on store: RecordStore
    ) async throws -> (number: Int, release: Box<Bool>, write: Task<[ChangeEvent], any Error>) {
        let incident = try store.table("incident")
        let drawn = Box<Int>()
        let release = Box<Bool>()
        let write = Task {
            try await store.writeEvents(scope: .rows) { db in
                let event = try await store.appendEvent(
                    table: incident, sysID: SysID.generate(), operation: .insert, fields: [], values: [:], previous: [:],
                    caller: Callers.admin, now: GlideDateTime.format(Date()), db: db
                )
                drawn.set(event.sequence)
                _ = try await release.wait()
                return [event]
            }
        }
        return (try await drawn.wait(), release, write)
    }

    @Test(
        "a catch-up passes over this instance's own writes in flight, never over another instance's commits",
        .timeLimit(.minutes(2))
    )
    func ownWritesInFlight() async throws {
        try await Self.withTwoInstances { a, b in
            let published = Published()
            a.broadcaster.add(observer: published)
            // A write of A holds its event's number, uncommitted, until released.
            let (own, release, inFlight) = try await Self.holdNumber(on: a)
            // Only A's own number is after what A published: nothing to read.
            #expect(!a.shared.behind(own))
            let id = try await b.insert(into: "incident", values: ["short_description": "from B"], caller: Callers.admin)
            let other = try await b.newestSequence()
            #expect(other > own)
            // What each request on A does first: B's commit is published there, A's own write still in flight.
            try await a.catchUp()
            #expect(published.all.contains { $0.sysID == id && $0.sequence == other })
            release.set(true)
            for event in try await inFlight.value { a.notify(event) }
            try await a.catchUp()
            #expect(try #require(a.shared.publishedUpTo) >= other)
            #expect(!a.shared.behind(other))
        }
    }

    @Test(
        "catch-ups that find another instance's number in flight share reads of the log, and publish its commits made before and after them",
        .timeLimit(.minutes(2))
    )
    func catchUpsShareReads() async throws {
        try await Self.withTwoInstances { a, b in
            let published = Published()
            a.broadcaster.add(observer: published)
            // A write of B holds its event's number, uncommitted, until released: A finds the log ahead of what it
            // published at every catch-up meanwhile.
            let (held, release, inFlight) = try await Self.holdNumber(on: b)
            let first = try await b.insert(into: "incident", values: ["short_description": "first from B"], caller: Callers.admin)
            let reads = a.shared.logReads.load(ordering: .relaxed)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<16 { group.addTask { try await a.catchUp() } }
                try await group.waitForAll()
            }
            #expect(published.all.contains { $0.sysID == first })
            // Sixteen callers share a few reads (one running, one queued behind it, more if they come spread out,
            // and whatever B's notification adds): before reads were shared, each caller read the log itself, B's
            // number in flight keeping it ahead.
            #expect(a.shared.logReads.load(ordering: .relaxed) - reads < 8)
            #expect(a.shared.behind(held))
            // A commit made after the reads above is seen by the next catch-up: its read started after it asked.
            let second = try await b.insert(into: "incident", values: ["short_description": "second from B"], caller: Callers.admin)
            try await a.catchUp()
            #expect(published.all.contains { $0.sysID == second })
            release.set(true)
            for event in try await inFlight.value { b.notify(event) }
            let newest = try await b.newestSequence()
            try await a.catchUp()
            #expect(try #require(a.shared.publishedUpTo) >= newest)
            #expect(published.all.contains { $0.sequence == held })
        }
    }

    @Test("the number of a write that failed on this instance is read from the log again", .timeLimit(.minutes(2)))
    func ownWriteFailed() async throws {
        try await Self.withTwoInstances { a, _ in
            let incident = try a.table("incident")
            let drawn = Box<Int>()
            struct Refused: Error {}
            await #expect(throws: Refused.self) {
                try await a.writeEvents(scope: .rows) { db in
                    let event = try await a.appendEvent(
                        table: incident, sysID: SysID.generate(), operation: .insert, fields: [], values: [:], previous: [:],
                        caller: Callers.admin, now: GlideDateTime.format(Date()), db: db
                    )
                    drawn.set(event.sequence)
                    throw Refused()
                }
            }
            let number = try #require(drawn.current)
            #expect(a.shared.behind(number))
            // Rolled back: the next write passes the gap once the log says it can no longer commit.
            let id = try await a.insert(into: "incident", values: ["short_description": "after"], caller: Callers.admin)
            try await a.catchUp()
            #expect(try #require(a.shared.publishedUpTo) > number)
            #expect(try await a.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "after")
        }
    }

    @Test("an insert's answer taken from the insert itself is the row as committed; one through a reference is read after it")
    func answerFromInsert() async throws {
        try await Self.withTwoInstances { a, _ in
            let incident = try a.table("incident")
            let plan = try CommittedRow.Plan(table: incident, fields: nil, store: a, caller: Callers.admin)
            #expect(plan.returning != nil)
            let committed = CommittedRow()
            let id = try await a.insert(
                into: "incident", values: ["short_description": "answered", "impact": "1", "urgency": "1"],
                caller: Callers.admin, answer: CommittedRow.Answer(row: committed, plan: plan)
            )
            let answered = try #require(committed.value)
            #expect(committed.tookWrittenRow)
            let read = try await a.get(id, in: "incident", caller: Callers.admin)
            #expect(answered.record.sysID == id)
            #expect(answered.record.table == "incident")
            #expect(answered.record.values == read.record.values)
            #expect(answered.record.values["number"]?.hasPrefix("INC") == true)
            #expect(answered.record.values["priority"] == read.record.values["priority"])
            #expect(committed.version == "0")
            #expect(answered.columns.map(\.name) == incident.fields.map(\.name))
            // Fields through a reference (a join): the row is read after the write, in its transaction.
            let walked = try CommittedRow.Plan(table: incident, fields: ["number", "caller_id.user_name"], store: a, caller: Callers.admin)
            #expect(walked.returning == nil)
            // A caller whose read access has conditions (a self-service user) has the row read after the write too.
            #expect(try CommittedRow.Plan(table: incident, fields: nil, store: a, caller: Callers.abel).returning == nil)
            let walkedRow = CommittedRow()
            let walkedID = try await a.insert(
                into: "incident", values: ["short_description": "walked", "caller_id": DemoData.userID("abel.tuter")],
                caller: Callers.admin, answer: CommittedRow.Answer(row: walkedRow, plan: walked)
            )
            #expect(walkedRow.value?.record.sysID == walkedID)
            #expect(!walkedRow.tookWrittenRow)
            #expect(walkedRow.value?.record.values["caller_id.user_name"] == "abel.tuter")
            #expect(walkedRow.version == "0")
        }
    }

    @Test("a create that its insert does whole runs that one statement alone, seen at once by the other instance; one with more to do runs in a transaction")
    func loneInsert() async throws {
        try await Self.withTwoInstances { a, b in
            let incident = try a.table("incident")
            let seen = Mutex<[String]>([])
            a.storage.faults.observe { text in seen.withLock { $0.append(text) } }
            // The statements of one write: not the reads of the log (its head, its events, its pruned mark) that
            // catching up on A may run meanwhile.
            func statements(_ write: () async throws -> String) async throws -> (id: String, statements: [String]) {
                seen.withLock { $0 = [] }
                let id = try await write()
                return (id, seen.withLock { $0 }.filter {
                    $0 != StorageDialect.newestEventSequenceSQL && !$0.contains("docket_event_log") && !$0.contains("docket_meta")
                })
            }
            // The first write of a process does once what later ones need (the table's number sequence).
            _ = try await a.insert(into: "incident", values: ["short_description": "first"], caller: Callers.admin)
            let plan = try CommittedRow.Plan(table: incident, fields: nil, store: a, caller: Callers.admin)
            let committed = CommittedRow()
            let lone = try await statements {
                try await a.insert(
                    into: "incident", values: ["short_description": "alone"], caller: Callers.admin,
                    answer: CommittedRow.Answer(row: committed, plan: plan)
                )
            }
            #expect(lone.statements.count == 1, "\(lone.statements)")
            #expect(lone.statements.first?.hasPrefix("WITH docket_inserted") == true)
            #expect(committed.value?.record.values["short_description"] == "alone")
            try await b.catchUp()
            #expect(try await b.get(lone.id, in: "incident", caller: Callers.admin).record["short_description"] == "alone")
            // A comment joins the insert's statement (its journal entry inserted from the inserted row).
            let journal = try await statements {
                try await a.insert(
                    into: "incident", values: ["short_description": "noted", "comments": "first note"], caller: Callers.admin
                )
            }
            #expect(journal.statements.count == 1, "\(journal.statements)")
            #expect(journal.statements.first?.contains("docket_inserted_also0 AS (INSERT INTO sys_journal_field") == true)
            let entries: SQLFragment = "SELECT COUNT(*) FROM sys_journal_field WHERE element_id = " + .bind(journal.id)
                + " AND element = 'comments' AND value = 'first note'"
            #expect(try await a.storage.read { db in try await db.integer(entries) } == 1)
            // A caller whose create rule has no condition (itil on tasks) creates in one statement too.
            let john = try await statements {
                try await a.insert(into: "incident", values: ["short_description": "john's"], caller: Callers.john)
            }
            #expect(john.statements.count == 1, "\(john.statements)")
            #expect(try await a.get(john.id, in: "incident", caller: Callers.john).record["short_description"] == "john's")
            // A rule with a condition (a user's own preferences) is judged on the inserted row, in the transaction;
            // a refusal rolls the insert back.
            let own = try await statements {
                try await a.insert(into: "sys_user_preference", values: ["name": "docket.test", "value": "1"], caller: Callers.john)
            }
            #expect(own.statements.first == "BEGIN ISOLATION LEVEL READ COMMITTED", "\(own.statements)")
            #expect(own.statements.contains { $0.hasPrefix("SELECT COUNT(*)") })
            #expect(own.statements.last == "COMMIT")
            let preferences: SQLFragment = "SELECT COUNT(*) FROM sys_user_preference WHERE name = 'docket.test'"
            let refused = try await statements {
                await #expect(throws: EngineError.self) {
                    try await a.insert(
                        into: "sys_user_preference",
                        values: ["name": "docket.test", "value": "2", "user": DemoData.userID("beth.anglin")], caller: Callers.john
                    )
                }
                return ""
            }
            #expect(refused.statements.last == "ROLLBACK", "\(refused.statements)")
            #expect(try await a.storage.read { db in try await db.integer(preferences) } == 1)
            // The lone statement fails (here before it reaches the server): nothing is committed, no ROLLBACK is
            // needed, and the next write goes on.
            a.storage.faults.failNext { $0.hasPrefix("WITH docket_inserted") }
            let count: SQLFragment = "SELECT COUNT(*) FROM " + .identifier(incident.physicalTable)
            let before = try await a.storage.read { db in try await db.integer(count) }
            await #expect(throws: StorageUnavailable.self) {
                try await a.insert(into: "incident", values: ["short_description": "lost"], caller: Callers.admin)
            }
            #expect(try await a.storage.read { db in try await db.integer(count) } == before)
            let next = try await a.insert(into: "incident", values: ["short_description": "next"], caller: Callers.admin)
            try await b.catchUp()
            #expect(try await b.get(next, in: "incident", caller: Callers.admin).record["short_description"] == "next")
        }
    }

    @Test(
        "a create whose lone insert committed and whose answer was lost (or could not be decoded) is reported done; its event is published once, from the log",
        .timeLimit(.minutes(2)), arguments: [false, true]
    )
    func lostAnswer(undecodable: Bool) async throws {
        try await Self.withTwoInstances { a, b in
            let published = Published()
            a.broadcaster.add(observer: published)
            // The first write of a process does once what later ones need (the table's number sequence).
            _ = try await a.insert(into: "incident", values: ["short_description": "first"], caller: Callers.admin)
            let incident = try a.table("incident")
            let plan = try CommittedRow.Plan(table: incident, fields: nil, store: a, caller: Callers.admin)
            let committed = CommittedRow()
            // The insert runs on its own (it commits), and none of its rows come back: no number, no row, no event.
            // Or its rows come back and a value of them cannot be decoded (``UndecodableAnswer``).
            if undecodable {
                a.storage.faults.spoilAnswerOfNext { $0.hasPrefix("WITH docket_inserted") }
            } else {
                a.storage.faults.loseAnswerOfNext { $0.hasPrefix("WITH docket_inserted") }
            }
            let lost = try await a.insert(
                into: "incident", values: ["short_description": "answer lost", "comments": "lost with it"], caller: Callers.admin,
                answer: CommittedRow.Answer(row: committed, plan: plan)
            )
            // Done, with no row to answer from: the caller reads it afresh (the Table API does).
            #expect(committed.value == nil)
            let row = try await a.get(lost, in: "incident", caller: Callers.admin).record
            #expect(row["short_description"] == "answer lost")
            #expect(row["number"].hasPrefix("INC"))
            // Its comment, written by the same statement, once.
            let entries: SQLFragment = "SELECT COUNT(*) FROM sys_journal_field WHERE element_id = " + .bind(lost)
            #expect(try await a.storage.read { db in try await db.integer(entries) } == 1)
            try await b.catchUp()
            #expect(try await b.get(lost, in: "incident", caller: Callers.admin).record["number"] == row["number"])
            // Its event reaches A's followers once, from the log, before a later write's.
            let next = try await a.insert(into: "incident", values: ["short_description": "next"], caller: Callers.admin)
            while !published.all.contains(where: { $0.sysID == next }) { try await Task.sleep(for: .milliseconds(10)) }
            let events = published.all.filter { $0.sysID == lost }
            #expect(events.count == 1)
            #expect(events.first?.operation == .insert)
            #expect(events.first?.values["number"] == row["number"])
            #expect(try #require(events.first).sequence < published.all.first { $0.sysID == next }!.sequence)
            // A failure of the statement itself is still a failure: nothing committed (the test above, loneInsert).
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

    /// A one-shot flag for the tests below.
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    struct Planned: Error {}

    /// What a follower received so far.
    final class Seen: Sendable {
        private let events = Mutex<[ChangeEvent]>([])
        func append(_ event: ChangeEvent) { events.withLock { $0.append(event) } }
        var all: [ChangeEvent] { events.withLock { $0 } }
    }

    @Test(
        "many writers on two instances, a slow transaction and rolled-back ones: followers on both never skip a committed event",
        .timeLimit(.minutes(3))
    )
    func gapFreeUnderConcurrentWriters() async throws {
        try await Self.withTwoInstances { a, b in
            let start = try await b.latestSequence()
            let (writersPerInstance, perWriter) = (6, 12)
            // A follower on each instance, collecting what it receives until it is cancelled. (It cannot stop by
            // itself once it has the last event: by then it may already wait for one that never comes.)
            func follow(_ store: RecordStore) -> (seen: Seen, task: Task<Void, any Error>) {
                let stream = store.subscribe(after: start, batchSize: 5)
                let seen = Seen()
                let task = Task {
                    var iterator = stream.makeAsyncIterator()
                    while let step = try await iterator.nextStep() {
                        if case .event(let event) = step { seen.append(event) }
                    }
                }
                return (seen, task)
            }
            let onA = follow(a)
            let onB = follow(b)
            let ticker = Task {
                while !Task.isCancelled {
                    a.broadcaster.tick()
                    b.broadcaster.tick()
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (store, name) in [(a, "A"), (b, "B")] {
                    for writer in 0..<writersPerInstance {
                        group.addTask {
                            for index in 0..<perWriter {
                                let id = try await store.insert(
                                    into: "incident", values: ["short_description": "\(name)\(writer) \(index)"], caller: Callers.admin
                                )
                                if index % 3 == 0 {
                                    try await store.update(id, in: "incident", values: ["urgency": "1"], caller: Callers.admin)
                                }
                            }
                        }
                    }
                    // A transaction that draws a number and holds it while the others commit past it: followers must
                    // wait for it, never pass it.
                    group.addTask {
                        let incident = try store.table("incident")
                        _ = try await store.storage.write(scope: .rows) { db in
                            let event = try await store.appendEvent(
                                table: incident, sysID: SysID.generate(), operation: .update, fields: ["comments"],
                                values: ["comments": "slow \(name)"], previous: [:], caller: Callers.admin,
                                now: GlideDateTime.format(Date()), db: db
                            )
                            try await Task.sleep(for: .milliseconds(400))
                            return event
                        }
                    }
                    // Transactions that draw numbers and roll back: gaps that followers must pass.
                    group.addTask {
                        let incident = try store.table("incident")
                        for _ in 0..<5 {
                            do {
                                _ = try await store.storage.write(scope: .rows) { db -> Int in
                                    _ = try await store.appendEvent(
                                        table: incident, sysID: SysID.generate(), operation: .update, fields: [], values: [:],
                                        previous: [:], caller: Callers.admin, now: GlideDateTime.format(Date()), db: db
                                    )
                                    try await Task.sleep(for: .milliseconds(30))
                                    throw Planned()
                                }
                            } catch is Planned {}
                        }
                    }
                }
                try await group.waitForAll()
            }
            let logged = try await a.events(after: start, limit: 100_000)
            let newest = try await a.newestSequence()
            #expect(logged.last?.sequence == newest)
            // Until both followers have the last event; the bound is only against a follower that stopped (it takes
            // well under a second), and what they have then is judged below.
            let patience = ContinuousClock.now + .seconds(120)
            while [onA, onB].contains(where: { ($0.seen.all.last?.sequence ?? start) < newest }), ContinuousClock.now < patience {
                try await Task.sleep(for: .milliseconds(20))
            }
            onA.task.cancel()
            onB.task.cancel()
            ticker.cancel()
            let seenOnA = onA.seen.all
            let seenOnB = onB.seen.all
            let expected = logged.map(\.sequence)
            // Every committed event, in order, once: among them 2 × 6 × 12 inserts and the 2 slow events.
            #expect(logged.filter { $0.operation == .insert && $0.table == "incident" }.count == 2 * writersPerInstance * perWriter)
            #expect(logged.filter { $0.values["comments"]?.hasPrefix("slow ") == true }.count == 2)
            #expect(seenOnA.map(\.sequence) == expected)
            #expect(seenOnB.map(\.sequence) == expected)
            // The rolled-back numbers are gaps (a write run again after losing a race may leave one more).
            #expect(newest - start - expected.count >= 10)
        }
    }

    @Test("writes of one record from two instances follow each other: none is lost, each version is taken once")
    func sameRecordIsOrdered() async throws {
        try await Self.withTwoInstances { a, b in
            let id = DemoData.id("incident", 3)
            let before = Int(try await a.get(id, in: "incident", caller: Callers.admin).record["sys_mod_count"]) ?? 0
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, store) in [a, b, a, b, a, b, a, b].enumerated() {
                    group.addTask {
                        for round in 0..<4 {
                            try await store.update(
                                id, in: "incident", values: ["comments": "\(index).\(round)", "urgency": String(1 + (index + round) % 3)],
                                caller: Callers.admin
                            )
                        }
                    }
                }
                try await group.waitForAll()
            }
            let after = try await a.get(id, in: "incident", caller: Callers.admin).record
            #expect(Int(after["sys_mod_count"]) == before + 32)
            // Conditional writes of one version: exactly one of the eight wins.
            let version = Int(after["sys_mod_count"]) ?? 0
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (index, store) in [a, b, a, b, a, b, a, b].enumerated() {
                    group.addTask {
                        do {
                            try await store.update(
                                id, in: "incident", values: ["short_description": "winner \(index)"], caller: Callers.admin,
                                options: .init(expectedModCount: version)
                            )
                            return true
                        } catch let error as EngineError where error.code == .conflict {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
        }
    }

    @Test("a write holding one record waits for nobody else: other records, inserts and the other instance go on")
    func noClusterWideLock() async throws {
        try await Self.withTwoInstances { a, b in
            let held = DemoData.id("incident", 1)
            let other = DemoData.id("incident", 2)
            let holding = Flag()
            let othersDone = Flag()
            // A write of one record that stays open until the other writes have committed (or 20 s have passed).
            let holder = Task {
                try await a.update(held, in: "incident", values: ["short_description": "held"], caller: Callers.admin, within: { _, _ in
                    holding.set()
                    for _ in 0..<2_000 where !othersDone.isSet { try await Task.sleep(for: .milliseconds(10)) }
                })
            }
            while !holding.isSet { try await Task.sleep(for: .milliseconds(5)) }
            try await b.update(other, in: "incident", values: ["short_description": "not held"], caller: Callers.admin)
            _ = try await b.insert(into: "incident", values: ["short_description": "new on B"], caller: Callers.admin)
            _ = try await a.insert(into: "incident", values: ["short_description": "new on A"], caller: Callers.admin)
            try await a.update(other, in: "incident", values: ["short_description": "not held, again"], caller: Callers.admin)
            // All of them committed while the holder still held its record.
            let meanwhile = try await a.get(held, in: "incident", caller: Callers.admin).record["short_description"]
            #expect(meanwhile != "held")
            othersDone.set()
            _ = try await holder.value
            #expect(try await b.get(held, in: "incident", caller: Callers.admin).record["short_description"] == "held")
        }
    }

    @Test("a transaction in flight on another database holds nothing up; one on this database holds the log's order, never the caches")
    func watermarkIsThisDatabase() async throws {
        try await Self.withTwoInstances { a, b in
            // A session of another database of the same server, with a transaction id, left open.
            let elsewhere = try #require(TestDatabase.postgres)
            let connection = try await PostgresConnection.connect(
                configuration: try elsewhere.connectionConfiguration(searchPath: false), id: 90, logger: Logger(label: "elsewhere")
            )
            let runner = PostgresRunner(connection: connection, logger: Logger(label: "elsewhere"))
            try await runner.run("BEGIN")
            _ = try await runner.rows("SELECT pg_current_xact_id()::text AS id")
            let start = try await a.newestSequence()
            let id = try await a.insert(into: "incident", values: ["short_description": "while another database waits"], caller: Callers.admin)
            let newest = try await a.newestSequence()
            #expect(try await a.latestSequence() == newest)
            #expect(try await b.events(after: start).contains { $0.sysID == id })
            try await runner.run("ROLLBACK")
            try await connection.close()

            // A write of this database in flight, older than the next one: followers wait for it; caches and the
            // list pages' mark do not.
            let holding = Flag()
            let release = Flag()
            let before = try await b.changeMark()
            let holder = Task {
                try await a.storage.write(scope: .rows) { db in
                    try await db.run("INSERT INTO docket_meta (key, value) VALUES ('held', 'x')")
                    holding.set()
                    for _ in 0..<2_000 where !release.isSet { try await Task.sleep(for: .milliseconds(10)) }
                    try await db.run("DELETE FROM docket_meta WHERE key = 'held'")
                }
            }
            while !holding.isSet { try await Task.sleep(for: .milliseconds(5)) }
            let settled = try await a.latestSequence()
            let other = DemoData.id("incident", 4)
            try await a.update(other, in: "incident", values: ["short_description": "changed while another writes"], caller: Callers.admin)
            #expect(try await a.latestSequence() == settled)
            #expect(try await b.changeMark() != before)
            #expect(try await b.get(other, in: "incident", caller: Callers.admin).record["short_description"] == "changed while another writes")
            release.set()
            try await holder.value
            #expect(try await a.latestSequence() > settled)
        }
    }
}
