import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Synchronization
import Testing

/// `WorkBackend` against a live docketd, over ServiceNow's Table API and over the Compass API: the same calls.
@Suite("WorkBackend against docketd")
struct WorkBackendTests {
    static func compass(_ base: String, _ user: String = "john.doe") throws -> DocketClient {
        try DocketClient(instance: base, credentials: .compass(
            repository: "SampleRepository", database: "SAMPL", userName: user, password: "password"
        ))
    }

    static func serviceNow(_ base: String, _ user: String = "john.doe", _ password: String = "password") throws -> DocketClient {
        try DocketClient(instance: base, credentials: .basic(userName: user, password: password))
    }

    @Test("Compass: my defects, reported by me, one defect, choices, create, edit, transitions, comment, delete")
    func compassFlow() async throws {
        try await withLiveServer { base in
            let backend = try Self.compass(base).workBackend()
            #expect(backend is CompassBackend)
            let mine = try await backend.myItems(type: nil)
            #expect(!mine.isEmpty)
            #expect(mine.allSatisfy { $0.assignee == "john.doe" && $0.id.hasPrefix("SAMPL") && !$0.state.isEmpty })
            // The saved query is found again (not created twice), and "defect" names the Defect type.
            #expect(try await backend.myItems(type: "defect").map(\.id) == mine.map(\.id))
            let reported = try await backend.reportedByMe(type: nil)
            #expect(!reported.isEmpty)
            #expect(reported.allSatisfy { $0.reporter == "john.doe" })

            let first = try await backend.item("SAMPL00000001")
            #expect(first.type == "Defect")
            #expect(first.state == "Opened")
            #expect(first.legalActions?.contains("Resolve") == true)
            #expect(try await backend.choices(for: first.id, field: "Severity").map(\.label).contains("2-Major"))

            // Creating without the mandatory fields names them all and creates nothing.
            do {
                _ = try await backend.create(type: "defect", fields: [("Description", "no headline")])
                Issue.record("a defect without a headline was created")
            } catch let error as DocketError {
                #expect(error.status == 400)
                #expect(error.message == "Mandatory fields are empty: Headline (Submit)")
            }
            let created = try await backend.create(type: "defect", fields: [
                ("Headline", "backend flow"), ("Severity", "2-Major"), ("Description", "made by the SDK"),
            ])
            #expect(created.id.hasPrefix("SAMPL"))
            #expect(created.state == "Submitted")
            #expect(created.reporter == "john.doe")
            #expect(try await backend.actions(for: created.id).map(\.name).sorted() == ["Assign", "Duplicate", "Postpone"])

            // An action that is not legal now, and one whose mandatory field is missing: the record stays as it was
            // and is not left locked.
            do {
                _ = try await backend.transition(created.id, action: "Close", fields: [])
                Issue.record("Close ran on a submitted defect")
            } catch let error as DocketError {
                #expect(error.message.contains("possible: "), "\(error.message)")
            }
            do {
                _ = try await backend.transition(created.id, action: "assign", fields: [])
                Issue.record("Assign ran without an owner")
            } catch let error as DocketError {
                #expect(error.message == "Mandatory fields are empty: Owner (Assign)")
            }
            let assigned = try await backend.transition(created.id, action: "assign", fields: [("Owner", "john.doe")])
            #expect(assigned.state == "Assigned")
            #expect(assigned.assignee == "john.doe")
            let edited = try await backend.edit(created.id, fields: [("Headline", "backend flow, edited")])
            #expect(edited.title == "backend flow, edited")
            #expect(edited.state == "Assigned")
            try await backend.comment(on: created.id, "looked at it")
            let resolved = try await backend.transition(created.id, action: "Resolve", fields: [("Resolution", "Fixed")])
            #expect(resolved.state == "Resolved")
            #expect(resolved.fields["Resolution"] == "Fixed")
            #expect(try await backend.myItems(type: nil).contains { $0.id == created.id })
            try await backend.delete(created.id)
            await #expect(throws: DocketError.self) { try await backend.item(created.id) }
        }
    }

    @Test("ServiceNow tables: the same calls on incidents (states from sys_choice)")
    func serviceNowFlow() async throws {
        try await withLiveServer { base in
            let backend = try Self.serviceNow(base).workBackend()
            #expect(backend is ServiceNowBackend)
            let mine = try await backend.myItems(type: nil)
            #expect(mine.contains { $0.id == "INC0010001" })
            #expect(try await backend.myItems(type: "defect").allSatisfy { $0.id.hasPrefix("SAMPL") })
            let created = try await backend.create(type: "incident", fields: [("short_description", "backend incident"), ("urgency", "2")])
            #expect(created.id.hasPrefix("INC"))
            #expect(created.type == "incident")
            #expect(created.state == "New")
            #expect(try await backend.reportedByMe(type: "incident").contains { $0.id == created.id })
            let actions = try await backend.actions(for: created.id).map(\.name)
            #expect(actions.contains("In Progress") && actions.contains("Resolved") && !actions.contains("New"))
            #expect(try await backend.choices(for: created.id, field: "urgency").map(\.value) == ["1", "2", "3"])
            let moved = try await backend.transition(created.id, action: "in progress", fields: [("work_notes", "on it")])
            #expect(moved.state == "In Progress")
            await #expect(throws: DocketError.self) { try await backend.transition(created.id, action: "Sideways", fields: []) }
            #expect(try await backend.edit(created.id, fields: [("short_description", "edited")]).title == "edited")
            try await backend.comment(on: created.id, "a comment")
            try await backend.delete(created.id)
            await #expect(throws: DocketError.self) { try await backend.item(created.id) }
        }
    }

