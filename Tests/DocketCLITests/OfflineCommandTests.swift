@testable import DocketCLI
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
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
}
