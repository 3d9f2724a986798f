import DocketModel
import Foundation
import Logging
import Testing

@testable import DocketServer

/// Which committed changes notify whom, with what words: the demo rules (the seeds' behaviour) judged by the engine.
@Suite("Notification rules")
struct NotificationRulesTests {
    /// The notifications of the last change `write` commits.
    static func notifications(
        _ store: RecordStore, _ write: () async throws -> Void
    ) async throws -> [PendingNotification] {
        let before = try await store.latestSequence()
        try await write()
        let events = try await store.events(after: before, limit: 100)
        let rules = NotificationRules(store: store)
        var pending: [PendingNotification] = []
        for event in events {
            pending += try await rules.notifications(for: event) { try await UserDirectory(store: store).caller(userID: $0) }
        }
        return pending
    }

    @Test("an incident assigned to john.doe by someone else tells him (and only the heaviest rule does); his own assignment tells nobody")
    func assigned() async throws {
        try await TestApp.withStore { store in
            var id = ""
            let told = try await Self.notifications(store) {
                id = try await store.insert(
                    into: "incident", values: ["short_description": "Printer on fire", "assigned_to": Callers.john.userID], caller: Callers.beth
                )
            }
            let number = try await store.get(id, in: "incident", caller: Callers.admin).record["number"]
            #expect(told.count == 1)
            #expect(told.first?.userID == Callers.john.userID)
            #expect(told.first?.rule == DemoNotifications.ruleID("assigned"))
            #expect(told.first?.subject == "\(number) was assigned to you")
            #expect(told.first?.message == "Printer on fire")
            let own = try await Self.notifications(store) {
                try await store.update(id, in: "incident", values: ["short_description": "Printer still on fire"], caller: Callers.john)
            }
            #expect(own.isEmpty)
        }
    }

    @Test("beth's comment on john's incident tells john who commented and what (the comment rule outweighs 'changed'); a change tells him what changed")
    func commentAndChanges() async throws {
        try await TestApp.withStore { store in
            let id = try await store.insert(
                into: "incident", values: ["short_description": "VPN drops", "assigned_to": Callers.john.userID], caller: Callers.john
            )
            let commented = try await Self.notifications(store) {
                try await store.update(id, in: "incident", values: ["comments": "Rebooted the concentrator"], caller: Callers.beth)
            }
            #expect(commented.count == 1)
            #expect(commented.first?.rule == DemoNotifications.ruleID("comment"))
            #expect(commented.first?.subject.hasPrefix("Beth Anglin commented on INC") == true)
            #expect(commented.first?.message == "Rebooted the concentrator")
            let changed = try await Self.notifications(store) {
                try await store.update(id, in: "incident", values: ["state": "2", "priority": "1"], caller: Callers.beth)
            }
            // A state change: the default rule (it outweighs the demo's 'changed'), its label in the subject.
            #expect(changed.map(\.rule) == [NotificationSchema.defaultRuleID("state")])
            let message = changed.first?.message ?? ""
            #expect(message.hasPrefix("VPN drops\n"), "\(message)")
            #expect(message.contains("State: In Progress"), "\(message)")
            #expect(message.contains("Impact") || message.contains("Priority"), "\(message)")
            #expect(changed.first?.subject.hasSuffix(" is now In Progress") == true, "\(changed.first?.subject ?? "")")
            // Another change: the demo's rule, with what changed.
            let edited = try await Self.notifications(store) {
                try await store.update(id, in: "incident", values: ["short_description": "VPN drops hourly"], caller: Callers.beth)
            }
            #expect(edited.map(\.rule) == [DemoNotifications.ruleID("changed")])
            #expect(edited.first?.subject.hasSuffix("was changed by Beth Anglin") == true)
        }
    }