    /// Collects notifications until `done` says enough; meanwhile `poke` runs every 200 ms until the first one
    /// arrives (the stream follows from when it connected), then `act` runs once.
    static func notifications(
        _ backend: any WorkBackend, poke: @escaping @Sendable () async throws -> Void,
        act: @escaping @Sendable () async throws -> Void, done: @escaping @Sendable ([WorkNotification]) -> Bool
    ) async throws -> [WorkNotification] {
        let seen = Mutex<[WorkNotification]>([])
        let collector = Task {
            for try await note in backend.watchMine() {
                let all = seen.withLock { $0.append(note); return $0 }
                if done(all) { return all }
            }
            return seen.withLock { $0 }
        }
        // The collector is not a child task: a test that runs out of time must stop it, or the test never ends.
        return try await withTaskCancellationHandler {
            do {
                while seen.withLock({ $0.isEmpty }) {
                    try await poke()
                    try await Task.sleep(for: .milliseconds(200))
                }
                try await act()
            } catch {
                collector.cancel()
                throw error
            }
            return try await collector.value
        } onCancel: {
            collector.cancel()
        }
    }

    @Test("Compass: watchMine says who assigned or modified my defects, with the state change", .timeLimit(.minutes(3)))
    func compassNotifications() async throws {
        try await withLiveServer { base in
            let mine = try Self.compass(base).workBackend()
            let beth = try Self.compass(base, "beth.anglin").workBackend()
            let notes = try await Self.notifications(
                mine,
                poke: { _ = try await beth.edit("SAMPL00000001", fields: [("Description", "poke \(UUID())")]) },
                act: {
                    let created = try await beth.create(type: "Defect", fields: [
                        ("Headline", "for john"), ("Severity", "3-Average"), ("Owner", "john.doe"),
                    ])
                    _ = try await beth.transition(created.id, action: "Assign", fields: [("Owner", "john.doe")])
                },
                done: { all in all.contains { $0.stateChange != nil } }
            )
            // Every field the change set is told, in Compass's names.
            #expect(notes.first?.message.hasPrefix("SAMPL00000001 modified by beth.anglin (Description: 'poke ") == true, "\(notes.first?.message ?? "")")
            #expect(notes.first?.changes.map(\.field) == ["Description"])
            let assigned = try #require(notes.first { $0.kind == .assigned })
            #expect(assigned.message == "\(assigned.id) assigned to you by beth.anglin")
            #expect(assigned.title == "for john")
            let moved = try #require(notes.last)
            #expect(moved.message == "\(assigned.id) modified by beth.anglin (State: Submitted → Assigned)")
            // My own changes are not news to me.
            #expect(notes.allSatisfy { $0.user == "beth.anglin" })
        }
    }

    @Test("ServiceNow tables: watchMine over incidents", .timeLimit(.minutes(3)))
    func serviceNowNotifications() async throws {
        try await withLiveServer { base in
            let mine = try Self.serviceNow(base).workBackend()
            let admin = try Self.serviceNow(base, "admin", "admin")
            let john = try await admin.table.records(in: "sys_user", query: .where("user_name", .equals, "john.doe")).records[0].sysID
            let first = try await admin.table.records(in: "incident", query: .where("number", .equals, "INC0010001")).records[0].sysID
            let notes = try await Self.notifications(
                mine,
                poke: { _ = try await admin.table.updateRecord(first, in: "incident", with: ["description": "poke \(UUID())"]) },
                act: {
                    let created = try await admin.table.createRecord(
                        with: ["short_description": "for john", "assigned_to": john], in: "incident"
                    )
                    _ = try await admin.table.updateRecord(created.sysID, in: "incident", with: ["state": "2"])
                },
                done: { all in all.contains { $0.stateChange != nil } }
            )
            let assigned = try #require(notes.first { $0.kind == .assigned })
            #expect(assigned.message == "\(assigned.id) assigned to you by admin")
            #expect(notes.last?.message == "\(assigned.id) modified by admin (State: New → In Progress)")
            // Other fields are described too, choice fields by their labels.
            let poked = try #require(notes.first { $0.id == "INC0010001" })
            #expect(poked.message.hasPrefix("INC0010001 modified by admin (description: '"), "\(poked.message)")
            let urgent = try await Self.notifications(
                mine,
                poke: { _ = try await admin.table.updateRecord(first, in: "incident", with: ["description": "poke \(UUID())"]) },
                act: { _ = try await admin.table.updateRecord(first, in: "incident", with: ["urgency": "1", "comments": "Calling you now"]) },
                done: { all in all.contains { $0.changes.contains { $0.field == "urgency" } } }
            )
            let note = try #require(urgent.first { $0.changes.contains { $0.field == "urgency" } })
            #expect(note.message.contains("urgency: '2 - Medium' → '1 - High'"), "\(note.message)")
            #expect(note.message.contains("comments: 'Calling you now'"), "\(note.message)")
        }
    }
}
