@testable import DocketCLI
import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Testing

/// `docket login --eto` and `docket context` against a live docketd.
@Suite("docket context (ETO)")
struct ContextCommandTests {
    @Test("login --eto keeps tokens only; context lists, chooses site and program, and remembers them")
    func chooseContext() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            let login = await cli.run("login", base, "--user", "john.doe@example.com", "--eto", "--password-stdin", stdin: ["password"])
            #expect(login.code == 0, "\(login.err)")
            #expect(login.out.contains("(ETO)"))
            let stored = try String(contentsOf: cli.directory.appendingPathComponent("credentials.json"), encoding: .utf8)
            #expect(stored.contains("ssoToken") && !stored.contains("password"))
            #expect(await cli.run("whoami").out == "john.doe@example.com on \(base) (ETO)\n")

            let listed = await cli.run("context")
            #expect(listed.code == 0, "\(listed.err)")
            #expect(listed.out.contains("Enterprise  (none chosen)"))
            #expect(listed.out.contains("Docket Outreach"))
            #expect(listed.out.contains("    101  Downtown Drop-in Center"))
            #expect(!listed.out.contains("Harbor"))

            let site = await cli.run("context", "--enterprise", "Docket Outreach", "--site", "101")
            #expect(site.code == 0, "\(site.err)")
            #expect(site.out.contains("Site        101 Downtown Drop-in Center"))
            #expect(site.out.contains("  1003  Winter Response 2019  (disabled)"))
            let disabled = await cli.run("context", "--program", "1003")
            #expect(disabled.code == 1)
            #expect(disabled.err.contains("disabled"))
            #expect(await cli.run("context", "--program", "shelter check-in").code == 0)
            // A later run remembers all of it.
            let json = await cli.run("context", "--json")
            let context = try JSONValue.parse(Array(json.out.utf8))
            #expect(context["program"]?["id"]?.intValue == 1002)
            #expect(context["site"]?["id"]?.intValue == 101)
            #expect(context["enterprise"]?["name"]?.stringValue == "Docket Outreach")
            // Another enterprise's site, and commands that need another login.
            let other = await cli.run("context", "--enterprise", "Docket Outreach", "--site", "201")
            #expect(other.code == 1)
            #expect(other.err.contains("no site '201'"))
            #expect(await cli.run("tasks").err.contains("signed in to ETO"))
            #expect(await cli.run("defects").code == 1)
            #expect(await cli.run("context", "--enterprise", "x").code == 2)
        }
    }

    @Test("a wrong password signs nobody in")
    func wrongPassword() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            let login = await cli.run("login", base, "--user", "john.doe@example.com", "--eto", "--password-stdin", stdin: ["nope"])
            #expect(login.code == 1)
            #expect(login.err.contains("wrong"))
            #expect(await cli.run("context").code == 1)
        }
    }

    @Test("participants search, participant show, touchpoint list and add, in the chosen context")
    func participantsAndTouchPoints() async throws {
        try await withLiveServer { base in
            let cli = CLIHarness()
            #expect(await cli.run("login", base, "--user", "john.doe@example.com", "--eto", "--password-stdin", stdin: ["password"]).code == 0)
            let early = await cli.run("participants", "search", "a")
            #expect(early.code == 1)
            #expect(early.err.contains("NoEnterpriseIDSelected"))
            #expect(await cli.run("context", "--enterprise", "Docket Outreach", "--site", "101", "--program", "1001").code == 0)
            #expect(await cli.run("participants", "search", "lo").out == "5001  Lopez, Maria  born 1984-03-12\n")
            let shown = await cli.run("participant", "show", "5001")
            #expect(shown.out.contains("Name           Maria Lopez"))
            #expect(await cli.run("participant", "show", "7001").code == 1)
            let forms = await cli.run("touchpoint", "list")
            #expect(forms.out.contains("301  Street Outreach Contact"))
            #expect(forms.out.contains("Sleeping location (choice, required): Street, Vehicle, Shelter"))
            let added = await cli.run(
                "touchpoint", "add", "Street Outreach Contact", "--participant", "5001", "Contact notes=Shared a coffee",
                "Sleeping location=Shelter", "3=11/21/2026"
            )
            #expect(added.code == 0, "\(added.err)")
            #expect(added.out.hasPrefix("Recorded response 1"))
            #expect(added.out.hasSuffix("to Street Outreach Contact for Maria Lopez.\n"))
            let missing = await cli.run("touchpoint", "add", "301", "--participant", "5001", "Contact notes=x")
            #expect(missing.code == 1)
            #expect(missing.err.contains("Sleeping location"))
            #expect(await cli.run("touchpoint", "add", "301", "--participant", "5001", "Nope=x").code == 1)
            // The work commands where they apply: show, create and edit participants.
            #expect(await cli.run("show", "5001").out.contains("Title        Maria Lopez"))
            let created = await cli.run("create", "participant", "FirstName=Ana", "LastName=Ruiz")
            #expect(created.out == "Created 10001: Ana Ruiz\n", "\(created.err)")
            #expect(await cli.run("edit", "10001", "ZipCode=94110").out == "Updated 10001: Ana Ruiz\n")
            let defects = await cli.run("defects")
            #expect(defects.code == 1)
            #expect(defects.err.contains("ETO has no list"))
        }
    }
}
