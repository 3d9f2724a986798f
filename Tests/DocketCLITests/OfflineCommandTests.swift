@testable import DocketCLI
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Synchronization
import Testing

/// `docket` with the instance stopped: reads from the offline copy, queues changes, and `docket sync`, `conflicts`
/// and `resolve` once it is back.
@Suite("docket offline")
struct OfflineCommandTests {
    @Test("docketd stopped: tasks and show answer from the offline copy, comment and edit queue; back: sync sends each once, a conflicting edit is listed and settled", .timeLimit(.minutes(3)))
    func offlineRoundTrip() async throws {
        let cli = CLIHarness()
        try await withRestartingLiveServer(
            first: { base in
                #expect(await cli.login(base) == 0)
                let tasks = await cli.run("tasks")
                #expect(tasks.code == 0 && tasks.out.contains("INC0010001"))
                #expect(FileManager.default.fileExists(atPath: cli.environment.dataDirectory.path))
            },
            between: { _ in
                let tasks = await cli.run("tasks")
                #expect(tasks.code == 0, "\(tasks.err)")
                #expect(tasks.out.contains("INC0010001") && tasks.out.contains("Incident"))
                #expect(tasks.err.contains("cannot reach the instance") && tasks.err.contains("offline copy, as of"))
                let show = await cli.run("show", "INC0010001")
                #expect(show.code == 0 && show.out.contains("INC0010001") && show.err.contains("offline copy"))
                let comment = await cli.run("comment", "INC0010001", "typed with no signal")
                #expect(comment.code == 0 && comment.out.contains("Queued a comment to INC0010001"), "\(comment.err)")
                let edit = await cli.run("edit", "INC0010001", "short_description=fixed offline")
                #expect(edit.code == 0 && edit.out.contains("Queued the change to INC0010001"), "\(edit.err)")
                let created = await cli.run("create", "incident", "short_description=made in a tunnel")
                #expect(created.code == 0 && created.out.contains("Queued the new incident"), "\(created.err)")
                let shown = await cli.run("show", "INC0010001")
                #expect(shown.out.contains("fixed offline") && shown.out.contains("wait to be sent"))
                let sync = await cli.run("sync")
                #expect(sync.code == 1 && sync.err.contains("could not reach the instance") && sync.err.contains("3 changes wait"))
                // --online: no answer from the copy.
                #expect(await cli.run("tasks", "--online").code == 1)
                // An item the copy does not hold cannot be queued.
                let unknown = await cli.run("comment", "INC0099999", "nowhere")
                #expect(unknown.code == 1 && unknown.err.contains("not in the offline copy"))
            },
            second: { base in
                // Meanwhile someone else changed the same field.
                let admin = try DocketClient(instance: base, credentials: .basic(userName: "admin", password: "admin"))
                _ = try await admin.table.updateRecord(Demo.incident1, in: "incident", with: ["short_description": "fixed by the desk"])
                let sync = await cli.run("sync")
                #expect(sync.code == 0, "\(sync.err)")
                #expect(sync.out.contains("Sent 2 changes") && sync.out.contains("1 conflict to settle"), "\(sync.out)")
                #expect(try await admin.table.records(in: "incident", query: .where("short_description", .equals, "made in a tunnel")).records.count == 1)
                let conflicts = await cli.run("conflicts")
                #expect(conflicts.out.contains("INC0010001  short_description:"), "\(conflicts.out)")
                #expect(conflicts.out.contains("yours 'fixed offline', theirs 'fixed by the desk'"))
                let json = await cli.run("conflicts", "--json")
                let parsed = try JSONValue.parse(Array(json.out.utf8))
                #expect(parsed.arrayValue?.first?["field"] == .string("short_description"))
                #expect(parsed.arrayValue?.first?["number"] == .string("INC0010001"))
                #expect(await cli.run("resolve", "INC0010001").code == 2)
                #expect(await cli.run("resolve", "INC0010001", "--mine", "--theirs").code == 2)
                let wrongField = await cli.run("resolve", "INC0010001", "urgency=1")
                #expect(wrongField.code == 1 && wrongField.err.contains("no conflict on urgency"))
                let resolved = await cli.run("resolve", "INC0010001", "--mine")
                #expect(resolved.code == 0 && resolved.out.contains("Settled 1 conflict"), "\(resolved.err)")
                let again = await cli.run("sync")
                #expect(again.code == 0 && again.out.contains("Sent 1 change"), "\(again.out) \(again.err)")
                #expect(await cli.run("conflicts").out.contains("No conflicts."))
                let record = try await admin.table.record(Demo.incident1, in: "incident")
                #expect(record["short_description"] == "fixed offline")
                let journal = try await admin.table.records(
                    in: "sys_journal_field", query: .where("element_id", .equals, Demo.incident1).and("value", .equals, "typed with no signal")
                )
                #expect(journal.records.count == 1)
                #expect(await cli.run("sync").out.contains("Sent 0 changes"))
            }
        )
    }

