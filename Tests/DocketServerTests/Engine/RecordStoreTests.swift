import DocketModel
import Foundation
import Testing

@testable import DocketServer

@Suite("Record store")
struct RecordStoreTests {
    @Test("an insert fills sys fields, defaults, number and priority, and logs one event")
    func insert() async throws {
        try await TestApp.withStore { store in
            let before = try await store.events(after: 0, limit: 100_000).last?.sequence ?? 0
            let id = try await store.insert(
                into: "incident", values: ["short_description": "Disk full", "impact": "1", "urgency": "2"],
                caller: Callers.john
            )
            let (_, record) = try await store.get(id, in: "incident", caller: Callers.john)
            #expect(record["number"] == "INC0010023")
            #expect(record["state"] == "1")
            #expect(record["active"] == "true")
            #expect(record["priority"] == "2")
            #expect(record["sys_mod_count"] == "0")
            #expect(record["sys_created_by"] == "john.doe")
            #expect(record["sys_class_name"] == "incident")
            #expect(record["opened_by"] == Callers.john.userID)
            #expect(GlideDateTime.parse(record["opened_at"]) != nil)
            let events = try await store.events(after: before)
            #expect(events.count == 1)
            #expect(events.first?.operation == .insert)
            #expect(events.first?.sysID == id)
            #expect(events.first?.userName == "john.doe")
        }
    }

    @Test("numbers are per table and keep counting")
    func numbering() async throws {
        try await TestApp.withStore { store in
            let first = try await store.insert(into: "problem", values: ["short_description": "a"], caller: Callers.john)
            let second = try await store.insert(into: "problem", values: ["short_description": "b"], caller: Callers.john)
            let change = try await store.insert(into: "change_request", values: [:], caller: Callers.john)
            #expect(try await store.get(first, in: "problem", caller: Callers.john).record["number"] == "PRB0040009")
            #expect(try await store.get(second, in: "problem", caller: Callers.john).record["number"] == "PRB0040010")
            #expect(try await store.get(change, in: "task", caller: Callers.john).record["number"] == "CHG0030009")
            #expect(try await store.get(second, in: "problem", caller: Callers.john).record["state"] == "101")
        }
    }

