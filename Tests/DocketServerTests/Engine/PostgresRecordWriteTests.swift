import DocketModel
import Foundation
import Synchronization
import Testing

@testable import DocketServer

/// Updates and deletes on PostgreSQL in as few round trips as the writes allow: the record's row locked by the
/// write's own read of it, the update appending its event and giving the answer's row in one statement. Two engines
/// on one database (``SharedDatabaseTests/withTwoInstances(followingA:_:)``), as two docketd.
@Suite("Record updates and deletes on PostgreSQL", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct PostgresRecordWriteTests {
    /// The statements `store` runs for `write`, less the reads of the log that catching up may run meanwhile.
    static func statements(of store: RecordStore, _ write: () async throws -> Void) async throws -> [String] {
        let seen = Mutex<[String]?>([])
        store.storage.faults.observe { text in seen.withLock { $0?.append(text) } }
        try await write()
        let texts = seen.withLock { seen in
            defer { seen = nil }
            return seen ?? []
        }
        return texts.filter {
            $0 != StorageDialect.newestEventSequenceSQL && !$0.contains("docket_event_log") && !$0.contains("docket_meta")
        }
    }

    /// An update as the Table API makes it, its answer the record as `caller` reads it through `table` (every field):
    /// the statements `store` ran for it, and the answer.
    static func answeredUpdate(
        _ store: RecordStore, _ sysID: String, in table: String, values: [String: String], caller: Caller = Callers.admin,
        options: WriteOptions = .init()
    ) async throws -> (statements: [String], answer: CommittedRow) {
        let plan = try CommittedRow.Plan(table: try store.table(table), fields: nil, store: store, caller: caller)
        let answer = CommittedRow()
        let statements = try await statements(of: store) {
            try await store.update(
                sysID, in: table, values: values, caller: caller, options: options, answer: CommittedRow.Answer(row: answer, plan: plan)
            )
        }
        return (statements, answer)
    }

    /// How many journal entries of the record hold `text`.
    static func journalEntries(of sysID: String, text: String, in store: RecordStore) async throws -> Int {
        try await store.storage.read { db in
            try await db.integer(
                "SELECT COUNT(*) FROM sys_journal_field WHERE element_id = " + .bind(sysID) + " AND value = " + .bind(text)
            )
        }
    }

    @Test("an update: its read with the row's version, then one statement that updates that version, adds its journal entries, appends its event and answers")
    func updateInTwoStatements() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = DemoData.id("incident", 4)
            // The first update of a process reads what later ones keep (the business rules).
            try await a.update(DemoData.id("incident", 6), in: "incident", values: ["short_description": "first"], caller: Callers.admin)
            let old = try await a.get(id, in: "incident", caller: Callers.admin).record
            let urgency = old["urgency"] == "1" ? "3" : "1"
            let head = try await a.storage.latestEventSequence()
            let (update, committed) = try await Self.answeredUpdate(
                a, id, in: "incident", values: ["short_description": "patched in one", "urgency": urgency]
            )
            #expect(update.count == 2, "\(update)")
            #expect(update.first?.contains(".xmin::text") == true && update.first?.contains("FOR UPDATE") == false, "\(update)")
            #expect(update.last?.hasPrefix("WITH docket_updated AS (UPDATE") == true && update.last?.contains("AND xmin = ") == true, "\(update)")
            #expect(!update.contains { $0.hasPrefix("SELECT 1 FROM") })
            // The answer is the row as committed, taken from the update.
            let read = try await a.get(id, in: "incident", caller: Callers.admin).record
            #expect(committed.tookWrittenRow)
            #expect(committed.value?.record.values == read.values)
            #expect(committed.value?.record.table == "incident")
            #expect(read["short_description"] == "patched in one")
            #expect(committed.version == String((Int(old["sys_mod_count"]) ?? 0) + 1))
            #expect(read["sys_mod_count"] == committed.version)
            // Its event, as the other instance reads it from the log: what changed, and what it held before.
            try await b.catchUp()
            #expect(try await b.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "patched in one")
            let events = try await b.events(after: head).filter { $0.sysID == id }
            #expect(events.count == 1)
            let event = try #require(events.first)
            #expect(event.operation == .update)
            #expect(event.table == "incident" && event.rootTable == "task")
            #expect(Set(event.fields).isSuperset(of: ["short_description", "urgency"]))
            #expect(event.previous["short_description"] == old["short_description"])
            #expect(event.values["short_description"] == "patched in one")
            #expect(event.values["sys_mod_count"] == committed.version)
            #expect(event.userName == "admin")

            // A comment joins the update's statement: its journal entry is inserted from the updated row.
            let noted = try await Self.statements(of: a) {
                try await a.update(id, in: "incident", values: ["short_description": "noted", "comments": "a note"], caller: Callers.admin)
            }
            #expect(noted.count == 2, "\(noted)")
            #expect(noted.last?.contains("docket_updated_also0 AS (INSERT INTO sys_journal_field") == true, "\(noted)")
            #expect(try await Self.journalEntries(of: id, text: "a note", in: a) == 1)
            let notedEvent = try #require(try await a.events(after: head).last { $0.sysID == id })
            #expect(notedEvent.values["comments"] == "a note")
            #expect(notedEvent.fields.contains("comments"))
            // With an idempotency key, in a transaction whose read locks the row; the entry still in the update's
            // statement.
            var keyed = WriteOptions()
            keyed.idempotency = IdempotencyClaim(userID: Callers.admin.userID, key: "noted-\(id)", fingerprint: "noted")
            let locked = try await Self.statements(of: a) {
                try await a.update(
                    id, in: "incident", values: ["short_description": "keyed", "work_notes": "keyed note"], caller: Callers.admin,
                    options: keyed
                )
            }
            #expect(locked.first == "BEGIN ISOLATION LEVEL READ COMMITTED", "\(locked)")
            #expect(locked.contains { $0.hasSuffix("FOR UPDATE OF ") }, "\(locked)")
            #expect(locked.contains { $0.contains("docket_updated_also0 AS (INSERT INTO sys_journal_field") }, "\(locked)")
            #expect(!locked.contains { $0.hasPrefix("INSERT INTO sys_journal_field") || $0.hasPrefix("SELECT 1 FROM") })
            #expect(locked.last == "COMMIT")
            #expect(try await Self.journalEntries(of: id, text: "keyed note", in: a) == 1)
            // A comment alone still moves the record on (its update time and version): the same two statements.
            let headBefore = try await a.storage.latestEventSequence()
            let alone = try await Self.statements(of: a) {
                try await a.update(id, in: "incident", values: ["comments": "only a note"], caller: Callers.admin)
            }
            #expect(alone.count == 2, "\(alone)")
            #expect(try await Self.journalEntries(of: id, text: "only a note", in: a) == 1)
            let commentEvent = try #require(try await a.events(after: headBefore).first { $0.sysID == id })
            #expect(commentEvent.fields == ["comments"])
            #expect(commentEvent.values["comments"] == "only a note")
        }
    }

    @Test("which updates run without a transaction: a caller whose access has conditions, a change of nothing (answered from the read); which run locked: users, imports keeping system fields, answers the update cannot give")
    func unlockedOrLocked() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, _ in
            let his = try await a.insert(
                into: "incident", values: ["short_description": "Abel's", "caller_id": DemoData.userID("abel.tuter")],
                caller: Callers.admin
            )
            try await a.update(DemoData.id("incident", 6), in: "incident", values: ["short_description": "first"], caller: Callers.admin)
            // Abel's comment on his own incident: the read, his access judged on the row as read, the statement.
            let comment = try await Self.statements(of: a) {
                try await a.update(his, in: "incident", values: ["comments": "from Abel"], caller: Callers.abel)
            }
            #expect(comment.count == 3, "\(comment)")
            #expect(comment.contains { $0.hasPrefix("SELECT COUNT(*)") })
            #expect(!comment.contains("BEGIN ISOLATION LEVEL READ COMMITTED"))
            #expect(try await Self.journalEntries(of: his, text: "from Abel", in: a) == 1)
            // His answer cannot come from the update (his read access has conditions): locked, read back in it.
            let (answered, abelsAnswer) = try await Self.answeredUpdate(
                a, his, in: "incident", values: ["comments": "answered"], caller: Callers.abel
            )
            #expect(answered.first == "BEGIN ISOLATION LEVEL READ COMMITTED", "\(answered)")
            #expect(abelsAnswer.value?.record.sysID == his)
            #expect(abelsAnswer.version == (try await a.get(his, in: "incident", caller: Callers.admin).record["sys_mod_count"]))
            // A change of nothing: the read, answered from it.
            let current = try await a.get(his, in: "incident", caller: Callers.admin).record
            let (unchanged, same) = try await Self.answeredUpdate(a, his, in: "incident", values: ["short_description": "Abel's"])
            #expect(unchanged.count == 2 && unchanged.allSatisfy { $0.hasPrefix("SELECT") }, "\(unchanged)")
            #expect(same.value?.record.values == current.values)
            #expect(same.version == current["sys_mod_count"])
            // A user (an exclusive write) and an import keeping system fields: locked.
            let user = try await Self.statements(of: a) {
                try await a.update(DemoData.userID("abel.tuter"), in: "sys_user", values: ["title": "Tester"], caller: Callers.admin)
            }
            #expect(user.contains("BEGIN ISOLATION LEVEL READ COMMITTED"), "\(user)")
            var keeping = WriteOptions()
            keeping.suppressAutoSysFields = true
            let imported = try await Self.statements(of: a) {
                try await a.update(
                    his, in: "incident", values: ["short_description": "imported", "sys_mod_count": "40"], caller: Callers.admin,
                    options: keeping
                )
            }
            #expect(imported.contains("BEGIN ISOLATION LEVEL READ COMMITTED"), "\(imported)")
            #expect(try await a.get(his, in: "incident", caller: Callers.admin).record["sys_mod_count"] == "40")
        }
    }

    @Test("an update through a table others extend reads the record's class first; its answer, of the other class, is read after the update")
    func updateThroughParent() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, _ in
            try await a.update(DemoData.id("incident", 6), in: "task", values: ["short_description": "first"], caller: Callers.admin)
            let id = DemoData.id("incident", 5)
            let (update, committed) = try await Self.answeredUpdate(
                a, id, in: "task", values: ["short_description": "through task", "urgency": "2"]
            )
            // The class's read, outside the transaction; then BEGIN.
            #expect(update.first?.hasPrefix("SELECT") == true && update.first?.contains("FOR UPDATE") == false, "\(update)")
            #expect(update.dropFirst().first == "BEGIN ISOLATION LEVEL READ COMMITTED")
            #expect(!committed.tookWrittenRow)
            #expect(committed.value?.record.table == "incident")
            #expect(committed.value?.record.values["short_description"] == "through task")
            // An incident field set through task: validated for the record's class.
            try await a.update(id, in: "task", values: ["caller_id": DemoData.userID("abel.tuter")], caller: Callers.admin)
            #expect(try await a.get(id, in: "incident", caller: Callers.admin).record["caller_id"] == DemoData.userID("abel.tuter"))
        }
    }

    @Test("an update of a record that is not there, or that the caller cannot see, is 404 whatever its input; a field the caller may not change is 403")
    func updateNotFoundFirst() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, _ in
            let missing = SysID.generate()
            for values in [["short_description": "x"], ["urgency": "not a choice"], ["caller_id": "no such user"]] {
                await #expect(throws: EngineError.self) {
                    do {
                        try await a.update(missing, in: "incident", values: values, caller: Callers.admin)
                    } catch let error as EngineError {
                        #expect(error.code == .notFound, "\(values): \(error)")
                        throw error
                    }
                }
            }
            // An incident of Beth's: Abel (self-service) does not see it.
            let hidden = try await a.insert(
                into: "incident", values: ["short_description": "Beth's", "caller_id": DemoData.userID("beth.anglin")],
                caller: Callers.admin
            )
            await #expect(throws: EngineError.self) { _ = try await a.get(hidden, in: "incident", caller: Callers.abel) }
            for values in [["short_description": "mine now"], ["urgency": "not a choice"]] {
                do {
                    try await a.update(hidden, in: "incident", values: values, caller: Callers.abel)
                    Issue.record("Abel changed a record he cannot see")
                } catch let error as EngineError {
                    #expect(error.code == .notFound, "\(values): \(error)")
                }
            }
            #expect(try await a.get(hidden, in: "incident", caller: Callers.admin).record["short_description"] == "Beth's")
            // Abel's own incident: he may add a comment, not change its urgency (403).
            let his = try await a.insert(
                into: "incident", values: ["short_description": "Abel's", "caller_id": DemoData.userID("abel.tuter")],
                caller: Callers.admin
            )
            do {
                try await a.update(his, in: "incident", values: ["urgency": "1"], caller: Callers.abel)
                Issue.record("Abel changed a field he may not change")
            } catch let error as EngineError {
                #expect(error.code == .forbidden, "\(error)")
            }
            // A table with a password is read first: a record that is not there is 404 before any password is hashed.
            do {
                try await a.update(missing, in: "sys_user", values: ["user_password": "not hashed"], caller: Callers.admin)
                Issue.record("A missing user was updated")
            } catch let error as EngineError {
                #expect(error.code == .notFound)
            }
            // A record that is there, with input refused: the refusal.
            do {
                try await a.update(hidden, in: "incident", values: ["urgency": "not a choice"], caller: Callers.admin)
                Issue.record("An invalid choice was written")
            } catch let error as EngineError {
                #expect(error.code == .badRequest)
            }
            // Deleting what is not there.
            do {
                try await a.delete(missing, from: "incident", caller: Callers.admin)
                Issue.record("A missing record was deleted")
            } catch let error as EngineError {
                #expect(error.code == .notFound)
            }
        }
    }

    @Test("a delete locks its row as it reads it; the record is gone on both instances and its event carries the row")
    func deleteLocksAsItReads() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = try await a.insert(into: "incident", values: ["short_description": "to go"], caller: Callers.admin)
            // The first delete of a process reads what later ones keep (the business rules).
            let first = try await a.insert(into: "incident", values: ["short_description": "first to go"], caller: Callers.admin)
            try await a.delete(first, from: "incident", caller: Callers.admin)
            let head = try await a.storage.latestEventSequence()
            let statements = try await Self.statements(of: a) { try await a.delete(id, from: "incident", caller: Callers.admin) }
            // The record's class is read first (outside the transaction), then the row is locked as it is read.
            #expect(statements.dropFirst().first == "BEGIN ISOLATION LEVEL READ COMMITTED", "\(statements)")
            #expect(statements.dropFirst(2).first?.hasSuffix("FOR UPDATE OF ") == true, "\(statements)")
            #expect(!statements.contains { $0.hasPrefix("SELECT 1 FROM") })
            #expect(statements.last == "COMMIT")
            try await b.catchUp()
            await #expect(throws: EngineError.self) { _ = try await b.get(id, in: "incident", caller: Callers.admin) }
            let event = try #require(try await b.events(after: head).first { $0.sysID == id })
            #expect(event.operation == .delete)
            #expect(event.previous["short_description"] == "to go")
        }
    }

    @Test("updates and deletes of one record from two instances at once: one delete wins, every other write is done whole or is 404")
    func updatesAndDeletesRace() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = try await a.insert(into: "incident", values: ["short_description": "raced"], caller: Callers.admin)
            let head = try await a.storage.latestEventSequence()
            enum Outcome: Sendable, Equatable { case updated, deleted, notFound }
            let outcomes = try await withThrowingTaskGroup(of: Outcome.self) { group in
                for (index, store) in [a, b, a, b, a, b, a, b, a, b].enumerated() {
                    group.addTask {
                        do {
                            if index % 3 == 2 {
                                try await store.delete(id, from: "incident", caller: Callers.admin)
                                return .deleted
                            }
                            try await store.update(id, in: "incident", values: ["short_description": "write \(index)"], caller: Callers.admin)
                            return .updated
                        } catch let error as EngineError where error.code == .notFound {
                            return .notFound
                        }
                    }
                }
                return try await group.reduce(into: [Outcome]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 == .deleted }.count == 1, "\(outcomes)")
            try await a.catchUp()
            let events = try await a.events(after: head).filter { $0.sysID == id }
            // Every write that answered is in the log once, the delete last.
            #expect(events.filter { $0.operation == .update }.count == outcomes.filter { $0 == .updated }.count)
            #expect(events.filter { $0.operation == .delete }.count == 1)
            #expect(events.last?.operation == .delete)
            // Each update took the version after the one before.
            let versions = events.filter { $0.operation == .update }.compactMap { $0.values["sys_mod_count"].flatMap { Int($0) } }
            #expect(versions == (0..<versions.count).map { $0 + 1 })
        }
    }

    @Test("an update that lost its commit runs again, and answers the row as finally committed, not the one rolled back")
    func retriedUpdateForgetsItsFirstRun() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = try await a.insert(into: "incident", values: ["short_description": "before"], caller: Callers.admin)
            // With an idempotency key the update runs in a transaction. A's first run updates and takes its answer from
            // the update; its COMMIT fails as a serialization failure would; while its ROLLBACK's answer is on its way,
            // Beth writes the same value through B. A's second run then finds nothing to change: its answer is Beth's
            // row as committed.
            a.storage.faults.failNext({ $0 == "COMMIT" }, with: PostgresStatementError(message: "could not serialize", sqlState: "40001"))
            a.storage.faults.holdAnswerOfNext({ $0 == "ROLLBACK" }) {
                do {
                    try await b.update(id, in: "incident", values: ["short_description": "after"], caller: Callers.beth)
                } catch {
                    Issue.record("Beth's write failed: \(error)")
                }
            }
            var options = WriteOptions()
            options.idempotency = IdempotencyClaim(userID: Callers.admin.userID, key: "retried-\(id)", fingerprint: "retried")
            let (_, committed) = try await Self.answeredUpdate(a, id, in: "incident", values: ["short_description": "after"], options: options)
            let read = try await a.get(id, in: "incident", caller: Callers.admin).record
            #expect(read["sys_updated_by"] == "beth.anglin")
            #expect(read["sys_mod_count"] == "1")
            #expect(committed.value?.record.values == read.values)
            #expect(committed.version == "1")
        }
    }

    @Test("an update whose row changes between its read and its statement writes nothing there, and runs again locked: both changes are kept")
    func changedBetweenReadAndWrite() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = try await a.insert(into: "incident", values: ["short_description": "read", "impact": "3"], caller: Callers.admin)
            let head = try await a.storage.latestEventSequence()
            // While A's read of the row (with its version) is on its way back, Beth changes another field through B.
            a.storage.faults.holdAnswerOfNext({ $0.contains(".xmin::text") }) {
                do {
                    try await b.update(id, in: "incident", values: ["impact": "1"], caller: Callers.beth)
                } catch {
                    Issue.record("Beth's write failed: \(error)")
                }
            }
            let (statements, committed) = try await Self.answeredUpdate(
                a, id, in: "incident", values: ["short_description": "written after Beth", "comments": "once"]
            )
            // The version did not match: the statement wrote nothing, and the locked update ran.
            #expect(statements.contains { $0.contains("AND xmin = ") }, "\(statements)")
            #expect(statements.contains("BEGIN ISOLATION LEVEL READ COMMITTED"), "\(statements)")
            let read = try await a.get(id, in: "incident", caller: Callers.admin).record
            #expect(read["impact"] == "1")
            #expect(read["short_description"] == "written after Beth")
            #expect(read["sys_mod_count"] == "2")
            #expect(committed.value?.record.values == read.values)
            #expect(committed.version == "2")
            // Two events, A's from the row as Beth left it.
            let events = try await a.events(after: head).filter { $0.sysID == id }
            #expect(events.map(\.userName) == ["beth.anglin", "admin"])
            #expect(events.last?.previous["short_description"] == "read")
            #expect(events.last?.values["impact"] == "1")
            #expect(events.last?.values["sys_mod_count"] == "2")
            // Its comment written once: not by the statement that matched nothing, by the locked update.
            #expect(try await Self.journalEntries(of: id, text: "once", in: a) == 1)

            // A row deleted meanwhile: 404, and nothing written.
            let gone = try await a.insert(into: "incident", values: ["short_description": "going"], caller: Callers.admin)
            a.storage.faults.holdAnswerOfNext({ $0.contains(".xmin::text") }) {
                do {
                    try await b.delete(gone, from: "incident", caller: Callers.admin)
                } catch {
                    Issue.record("The delete failed: \(error)")
                }
            }
            do {
                try await a.update(gone, in: "incident", values: ["short_description": "too late", "comments": "never"], caller: Callers.admin)
                Issue.record("A deleted record was updated")
            } catch let error as EngineError {
                #expect(error.code == .notFound)
            }
            #expect(try await a.events(after: head).filter { $0.sysID == gone && $0.operation == .update }.isEmpty)
            #expect(try await Self.journalEntries(of: gone, text: "never", in: a) == 0)
        }
    }

    @Test("an update whose lone statement committed and whose answer could not be read is reported done; its event is published once, from the log")
    func unlockedUpdateWithoutAnswer() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let incident = try a.table("incident")
            let id = try await a.insert(into: "incident", values: ["short_description": "before"], caller: Callers.admin)
            try await b.catchUp()
            let head = try await a.storage.latestEventSequence()
            let plan = try CommittedRow.Plan(table: incident, fields: nil, store: a, caller: Callers.admin)
            let committed = CommittedRow()
            let published = SharedDatabaseTests.Published()
            a.broadcaster.add(observer: published)
            a.storage.faults.spoilAnswerOfNext { $0.hasPrefix("WITH docket_updated") }
            let answered = try await a.update(
                id, in: "incident", values: ["short_description": "committed, unanswered"], caller: Callers.admin,
                answer: CommittedRow.Answer(row: committed, plan: plan)
            )
            #expect(answered == id)
            // The answer's row is read afresh by the caller.
            #expect(committed.value == nil)
            #expect(try await a.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "committed, unanswered")
            try await b.catchUp()
            #expect(try await b.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "committed, unanswered")
            #expect(try await a.events(after: head).filter { $0.sysID == id }.count == 1)
            // Published on A once, from the log (by the catch-up), not by the write, which could not say its number.
            try await a.catchUp()
            #expect(published.all.filter { $0.sysID == id && $0.sequence > head }.count == 1)
        }
    }

    @Test("a lone update refused as a serialization failure (a server whose default isolation is stricter) runs again locked; one whose answer was lost is 503, written once")
    func loneUpdateFailures() async throws {
        try await SharedDatabaseTests.withTwoInstances { a, b in
            let id = try await a.insert(into: "incident", values: ["short_description": "before"], caller: Callers.admin)
            let head = try await a.storage.latestEventSequence()
            a.storage.faults.failNext(
                { $0.hasPrefix("WITH docket_updated") && $0.contains("AND xmin = ") },
                with: PostgresStatementError(message: "could not serialize access due to concurrent update", sqlState: "40001")
            )
            let statements = try await Self.statements(of: a) {
                try await a.update(id, in: "incident", values: ["short_description": "serialized", "comments": "serialized"], caller: Callers.admin)
            }
            #expect(statements.contains("BEGIN ISOLATION LEVEL READ COMMITTED"), "\(statements)")
            #expect(try await a.get(id, in: "incident", caller: Callers.admin).record["sys_mod_count"] == "1")
            #expect(try await Self.journalEntries(of: id, text: "serialized", in: a) == 1)
            // Its answer lost: whether it wrote is not known here, so 503; it did write, once, and every instance
            // publishes it from the log.
            let published = SharedDatabaseTests.Published()
            a.broadcaster.add(observer: published)
            a.storage.faults.loseAnswerOfNext { $0.hasPrefix("WITH docket_updated") }
            await #expect(throws: StorageUnavailable.self) {
                try await a.update(id, in: "incident", values: ["short_description": "lost", "comments": "lost"], caller: Callers.admin)
            }
            #expect(try await Self.journalEntries(of: id, text: "lost", in: a) == 1)
            // A request catches up before it is answered: A's caches then hold the commit too.
            try await a.catchUp()
            try await b.catchUp()
            #expect(try await a.get(id, in: "incident", caller: Callers.admin).record["sys_mod_count"] == "2")
            #expect(try await b.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "lost")
            #expect(try await a.events(after: head).filter { $0.sysID == id }.count == 2)
            #expect(published.all.filter { $0.sysID == id && $0.values["short_description"] == "lost" }.count == 1)
        }
    }
}