    @Test("a new database has the default rules (added once, never to a database with rules): assigned to a group tells its members while nobody has it")
    func defaults() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await SQLiteStorage.open(path: directory.path + "/fresh.sqlite", readers: 1, logger: Logger(label: "test"))
        let hasher = PasswordHasher(cost: 4)
        let (store, isNew) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
        #expect(isNew)
        let rules = try await store.list(RecordQuery(table: "sysevent_email_action", query: try EncodedQuery("ORDERBYDESCweight")), caller: .system)
        #expect(rules.records.map { $0["name"] } == [
            "Assigned to you", "Assigned to your group", "New comment on your item", "State of your item changed",
        ])
        #expect(rules.records.allSatisfy { $0["active"] == "true" }, "\(rules.records.map { $0["active"] })")
        // Opening it again adds nothing, and a database whose rules were all removed stays without.
        #expect(try await SchemaStore.prepare(storage) == false)
        try await storage.write { db in try await NotificationSchema.addDefaultRules(db, now: "2026-01-01 00:00:00") }
        #expect(try await store.list(RecordQuery(table: "sysevent_email_action"), caller: .system).records.count == 4)
        try await storage.close()
        await hasher.shutdown()

        try await TestApp.withStore { store in
            let network = DemoData.id("group", 1)
            let members = try await store.list(
                RecordQuery(table: "sys_user_grmember", query: try EncodedQuery("group=\(network)")), caller: .system
            ).records.map { $0["user"] }
            let told = try await Self.notifications(store) {
                _ = try await store.insert(into: "incident", values: ["short_description": "Switch down", "assignment_group": network], caller: Callers.beth)
            }
            #expect(!members.isEmpty)
            #expect(Set(told.map(\.userID)) == Set(members).subtracting([Callers.beth.userID]), "\(told.map(\.userID))")
            #expect(told.allSatisfy { $0.rule == NotificationSchema.defaultRuleID("group") && $0.subject.hasSuffix(" was assigned to Service Desk") })
        }
    }

    @Test("nobody is told of a record they may not read: a rule naming abel.tuter (no role) about someone else's incident tells him nothing")
    func unreadable() async throws {
        try await TestApp.withStore { store in
            try await store.insert(into: "sysevent_email_action", values: [
                "name": "Every new incident to Abel", "collection": "incident", "action_insert": "true",
                "recipient_users": Callers.abel.userID + "," + Callers.john.userID, "subject": "New ${number}",
            ], caller: Callers.admin)
            let told = try await Self.notifications(store) {
                _ = try await store.insert(into: "incident", values: ["short_description": "Secret"], caller: Callers.beth)
            }
            #expect(told.map(\.userID) == [Callers.john.userID])
            // Once abel may read it (he opened it for himself), he is told.
            let involved = try await Self.notifications(store) {
                _ = try await store.insert(
                    into: "incident", values: ["short_description": "Mine", "caller_id": Callers.abel.userID], caller: Callers.beth
                )
            }
            #expect(Set(involved.map(\.userID)) == [Callers.abel.userID, Callers.john.userID])
        }
    }

    @Test("a rule's condition and changed fields are honoured; inactive rules, deletes and notifications themselves tell nobody")
    func conditions() async throws {
        try await TestApp.withStore { store in
            try await store.insert(into: "sysevent_email_action", values: [
                "name": "Critical incidents to Beth", "collection": "incident", "action_insert": "true", "action_update": "true",
                "condition": "priority=1", "changed_fields": "priority", "recipient_users": Callers.beth.userID,
                "subject": "Critical: ${short_description} (${priority})",
            ], caller: Callers.admin)
            let low = try await Self.notifications(store) {
                _ = try await store.insert(into: "incident", values: ["short_description": "Low"], caller: Callers.john)
            }
            #expect(low.isEmpty)
            var id = ""
            let critical = try await Self.notifications(store) {
                id = try await store.insert(
                    into: "incident", values: ["short_description": "Down", "impact": "1", "urgency": "1"], caller: Callers.john
                )
            }
            #expect(critical.map(\.subject) == ["Critical: Down (1 - Critical)"])
            let unrelated = try await Self.notifications(store) {
                try await store.update(id, in: "incident", values: ["short_description": "Down hard"], caller: Callers.john)
            }
            #expect(unrelated.isEmpty)
            let deleted = try await Self.notifications(store) { try await store.delete(id, from: "incident", caller: Callers.admin) }
            #expect(deleted.isEmpty)
        }
    }

    @Test("a new DataSync task tells every member of 'DataSync users' but its author")
    func dataSyncTask() async throws {
        try await TestApp.withStore { store in
            let told = try await Self.notifications(store) {
                _ = try await store.insert(
                    into: "datasync_task", values: ["title": "Buy milk", "description": "Two litres"], caller: Callers.john
                )
            }
            #expect(Set(told.map(\.userID)) == Set(["admin", "beth.anglin", "abel.tuter"].map(DemoData.userID)))
            #expect(told.allSatisfy { $0.subject == "New task: Buy milk" && $0.message == "Two litres" })
        }
    }
}
