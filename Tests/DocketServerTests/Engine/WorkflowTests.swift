import DocketModel
import Foundation
import Testing

@testable import DocketServer

/// State models as catalog data: actions legal per state and role, field behaviour per state and action,
/// history, duplicates; and ServiceNow's tables left permissive.
@Suite("Workflow")
struct WorkflowTests {
    static func defect(_ index: Int) -> String { DemoData.id("defect", index) }

    static func history(_ store: RecordStore, of id: String) async throws -> [Record] {
        try await store.list(
            RecordQuery(table: "sys_wf_history", query: try EncodedQuery("document=\(id)^ORDERBYsequence")),
            caller: Callers.admin
        ).records
    }

    static func defects(_ store: RecordStore) async throws -> Int {
        try await store.list(RecordQuery(table: "defect"), caller: Callers.admin).records.count
    }

    @Test("a defect is submitted into Submitted with a SAMPL number; the submit is its first history entry")
    func submit() async throws {
        try await TestApp.withStore { store in
            let id = try await store.insert(
                into: "defect", values: ["short_description": "Crash on launch", "severity": "1"], caller: Callers.john
            )
            let (_, record) = try await store.get(id, in: "defect", caller: Callers.john)
            #expect(record["state"] == "1")
            #expect(record["opened_by"] == Callers.john.userID)
            #expect(record["number"] == "SAMPL00000012")  // eleven in the demo
            let history = try await Self.history(store, of: id)
            #expect(history.map { $0["action_name"] } == ["Submit"])
            #expect(history.first?["user_name"] == "john.doe")
            #expect(history.first?["old_state"] == "" && history.first?["new_state"] == "1")
        }
    }

