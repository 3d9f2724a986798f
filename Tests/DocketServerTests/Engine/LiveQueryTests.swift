import DocketModel
import Foundation
import NIOCore
import Testing

@testable import DocketServer

/// What the event log records of each change, and how one follower sees it: filtered by its read access and
/// told whether a record entered, changed in, left or was deleted from its query's result.
@Suite("Live queries")
struct LiveQueryTests {
    /// Collects changes from a live query until `count` arrived.
    static func collect(
        _ store: RecordStore, _ live: LiveQuery, after sequence: Int, count: Int
    ) -> Task<[RecordChange], any Error> {
        let stream = store.subscribe(live, after: sequence)
        return Task {
            var changes: [RecordChange] = []
            for try await change in stream {
                changes.append(change)
                if changes.count == count { break }
            }
            return changes
        }
    }

    @Test("events carry the row after, the previous values of what changed, and the whole row of a delete")
    func eventValues() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let id = try await store.insert(
                into: "incident", values: ["short_description": "values", "urgency": "2", "comments": "first"],
                caller: Callers.admin
            )
            try await store.update(id, in: "incident", values: ["short_description": "values, changed"], caller: Callers.admin)
            try await store.delete(id, from: "incident", caller: Callers.admin)
            let events = try await store.events(after: start)
            #expect(events.map(\.operation) == [.insert, .update, .delete])
            let (insert, update, delete) = (events[0], events[1], events[2])
            #expect(insert.table == "incident" && insert.rootTable == "task")
            #expect(insert.values["short_description"] == "values")
            #expect(insert.values["urgency"] == "2")
            #expect(insert.values["comments"] == "first")
            #expect(insert.values["number"]?.hasPrefix("INC") == true)
            #expect(insert.previous.isEmpty && insert.rowBefore.isEmpty)
            #expect(!insert.time.isEmpty && insert.userName == "admin")
            #expect(update.fields.contains("short_description"))
            #expect(update.values["short_description"] == "values, changed")
            #expect(update.previous["short_description"] == "values")
            #expect(update.values["sys_mod_count"] == "1")
            #expect(update.rowBefore["short_description"] == "values")
            #expect(update.rowBefore["number"] == insert.values["number"])
            #expect(delete.values.isEmpty && delete.rowAfter.isEmpty)
            #expect(delete.previous["short_description"] == "values, changed")
            #expect(delete.previous["number"] == insert.values["number"])
            // What was committed is what was broadcast.
            #expect(events.map(\.sysID) == [id, id, id])
        }
    }

    @Test("passwords never enter the event log, not even hashed")
    func passwordsStayOut() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let id = try await store.insert(
                into: "sys_user", values: ["user_name": "event.pw", "user_password": "s3cret-Passw0rd"], caller: Callers.admin
            )
            try await store.update(id, in: "sys_user", values: ["user_password": "0ther-Passw0rd"], caller: Callers.admin)
            try await store.delete(id, from: "sys_user", caller: Callers.admin)
            let events = try await store.events(after: start)
            #expect(events.count == 3)
            #expect(events[1].fields.contains("user_password"))
            for event in events {
                #expect(event.values["user_password"] == nil && event.previous["user_password"] == nil)
            }
            let raw = try await store.storage.read { db in
                try await db.rows("SELECT values_after, values_before FROM docket_event_log WHERE seq > " + .bind(start))
                    .map { (try $0.value(at: "values_after", kind: .text).text ?? "") + (try $0.value(at: "values_before", kind: .text).text ?? "") }
                    .joined()
            }
            #expect(!raw.contains("$2"), "a bcrypt hash reached the event log")
            #expect(raw.contains("event.pw"))
        }
    }

    @Test("a user without roles follows only incidents they may read: entered, changed, left, entered, deleted", .timeLimit(.minutes(3)))
    func accessFiltered() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let table = try store.table("incident")
            let changes = Self.collect(store, LiveQuery(table: table, caller: Callers.abel), after: start, count: 5)
            let mine = try await store.insert(
                into: "incident", values: ["short_description": "abel's", "caller_id": Callers.abel.userID], caller: Callers.admin
            )
            // Someone else's incident: abel never hears of it.
            let other = try await store.insert(
                into: "incident", values: ["short_description": "not abel's", "caller_id": Callers.john.userID],
                caller: Callers.admin
            )
            try await store.update(other, in: "incident", values: ["urgency": "1"], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["urgency": "1"], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["caller_id": Callers.john.userID], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["urgency": "3"], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["caller_id": Callers.abel.userID], caller: Callers.admin)
            try await store.delete(other, from: "incident", caller: Callers.admin)
            try await store.delete(mine, from: "incident", caller: Callers.admin)
            let seen = try await changes.value
            #expect(seen.map(\.kind) == [.entered, .changed, .left, .entered, .deleted])
            #expect(seen.allSatisfy { $0.event.sysID == mine })
            #expect(seen[1].previous.keys.contains("urgency"))
            #expect(seen[1].record["urgency"] == "1")
            // The row abel saw leave is the one before the reassignment, which he could read.
            #expect(seen[2].record["caller_id"] == Callers.abel.userID)
            #expect(seen[2].previous.isEmpty)
            #expect(seen[4].record["short_description"] == "abel's")
        }
    }

    @Test("a query subscription tells that a task reassigned away from me left my list", .timeLimit(.minutes(3)))
    func queryEnteredAndLeft() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let live = LiveQuery(
                table: try store.table("task"),
                query: try EncodedQuery("assigned_to=javascript:gs.getUserID()^active=true"), caller: Callers.john
            )
            let changes = Self.collect(store, live, after: start, count: 5)
            let id = try await store.insert(
                into: "incident", values: ["short_description": "for john", "assigned_to": Callers.john.userID],
                caller: Callers.admin
            )
            try await store.update(id, in: "incident", values: ["short_description": "for john, edited"], caller: Callers.beth)
            try await store.update(id, in: "incident", values: ["assigned_to": Callers.beth.userID], caller: Callers.beth)
            // Beth's own work: not in john's list.
            try await store.update(id, in: "incident", values: ["urgency": "1"], caller: Callers.beth)
            try await store.update(id, in: "incident", values: ["assigned_to": Callers.john.userID], caller: Callers.beth)
            try await store.update(id, in: "incident", values: ["active": "false"], caller: Callers.john)
            let seen = try await changes.value
            #expect(seen.map(\.kind) == [.entered, .changed, .left, .entered, .left])
            #expect(seen.allSatisfy { $0.event.table == "incident" })
            #expect(seen[2].event.userName == "beth.anglin")
        }
    }

    @Test("a query subscription sees a record leave when it stops matching", .timeLimit(.minutes(3)))
    func leavesWhenNoLongerMatching() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let live = LiveQuery(table: try store.table("incident"), query: try EncodedQuery("active=true"), caller: Callers.john)
            let changes = Self.collect(store, live, after: start, count: 2)
            let id = try await store.insert(into: "incident", values: ["short_description": "closing"], caller: Callers.john)
            try await store.update(id, in: "incident", values: ["active": "false"], caller: Callers.john)
            let seen = try await changes.value
            #expect(seen.map(\.kind) == [.entered, .left])
            #expect(seen[1].record["active"] == "true")
        }
    }

    @Test("without a table, a follower sees every table it may read; replays give the same answers as live")
    func everyTable() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let id = try await store.insert(
                into: "incident", values: ["short_description": "any table", "caller_id": Callers.abel.userID],
                caller: Callers.admin
            )
            let group = try await store.insert(into: "sys_user_group", values: ["name": "Live group"], caller: Callers.admin)
            try await store.delete(id, from: "incident", caller: Callers.admin)
            // Replayed from storage, after the fact.
            var seen: [RecordChange] = []
            for try await change in store.subscribe(LiveQuery(caller: Callers.abel), after: start) {
                seen.append(change)
                if seen.count == 3 { break }
            }
            #expect(seen.map(\.kind) == [.entered, .entered, .deleted])
            #expect(seen.map(\.event.sysID) == [id, group, id])
        }
    }

    @Test("a replay judges the events it reads together, and each verdict is the one judging it alone gives", .timeLimit(.minutes(3)))
    func batchJudgement() async throws {
        try await TestApp.withStore { store in
            let start = try await store.latestSequence()
            let mine = try await store.insert(
                into: "incident", values: ["short_description": "abel's", "caller_id": Callers.abel.userID], caller: Callers.admin
            )
            let johns = try await store.insert(
                into: "incident", values: ["short_description": "john's", "assigned_to": Callers.john.userID], caller: Callers.admin
            )
            _ = try await store.insert(into: "problem", values: ["short_description": "a problem"], caller: Callers.admin)
            _ = try await store.insert(into: "sys_user_group", values: ["name": "Batch group"], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["urgency": "1"], caller: Callers.admin)
            try await store.update(mine, in: "incident", values: ["caller_id": Callers.john.userID], caller: Callers.admin)
            try await store.update(johns, in: "incident", values: ["assigned_to": Callers.beth.userID], caller: Callers.admin)
            try await store.update(johns, in: "incident", values: ["active": "false", "assigned_to": Callers.john.userID], caller: Callers.admin)
            try await store.delete(mine, from: "incident", caller: Callers.admin)
            let events = try await store.events(after: start)
            #expect(events.count == 9)
            let lives = [
                LiveQuery(caller: Callers.abel),
                LiveQuery(table: try store.table("incident"), caller: Callers.abel),
                LiveQuery(table: try store.table("task"), query: try EncodedQuery("assigned_to=javascript:gs.getUserID()^active=true"), caller: Callers.john),
                LiveQuery(table: try store.table("incident"), query: try EncodedQuery("active=true"), caller: Callers.john),
                LiveQuery(caller: Callers.admin),
            ]
            for live in lives {
                let together = try await store.judge(events, for: live)
                var seen = 0
                for event in events {
                    let alone = try await store.change(event, for: live)
                    let judged = together[event.sequence]
                    if alone != nil { #expect(judged != nil, "\(live.queryText) \(event.sequence)") }
                    #expect(try await store.change(event, for: live, judged: judged) == alone, "\(live.queryText) \(event.sequence)")
                    if alone != nil { seen += 1 }
                }
                #expect(seen > 0)
            }
            // What a replay through the iterator sees is what live following saw.
            var replayed: [RecordChange] = []
            for try await change in store.subscribe(LiveQuery(table: try store.table("incident"), caller: Callers.abel), after: start) {
                replayed.append(change)
                if replayed.count == 3 { break }
            }
            #expect(replayed.map(\.kind) == [.entered, .changed, .left])
        }
    }

    @Test("a follower further behind than the replay limit is told to resync at once; within it, it replays", .timeLimit(.minutes(3)))
    func replayLimit() async throws {
        try await TestApp.withStore { store in
            let limited = RecordStore(
                storage: store.storage, catalog: store.catalog, logger: store.logger, replayLimit: 3, hashPassword: { _ in "" }
            )
            let start = try await store.latestSequence()
            for index in 0..<5 {
                _ = try await store.insert(into: "incident", values: ["short_description": "replay \(index)"], caller: Callers.admin)
            }
            let latest = try await store.latestSequence()
            await #expect(throws: EventLogError.resyncNeeded(oldestAvailable: latest)) {
                for try await _ in limited.subscribe(LiveQuery(caller: Callers.admin), after: start) {}
            }
            var seen: [RecordChange] = []
            for try await change in limited.subscribe(LiveQuery(caller: Callers.admin), after: latest - 3) {
                seen.append(change)
                if seen.count == 3 { break }
            }
            #expect(seen.map(\.event.sequence) == Array(latest - 2...latest))
        }
    }

    @Test("deleting a record logs the deletion of each attachment that goes with it, and the cache forgets them")
    func cascadedAttachments() async throws {
        try await TestApp.withStore { store in
            let id = try await store.insert(into: "incident", values: ["short_description": "with files"], caller: Callers.admin)
            var files: [String] = []
            for name in ["a.txt", "b.txt"] {
                files.append(try await store.addAttachment(
                    .init(tableName: "incident", recordID: id, fileName: name, contentType: "text/plain", content: ByteBuffer(string: "x")),
                    caller: Callers.admin
                ))
            }
            // Cached by a read, so that the test sees the cache forget them.
            for file in files { _ = try await store.get(file, in: "sys_attachment", caller: Callers.admin) }
            let start = try await store.latestSequence()
            try await store.delete(id, from: "incident", caller: Callers.admin)
            let events = try await store.events(after: start)
            #expect(events.map(\.operation) == [.delete, .delete, .delete])
            #expect(Set(events.prefix(2).map(\.sysID)) == Set(files))
            #expect(events.prefix(2).allSatisfy { $0.table == "sys_attachment" && $0.previous["table_sys_id"] == id })
            #expect(events.last?.sysID == id)
            for file in files {
                await #expect(throws: EngineError.self) { try await store.get(file, in: "sys_attachment", caller: Callers.admin) }
            }
        }
    }
}