    @Test("concurrent inserts take consecutive numbers, each once; a missing counter starts at the table's first number")
    func numberingUnderConcurrency() async throws {
        try await TestApp.withStore { store in
            let ids = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        try await store.insert(into: "problem", values: ["short_description": "p\(index)"], caller: Callers.john)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            var numbers: [Int] = []
            for id in ids {
                let number = try await store.get(id, in: "problem", caller: Callers.john).record["number"]
                numbers.append(try #require(Int(number.dropFirst(3))))
            }
            #expect(numbers.sorted() == Array(40009..<40049))
            // SQLite makes a missing counter again; PostgreSQL's sequence is set back as `NumberSequences` would.
            try await store.storage.write { db in
                if db.dialect == .postgres {
                    try await NumberSequences.restart("problem", at: 40001, db: db)
                } else {
                    try await db.run("DELETE FROM docket_number_counter WHERE table_name = 'problem'")
                }
            }
            let restarted = try await store.insert(into: "problem", values: ["short_description": "again"], caller: Callers.john)
            #expect(try await store.get(restarted, in: "problem", caller: Callers.john).record["number"] == "PRB0040001")
            // A number wider than the table's digits is written whole, never cut; the event carries it too.
            try await store.storage.write { db in try await NumberSequences.restart("problem", at: 123456789, db: db) }
            let events = store.broadcaster.follow()
            let wide = try await store.insert(into: "problem", values: ["short_description": "wide"], caller: Callers.john)
            #expect(try await store.get(wide, in: "problem", caller: Callers.john).record["number"] == "PRB123456789")
            for await signal in events.events {
                guard case .event(let event) = signal else { continue }
                #expect(event.sysID == wide && event.values["number"] == "PRB123456789" && event.fields.contains("number"))
                break
            }
            store.broadcaster.stop(events.token)
        }
    }

    @Test("an update changes only given fields, bumps sys_mod_count and applies business rules")
    func update() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 1)
            let (_, before) = try await store.get(id, in: "incident", caller: Callers.john)
            try await store.update(id, in: "incident", values: ["urgency": "1", "state": "7"], caller: Callers.john)
            let (_, after) = try await store.get(id, in: "incident", caller: Callers.john)
            #expect(after["short_description"] == before["short_description"])
            #expect(after["sys_mod_count"] == String(Int(before["sys_mod_count"])! + 1))
            #expect(after["priority"] == "2")
            #expect(after["active"] == "false")
            #expect(after["incident_state"] == "7")
            #expect(!after["closed_at"].isEmpty)
            #expect(after["sys_updated_by"] == "john.doe")
        }
    }

    @Test("journal fields add sys_journal_field entries and read back empty")
    func journals() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 2)
            try await store.update(id, in: "task", values: ["comments": "Called the user", "work_notes": "Rebooted"], caller: Callers.john)
            let entries = try await store.journalEntries(for: [id], elements: ["comments", "work_notes"])
            #expect(entries[id]?.contains { $0.element == "comments" && $0.value == "Called the user" && $0.createdBy == "john.doe" } == true)
            #expect(entries[id]?.contains { $0.element == "work_notes" && $0.value == "Rebooted" } == true)
            let page = try await store.list(
                RecordQuery(table: "sys_journal_field", query: try EncodedQuery("element_id=\(id)^value=Rebooted")),
                caller: Callers.john
            )
            #expect(page.records.first?["name"] == "incident")
        }
    }

    @Test("a delete removes the record and its journal, and logs an event")
    func delete() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 3)
            try await store.delete(id, from: "incident", caller: Callers.john)
            await #expect(throws: EngineError.notFound) { try await store.get(id, in: "incident", caller: Callers.admin) }
            #expect(try await store.journalEntries(for: [id], elements: ["comments", "work_notes"]).isEmpty)
            #expect(try await store.events(after: 0, limit: 100_000).last?.operation == .delete)
        }
    }

    @Test("a bad value aborts the whole write")
    func atomicity() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 4)
            let (_, before) = try await store.get(id, in: "incident", caller: Callers.admin)
            await #expect(throws: EngineError.self) {
                try await store.update(id, in: "incident", values: ["short_description": "changed", "priority": "high"], caller: Callers.admin)
            }
            let (_, after) = try await store.get(id, in: "incident", caller: Callers.admin)
            #expect(after == before)
        }
    }

    @Test("a user without roles sees only tasks they are involved in, and every defect")
    func involvedOnly() async throws {
        try await TestApp.withStore { store in
            let page = try await store.list(RecordQuery(table: "task"), caller: Callers.abel)
            #expect(!page.records.isEmpty)
            #expect(page.records.contains { $0.table == "defect" })
            let me = Callers.abel.userID
            // A Compass database is open to all its users.
            for record in page.records where record.table != "defect" {
                let (_, full) = try await store.get(record.sysID, in: "incident", caller: Callers.admin)
                #expect(full["caller_id"] == me || full["opened_by"] == me || full["assigned_to"] == me)
            }
            // Incident 3 is john.doe's, called in by carol and opened by john: hidden from abel.
            await #expect(throws: EngineError.notFound) {
                try await store.get(DemoData.id("incident", 3), in: "incident", caller: Callers.abel)
            }
        }
    }

    @Test("an involved user may comment but not change other fields, and may not create tasks")
    func commentOnly() async throws {
        try await TestApp.withStore { store in
            let id = DemoData.id("incident", 1)
            try await store.update(id, in: "incident", values: ["comments": "Still broken"], caller: Callers.abel)
            await #expect(throws: EngineError.forbidden(.write)) {
                try await store.update(id, in: "incident", values: ["short_description": "mine now"], caller: Callers.abel)
            }
            await #expect(throws: EngineError.forbidden(.create)) {
                try await store.insert(into: "incident", values: ["short_description": "x"], caller: Callers.abel)
            }
            await #expect(throws: EngineError.notFound) {
                try await store.delete(DemoData.id("incident", 3), from: "incident", caller: Callers.abel)
            }
            await #expect(throws: EngineError.forbidden(.delete)) {
                try await store.delete(id, from: "incident", caller: Callers.abel)
            }
        }
    }

    @Test("password hashes never leave the engine and are bcrypt")
    func passwords() async throws {
        try await TestApp.withStore { store in
            let page = try await store.list(RecordQuery(table: "sys_user", fields: ["user_name", "password"]), caller: Callers.admin)
            #expect(page.columns.map(\.name) == ["user_name"])
            let all = try await store.list(RecordQuery(table: "sys_user"), caller: Callers.admin)
            #expect(!all.columns.contains { $0.name == "password" })
            let account = try await UserDirectory(store: store).account(userName: "john.doe")
            #expect(account?.passwordHash.hasPrefix("$2") == true)
            #expect(try await PasswordHasher(cost: 4).verify("password", hash: account!.passwordHash))
        }
    }

    @Test("unknown tables are refused")
    func unknownTable() async throws {
        try await TestApp.withStore { store in
            await #expect(throws: EngineError.invalidTable("nope")) { try await store.list(RecordQuery(table: "nope"), caller: Callers.admin) }
        }
    }

    @Test("an update that expects a sys_mod_count conflicts when another write came first, writes nothing, and carries the current row")
    func optimisticConcurrency() async throws {
        try await TestApp.withStore { store in
            let id = try await store.insert(into: "incident", values: ["short_description": "v0"], caller: Callers.admin)
            var expecting = WriteOptions()
            expecting.expectedModCount = 0
            try await store.update(id, in: "incident", values: ["short_description": "v1"], caller: Callers.john, options: expecting)
            let start = try await store.latestSequence()
            do {
                try await store.update(id, in: "incident", values: ["short_description": "stale"], caller: Callers.beth, options: expecting)
                Issue.record("a stale update was accepted")
            } catch let error as EngineError {
                #expect(error.code == .conflict)
                #expect(error.reason == .changedSinceRead)
                #expect(error.table == "incident" && error.sysID == id)
                #expect(error.current?["short_description"] == "v1")
                #expect(error.current?["sys_mod_count"] == "1")
            }
            #expect(try await store.events(after: start).isEmpty)
            #expect(try await store.get(id, in: "incident", caller: Callers.admin).record["short_description"] == "v1")
            // Of concurrent writers expecting the same version, exactly one wins.
            expecting.expectedModCount = 1
            let options = expecting
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        (try? await store.update(id, in: "incident", values: ["short_description": "race \(index)"], caller: Callers.admin, options: options)) != nil
                    }
                }
                var wins = 0
                for await won in group where won { wins += 1 }
                return wins
            }
            #expect(outcomes == 1)
        }
    }
}