    @Test("missing mandatory fields and written read-only ones are named in one message, and nothing is written")
    func fieldBehaviour() async throws {
        try await TestApp.withStore { store in
            let before = try await Self.defects(store)
            do {
                _ = try await store.insert(into: "defect", values: ["severity": "", "description": "x"], caller: Callers.john)
                Issue.record("a defect without headline and severity was created")
            } catch let error as EngineError {
                #expect(error.fields == ["short_description", "severity"])
                #expect(error.detail?.contains("Short description, Severity") == true, "\(error)")
            }
            #expect(try await Self.defects(store) == before)
            // Resolve needs a resolution; the submitter is read-only: both named, the defect stays Opened.
            let id = Self.defect(1)
            var options = WriteOptions()
            options.action = "Resolve"
            do {
                try await store.update(id, in: "defect", values: ["opened_by": Callers.abel.userID], caller: Callers.john, options: options)
                Issue.record("an invalid resolve was committed")
            } catch let error as EngineError {
                #expect(Set(error.fields ?? []) == ["resolution", "opened_by"])
                #expect(error.detail?.contains("(Resolve)") == true)
            }
            #expect(try await store.get(id, in: "defect", caller: Callers.john).record["state"] == "3")
            #expect(try await Self.history(store, of: id).map { $0["action_name"] } == ["Submit", "Assign", "Open"])
            try await store.update(id, in: "defect", values: ["resolution": "Fixed"], caller: Callers.john, options: options)
            #expect(try await store.get(id, in: "defect", caller: Callers.john).record["state"] == "4")
            // Resolution is read-only in Opened: after Reject it cannot be changed there.
            options.action = "Reject"
            try await store.update(id, in: "defect", values: [:], caller: Callers.john, options: options)
            await #expect(throws: EngineError.self) {
                try await store.update(id, in: "defect", values: ["resolution": "As Designed"], caller: Callers.john)
            }
        }
    }

    @Test("legal actions follow the state, the caller's roles and the access rules")
    func legalActions() async throws {
        try await TestApp.withStore { store in
            let opened = try await store.legalActions(Self.defect(1), in: "defect", caller: Callers.john).map(\.name)
            #expect(opened == ["Resolve", "Postpone", "Duplicate", "Modify", "Delete"])
            let submitted = try await store.legalActions(Self.defect(3), in: "defect", caller: Callers.john).map(\.name)
            #expect(submitted == ["Assign", "Postpone", "Duplicate", "Modify", "Delete"])
            // abel submitted defect 2: he may change it, but not delete it (Delete needs itil).
            let own = try await store.legalActions(Self.defect(2), in: "defect", caller: Callers.abel).map(\.name)
            #expect(own == ["Open", "Resolve", "Postpone", "Duplicate", "Modify"])
            // Defect 3 is john's alone: abel reads it but may run nothing.
            #expect(try await store.legalActions(Self.defect(3), in: "defect", caller: Callers.abel).isEmpty)
            await #expect(throws: EngineError.self) {
                try await store.delete(Self.defect(2), from: "defect", caller: Callers.abel)
            }
            // ServiceNow's tables have no actions.
            #expect(try await store.legalActions(DemoData.id("incident", 1), in: "incident", caller: Callers.john).isEmpty)
        }
    }

    @Test("a state written through the Table API runs the one action that leads there; others are refused")
    func stateThroughAction() async throws {
        try await TestApp.withStore { store in
            let id = Self.defect(2)  // Assigned
            try await store.update(id, in: "defect", values: ["state": "3"], caller: Callers.john)
            #expect(try await Self.history(store, of: id).last?["action_name"] == "Open")
            do {
                try await store.update(id, in: "defect", values: ["state": "5"], caller: Callers.john)
                Issue.record("Opened → Closed was allowed")
            } catch let error as EngineError {
                #expect(error.detail == "No action takes a defect from Opened to Closed; possible here: Resolve, Postpone, Duplicate, Modify, Delete")
            }
            var options = WriteOptions()
            options.action = "Close"
            await #expect(throws: EngineError.self) {
                try await store.update(id, in: "defect", values: [:], caller: Callers.john, options: options)
            }
            options.action = "Nonsense"
            await #expect(throws: EngineError.self) {
                try await store.update(id, in: "defect", values: [:], caller: Callers.john, options: options)
            }
            #expect(try await store.get(id, in: "defect", caller: Callers.john).record["state"] == "3")
        }
    }

    @Test("Duplicate needs the original and remembers the state; Unduplicate restores it")
    func duplicates() async throws {
        try await TestApp.withStore { store in
            let id = Self.defect(3)  // Submitted
            var options = WriteOptions()
            options.action = "Duplicate"
            await #expect(throws: EngineError.self) {
                try await store.update(id, in: "defect", values: [:], caller: Callers.john, options: options)
            }
            try await store.update(id, in: "defect", values: ["duplicate_of": Self.defect(1)], caller: Callers.john, options: options)
            var record = try await store.get(id, in: "defect", caller: Callers.john).record
            #expect(record["state"] == "6" && record["unduplicate_state"] == "1" && record["active"] == "false")
            #expect(try await store.legalActions(id, in: "defect", caller: Callers.john).map(\.name) == ["Unduplicate", "Modify", "Delete"])
            options.action = "Unduplicate"
            try await store.update(id, in: "defect", values: [:], caller: Callers.john, options: options)
            record = try await store.get(id, in: "defect", caller: Callers.john).record
            #expect(record["state"] == "1" && record["duplicate_of"] == "" && record["unduplicate_state"] == "")
            #expect(record["active"] == "true")
            let history = try await Self.history(store, of: id)
            #expect(history.suffix(2).map { "\($0["action_name"]) \($0["old_state"])→\($0["new_state"])" } == ["Duplicate 1→6", "Unduplicate 6→1"])
        }
    }

    @Test("history.* in a query holds for one history entry; the log carries each entry")
    func historyQueries() async throws {
        try await TestApp.withStore { store in
            func numbers(_ query: String, _ caller: Caller = Callers.john) async throws -> [String] {
                try await store.list(
                    RecordQuery(table: "defect", query: try EncodedQuery(query + "^ORDERBYnumber")), caller: caller
                ).records.map { $0["number"] }
            }
            // Resolved by john: defect 4 (defect 5 was resolved by beth and closed by john).
            #expect(try await numbers("history.action_name=Resolve^history.user_name=john.doe") == ["SAMPL00000004"])
            #expect(try await numbers("history.action_name=Close^history.user_name=john.doe") == ["SAMPL00000005"])
            #expect(try await numbers("history.action_name=Resolve^history.user_name=abel.tuter").isEmpty)
            // The stock app's notification query: mine, assigned or modified by someone else since a time.
            let since = GlideDateTime.format(Date().addingTimeInterval(-60 * 86_400))
            let query = "assigned_to.user_name=john.doe^history.action_nameINSubmit,Modify,Assign"
                + "^history.action_timestamp>\(since)^history.user_name!=john.doe"
            #expect(try await numbers(query) == ["SAMPL00000001", "SAMPL00000002", "SAMPL00000004", "SAMPL00000011"])
            let start = try await store.latestSequence()
            var options = WriteOptions()
            options.action = "Modify"
            try await store.update(Self.defect(1), in: "defect", values: ["priority": "1"], caller: Callers.beth, options: options)
            let events = try await store.events(after: start, limit: 10)
            #expect(events.map(\.table) == ["defect", "sys_wf_history"])
            #expect(events.last?.values["action_name"] == "Modify" && events.last?.values["user_name"] == "beth.anglin")
        }
    }

    @Test("ServiceNow tables stay permissive; a dictionary's mandatory field is checked on every table")
    func permissive() async throws {
        try await TestApp.withStore { store in
            let incident = DemoData.id("incident", 1)
            try await store.update(incident, in: "incident", values: ["state": "7"], caller: Callers.john)
            try await store.update(incident, in: "incident", values: ["state": "1"], caller: Callers.john)
            let entry = try await store.list(
                RecordQuery(table: "sys_dictionary", query: try EncodedQuery("name=task^element=short_description")),
                caller: Callers.admin
            ).records[0]
            try await store.update(entry.sysID, in: "sys_dictionary", values: ["mandatory": "true"], caller: Callers.admin)
            await #expect(throws: EngineError.self) {
                try await store.insert(into: "incident", values: ["description": "no summary"], caller: Callers.john)
            }
            await #expect(throws: EngineError.self) {
                try await store.update(incident, in: "incident", values: ["short_description": ""], caller: Callers.john)
            }
            // Other changes of a record stay possible.
            try await store.update(incident, in: "incident", values: ["urgency": "1"], caller: Callers.john)
        }
    }

    @Test("a state model is catalog data: an action added through sys_wf_action runs at once")
    func modelIsData() async throws {
        try await TestApp.withStore { store in
            _ = try await store.insert(
                into: "sys_wf_action",
                values: ["table_name": "defect", "name": "Withdraw", "kind": "change_state", "source_states": "1",
                         "destination_state": "5", "sequence": "5"],
                caller: Callers.admin
            )
            let id = Self.defect(3)
            #expect(try await store.legalActions(id, in: "defect", caller: Callers.john).map(\.name).first == "Withdraw")
            try await store.update(id, in: "defect", values: ["state": "5"], caller: Callers.john)
            #expect(try await Self.history(store, of: id).last?["action_name"] == "Withdraw")
            // Only admins change models.
            await #expect(throws: EngineError.self) {
                try await store.insert(into: "sys_wf_action", values: ["table_name": "defect", "name": "X", "kind": "modify"], caller: Callers.john)
            }
        }
    }
}
