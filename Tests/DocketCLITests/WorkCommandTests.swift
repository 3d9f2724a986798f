@testable import DocketCLI
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Testing

/// The backend-neutral commands (defects, create, edit, transition, delete, choices, watch --mine) against a live
/// docketd, logged in to Compass and to the ServiceNow API.
@Suite("docket work commands")
struct WorkCommandTests {
    func compassLogin(_ cli: CLIHarness, _ base: String, user: String = "john.doe") async -> (code: Int32, out: String, err: String) {
        await cli.run("login", base, "--user", user, "--repo", "SampleRepository", "--db", "SAMPL", "--password-stdin", stdin: ["password"])
    }

    @Test("Compass: login --repo --db keeps the token only; defects, show, create, edit, transition, choices, delete")
    func compass() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            let login = await compassLogin(cli, base)
            #expect(login.code == 0, "\(login.err)")
            #expect(login.out.contains("(Compass SampleRepository/SAMPL)"))
            let stored = try String(contentsOf: cli.directory.appendingPathComponent("credentials.json"), encoding: .utf8)
            #expect(stored.contains("compassToken") && !stored.contains("password"))
            #expect(await cli.run("whoami").out.contains("john.doe on \(base) (Compass SampleRepository/SAMPL)"))

            let mine = await cli.run("defects")
            #expect(mine.code == 0, "\(mine.err)")
            #expect(mine.out.hasPrefix("ID"))
            #expect(mine.out.contains("SAMPL00000001"))
            let reported = await cli.run("defects", "--reported", "--json")
            let rows = try #require(try JSONValue.parse(Array(reported.out.utf8)).arrayValue)
            #expect(!rows.isEmpty && rows.allSatisfy { $0["reporter"]?.stringValue == "john.doe" })

            let shown = await cli.run("show", "SAMPL00000001")
            #expect(shown.out.contains("State") && shown.out.contains("Opened"))
            #expect(shown.out.contains("Actions"))

            // Missing mandatory fields: one message naming them, exit 1.
            let missing = await cli.run("create", "defect", "Description=nothing else")
            #expect(missing.code == 1)
            #expect(missing.err.contains("Mandatory fields are empty: Headline (Submit)"), "\(missing.err)")
            #expect(await cli.run("create", "defect", "Headline").code == 2)
            let created = await cli.run("create", "defect", "Headline=cli defect", "Severity=2-Major")
            #expect(created.code == 0, "\(created.err)")
            let id = try #require(created.out.split(separator: " ").dropFirst().first.map(String.init))
            #expect(id.hasPrefix("SAMPL"))
            #expect(created.out.contains("(Submitted): cli defect"))