    @Test("offline, a journal kept before the fields says its own age")
    func journalAge() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        #expect(ShowCommand.offlineAge(fields: now - 6, journal: now - 20, now: now) == "as of 6 s ago")
        #expect(
            ShowCommand.offlineAge(fields: now - 6, journal: now - 720, now: now)
                == "as of 6 s ago; its comments and work notes as of 12 min ago, and newer ones may be missing"
        )
        #expect(ShowCommand.offlineAge(fields: now - 6, journal: nil, now: now) == "as of 6 s ago")
    }

    @Test("an item shown online reads the same offline: labels, journal and queued comments; a transition queues the state its choice list names", .timeLimit(.minutes(3)))
    func detailsAndTransition() async throws {
        let cli = CLIHarness()
        let listedOnline = Mutex("")
        try await withRestartingLiveServer(
            first: { base in
                #expect(await cli.login(base) == 0)
                let defects = await cli.run("defects", "--type", "incident")
                #expect(defects.code == 0 && defects.out.contains("INC0010001"), "\(defects.err)")
                listedOnline.withLock { $0 = defects.out }
                #expect(await cli.run("comment", "INC0010001", "said while online").code == 0)
                let show = await cli.run("show", "INC0010001")
                #expect(show.code == 0 && show.out.contains("said while online"), "\(show.err)")
            },
            between: { _ in
                // The list as it was shown online: names, not sys_ids; labels, not values.
                let defects = await cli.run("defects", "--type", "incident")
                #expect(defects.code == 0 && defects.err.contains("offline copy"), "\(defects.err)")
                #expect(defects.out == listedOnline.withLock { $0 })
                #expect(await cli.run("defects", "--type", "incident", "--reported").err.contains("no offline copy of this list yet"))
                #expect(await cli.run("defects", "--type", "incident", "--online").code == 1)
                let show = await cli.run("show", "INC0010001")
                #expect(show.code == 0 && show.err.contains("offline copy"), "\(show.err)")
                let state = show.out.split(separator: "\n").first { $0.hasPrefix("State") }.map { $0.dropFirst(5).trimmingCharacters(in: .whitespaces) }
                #expect(state != nil && state?.allSatisfy(\.isNumber) == false, "\(show.out)")
                #expect(show.out.contains("said while online") && show.out.contains("(comment)"))
                let unknown = await cli.run("transition", "INC0010001", "Teleported")
                #expect(unknown.code == 1 && unknown.err.contains("no state 'Teleported'") && unknown.err.contains("Resolved"), "\(unknown.err)")
                let moved = await cli.run("transition", "INC0010001", "resolved", "close_notes=fixed in the field")
                #expect(moved.code == 0 && moved.out.contains("Queued: INC0010001 to Resolved"), "\(moved.out) \(moved.err)")
                #expect(await cli.run("comment", "INC0010001", "queued in the field").code == 0)
                let after = await cli.run("show", "INC0010001", "--json")
                let parsed = try JSONValue.parse(Array(after.out.utf8))
                #expect(parsed["display"]?["state"] == .string("Resolved") && parsed["record"]?["state"] == .string("6"))
                #expect(parsed["journal"]?.arrayValue?.first?["value"] == .string("queued in the field"))
                #expect(parsed["journal"]?.arrayValue?.first?["pending"] == .bool(true))
                let text = await cli.run("show", "INC0010001")
                #expect(text.out.contains("you, queued") && text.out.contains("Resolved"), "\(text.out)")
                #expect(await cli.run("transition", "INC0099999", "Resolved").err.contains("not in the offline copy"))
                // A choice is queued as a person types it (its label, any case) and sent as its value; one that is no
                // value or label of the kept list is refused now, with the list, instead of failing at sync.
                let banana = await cli.run("edit", "INC0010001", "urgency=banana")
                #expect(banana.code == 1)
                #expect(banana.err.contains("'banana' is not one of the urgency values of incident kept here: 1 - High (1), 2 - Medium (2), 3 - Low (3)"), "\(banana.err)")
                let typo = await cli.run("edit", "INC0010001", "urgency=1 - Hihg")
                #expect(typo.err.contains("(did you mean 1 - High?)"), "\(typo.err)")
                #expect(await cli.run("edit", "INC0010001", "urgency=1 - high").code == 0)
                // A field name the kept record does not have is refused with the one meant; comments still go.
                let staet = await cli.run("edit", "INC0010001", "staet=2")
                #expect(staet.code == 1)
                #expect(staet.err.contains("incident has no field 'staet' (did you mean state?)"), "\(staet.err)")
                // A value the instance will refuse (a reference is looked up there).
                #expect(await cli.run("edit", "INC0010001", "assigned_to=Nobody Atall").code == 0)
                let queue = await cli.run("queue")
                #expect(queue.out.contains("INC0010001  update (close_notes, state)  queued"), "\(queue.out)")
                #expect(queue.out.split(separator: "\n").count == 4, "\(queue.out)")
            },
            second: { base in
                let sync = await cli.run("sync")
                #expect(sync.code == 0 && sync.out.contains("Sent 3 changes"), "\(sync.out) \(sync.err)")
                #expect(sync.out.contains("Refused: change 4, update of INC0010001: Invalid value for field 'assigned_to'"), "\(sync.out)")
                let queue = await cli.run("queue", "--json")
                let waiting = try JSONValue.parse(Array(queue.out.utf8)).arrayValue ?? []
                #expect(waiting.count == 1 && waiting.first?["state"] == .string("failed") && waiting.first?["id"] == .integer(4))
                #expect(await cli.run("queue", "--retry", "1").err.contains("no change 1 waits"))
                #expect(await cli.run("queue", "--retry", "4", "--discard", "4").code == 2)
                #expect(await cli.run("queue", "--retry", "4").out.contains("queued again"))
                #expect(await cli.run("sync").out.contains("Refused: change 4"))
                #expect(await cli.run("queue", "--discard", "4").out.contains("Dropped change 4"))
                #expect(await cli.run("queue").out.contains("Nothing waits to be sent."))
                let admin = try DocketClient(instance: base, credentials: .basic(userName: "admin", password: "admin"))
                let record = try await admin.table.record(Demo.incident1, in: "incident")
                #expect(record["state"] == "6" && record["close_notes"] == "fixed in the field")
                #expect(record["urgency"] == "1", "the label queued offline went as its value")
                let show = await cli.run("show", "INC0010001")
                #expect(show.out.contains("queued in the field") && !show.out.contains("you, queued"))
            }
        )
    }
}