            let listed = await cli.run("transition", id)
            #expect(listed.out.contains("Possible actions for \(id) (Submitted):"))
            #expect(listed.out.contains("Assign → Assigned"))
            #expect(!listed.out.contains("Modify"))
            let refused = await cli.run("transition", id, "Close")
            #expect(refused.code == 1)
            #expect(refused.err.contains("possible: "))
            let assigned = await cli.run("transition", id, "Assign", "Owner=john.doe")
            #expect(assigned.out == "\(id) is now Assigned: cli defect\n", "\(assigned.err)")
            #expect(await cli.run("edit", id, "Headline=cli defect, edited").out.contains("Updated \(id) (Assigned)"))
            let choices = await cli.run("choices", id, "Priority")
            #expect(choices.out.contains("1-Resolve Immediately\n"))
            #expect(await cli.run("comment", id, "a note").out == "Added a note to \(id).\n")
            #expect(await cli.run("delete", id).out == "Deleted \(id).\n")
            #expect(await cli.run("show", id).code == 1)
            // ServiceNow-only commands say what to use instead.
            let tasks = await cli.run("tasks")
            #expect(tasks.code == 1)
            #expect(tasks.err.contains("you are logged in to Compass"))
            #expect(await cli.run("logout").code == 0)
            #expect(await cli.run("defects").code == 1)
        }
    }

    @Test("Compass: --repo needs --db; a wrong database or password says so")
    func compassLoginErrors() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await cli.run("login", base, "--user", "john.doe", "--repo", "SampleRepository").code == 2)
            let wrongDB = await cli.run(
                "login", base, "--user", "john.doe", "--repo", "SampleRepository", "--db", "NOPE", "--password-stdin",
                stdin: ["password"]
            )
            #expect(wrongDB.code == 1)
            #expect(!wrongDB.err.isEmpty)
            let wrongPassword = await cli.run(
                "login", base, "--user", "john.doe", "--repo", "SampleRepository", "--db", "SAMPL", "--password-stdin",
                stdin: ["nope"]
            )
            #expect(wrongPassword.code == 1)
            #expect(wrongPassword.err.contains("wrong user name or password"))
        }
    }

    @Test("Compass: watch --mine prints who assigned or modified my defects", .timeLimit(.minutes(3)))
    func compassWatch() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await compassLogin(cli, base).code == 0)
            let beth = try DocketClient(instance: base, credentials: .compass(
                repository: "SampleRepository", database: "SAMPL", userName: "beth.anglin", password: "password"
            )).workBackend()
            let watch = Task { await cli.run("watch", "--mine") }
            // The watch follows from when it connected: beth edits until it has seen one of her changes.
            var pokes = 0
            while !cli.outputSoFar().contains("modified by beth.anglin"), pokes < 100 {
                _ = try await beth.edit("SAMPL00000001", fields: [("Description", "poke \(pokes)")])
                pokes += 1
                try await Task.sleep(for: .milliseconds(200))
            }
            let created = try await beth.create(type: "Defect", fields: [
                ("Headline", "for john"), ("Severity", "3-Average"), ("Owner", "john.doe"),
            ])
            _ = try await beth.transition(created.id, action: "Assign", fields: [("Owner", "john.doe")])
            let moved = "\(created.id) modified by beth.anglin (State: Submitted → Assigned)  for john"
            for _ in 0..<100 where !cli.outputSoFar().contains(moved) { try await Task.sleep(for: .milliseconds(100)) }
            let lines = cli.outputSoFar().split(separator: "\n").map(String.init)
            watch.cancel()
            _ = await watch.value
            #expect(lines.first?.hasPrefix("SAMPL00000001 modified by beth.anglin (Description: 'poke ") == true, "\(lines)")
            #expect(lines.contains("\(created.id) assigned to you by beth.anglin  for john"), "\(lines)")
            #expect(lines.last == moved, "\(lines)")
            #expect(await cli.run("watch", "--table", "defect").code == 2)
        }
    }

    @Test("ServiceNow: the same commands on incidents")
    func serviceNow() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let created = await cli.run("create", "incident", "short_description=cli incident", "urgency=2")
            #expect(created.code == 0, "\(created.err)")
            let id = try #require(created.out.split(separator: " ").dropFirst().first.map(String.init))
            #expect(id.hasPrefix("INC"))
            #expect(created.out.contains("(New): cli incident"))
            let listed = await cli.run("transition", id)
            #expect(listed.out.contains("Possible actions for \(id) (New):"))
            #expect(listed.out.contains("  Resolved\n"))
            #expect(await cli.run("transition", id, "In Progress").out == "\(id) is now In Progress: cli incident\n")
            #expect(await cli.run("choices", id, "urgency").out == "1  1 - High\n2  2 - Medium\n3  3 - Low\n")
            #expect(await cli.run("edit", id, "short_description=edited").out.contains("Updated \(id) (In Progress): edited"))
            let mine = await cli.run("defects", "--type", "incident", "--reported")
            #expect(mine.out.contains(id))
            #expect(await cli.run("delete", id).out == "Deleted \(id).\n")
            #expect(await cli.run("edit", id).code == 2)
        }
    }

    @Test("ServiceNow: create and edit take what a person types (labels, names, user names); a reference naming nobody is refused with the candidates")
    func serviceNowValuesAsTyped() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await cli.login(base) == 0)
            let created = await cli.run(
                "create", "incident", "short_description=typed by a person", "urgency=1 - High", "assigned_to=beth.anglin",
                "caller_id=Abel Tuter", "--json"
            )
            #expect(created.code == 0, "\(created.err)")
            let item = try JSONValue.parse(Array(created.out.utf8))
            #expect(item["assignee"]?.stringValue == "Beth Anglin")
            #expect(item["fields"]?["urgency"]?.stringValue == "1 - High")
            #expect(item["fields"]?["caller_id"]?.stringValue == "Abel Tuter")
            let id = try #require(item["id"]?.stringValue)
            // It reaches beth's work: the reference is hers, not the text.
            let beth = CLIHarness()
            #expect(await beth.login(base, user: "beth.anglin") == 0)
            #expect(await beth.run("defects", "--type", "incident").out.contains(id))

            let resolved = await cli.run("edit", id, "state=Resolved", "close_code=Solved (Permanently)", "assigned_to=John Doe")
            #expect(resolved.code == 0, "\(resolved.err)")
            #expect(resolved.out.contains("Updated \(id) (Resolved)"))
            let nobody = await cli.run("edit", id, "assigned_to=alice")
            #expect(nobody.code == 1)
            #expect(nobody.err.contains("No user is called 'alice'"), "\(nobody.err)")
            let almost = await cli.run("create", "incident", "short_description=x", "caller_id=abel")
            #expect(almost.code == 1)
            #expect(almost.err.contains("did you mean Abel Tuter (abel.tuter)?"), "\(almost.err)")
            let badState = await cli.run("edit", id, "state=Finished")
            #expect(badState.code == 1)
            #expect(badState.err.contains("New (1)") && badState.err.contains("Resolved (6)"), "\(badState.err)")
            // A field name with a typo is refused before anything is written, with the field meant.
            let typo = await cli.run("create", "incident", "short_descriptoin=x")
            #expect(typo.code == 1)
            #expect(typo.err.contains("incident has no field 'short_descriptoin' (did you mean short_description?)"), "\(typo.err)")
            let staet = await cli.run("edit", id, "staet=2")
            #expect(staet.code == 1)
            #expect(staet.err.contains("incident has no field 'staet' (did you mean state?)"), "\(staet.err)")
            #expect(await cli.run("transition", id, "In Progress", "wrok_notes=x").err.contains("did you mean work_notes?"))
            #expect(await cli.run("show", id).out.contains("Resolved"), "the refused edits changed nothing")
            // A query naming an unknown field is refused instead of listing everything; a valid one still runs.
            let query = await cli.run("records", "incident", "--query", "nosuchfield=3")
            #expect(query.code == 1)
            #expect(query.err.contains("--query: the query cannot run: incident has no field 'nosuchfield'"), "\(query.err)")
            let walked = await cli.run("records", "incident", "--query", "caller_id.nmae=Abel Tuter")
            #expect(walked.err.contains("sys_user has no field 'nmae' (did you mean name?) (in 'caller_id.nmae')"), "\(walked.err)")
            let fine = await cli.run("records", "incident", "--query", "caller_id.name=Abel Tuter^ORDERBYnumber")
            #expect(fine.code == 0, "\(fine.err)")
            #expect(fine.out.contains(id))
            // Nothing at all: the fields a new record needs.
            let empty = await cli.run("create", "incident")
            #expect(empty.code == 1)
            #expect(empty.err.contains("A new incident needs its fields as field=value; required: short_description"), "\(empty.err)")
        }
    }

    @Test("Compass: show --comments N prints the latest notes of a defect")
    func compassNotes() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await compassLogin(cli, base).code == 0)
            #expect(await cli.run("comment", "SAMPL00000002", "first note").code == 0)
            // Journal entries are ordered by their time, to the second.
            try await Task.sleep(for: .milliseconds(1_100))
            #expect(await cli.run("comment", "SAMPL00000002", "second note\nwith two lines").code == 0)
            let shown = await cli.run("show", "SAMPL00000002", "--comments", "1")
            #expect(shown.code == 0, "\(shown.err)")
            #expect(shown.out.contains("by john.doe ====\n  second note\n  with two lines\n"), "\(shown.out)")
            #expect(!shown.out.contains("first note"))
            let both = await cli.run("show", "SAMPL00000002", "--json")
            let notes = try JSONValue.parse(Array(both.out.utf8))["notes"]?.arrayValue ?? []
            #expect(notes.count >= 2)
            #expect(notes.first?["text"]?.stringValue == "second note\nwith two lines")
            #expect(await cli.run("show", "SAMPL00000002", "--comments", "0").out.contains("==== ") == false)
        }
    }
}
