import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// Team lists through the router: columns, sorting, the filter's menus and chips, the encoded query, grouping with
/// counts, paging, a list saved per user; refusals, access, bad input and concurrent saves.
@Suite("Web UI lists")
struct WebListsTests {
    static func rows(_ page: String) -> [String] {
        page.matches(of: /<tr data-sys-id="[0-9a-f]+"><td><a href="[^"]+">([^<]*)<\/a>/).map { String($0.1) }
    }

    @Test("a table as a list: default columns, a column's sort both ways, grouping with counts that link to their part, paging")
    func list() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let page = try await browser.get("/app/list/incident")
            #expect(page.status == .ok)
            let text = page.text
            for header in ["Number", "Short description", "State", "Priority", "Assigned to", "Assignment group", "Updated"] {
                #expect(text.contains(">\(header)</a></th>"), "\(header)")
            }
            let total = try #require(text.firstMatch(of: /<p class="summary">(\d+) records<\/p>/)).1
            let api = try await client.get("/api/now/table/incident?sysparm_fields=sys_id&sysparm_limit=1000", .john)
            #expect(Int(total) == (try api.results).count)
            // Sorted by number, then the other way.
            let ascending = Self.rows(try await browser.get("/app/list/incident?sort=number").text)
            #expect(ascending == ascending.sorted() && ascending.count == Int(total))
            let sortedPage = try await browser.get("/app/list/incident?sort=number").text
            #expect(sortedPage.contains(#"aria-sort="ascending""#))
            #expect(sortedPage.contains(#"href="/app/list/incident?sort=number&amp;dir=desc""#))
            let descending = Self.rows(try await browser.get("/app/list/incident?sort=number&dir=desc").text)
            #expect(descending == ascending.reversed())
            // Grouped by priority: a heading per group with its count, and a link to each group's own list.
            let grouped = try await browser.get("/app/list/incident?group=priority&columns=number,priority").text
            let counts = grouped.matches(of: /<li><a href="([^"]+)">([^<]+)<\/a> <span class="count">(\d+)<\/span><\/li>/)
            #expect(counts.map { String($0.2) }.contains("1 - Critical"))
            #expect(counts.reduce(0) { $0 + (Int($1.3) ?? 0) } == Int(total))
            #expect(grouped.contains(#"<th colspan="2" scope="colgroup">Priority: 1 - Critical <span class="count">"#))
            let critical = try #require(counts.first { $0.2 == "1 - Critical" })
            let part = try await browser.get(String(critical.1).replacingOccurrences(of: "&amp;", with: "&")).text
            #expect(Self.rows(part).count == Int(critical.3))
            #expect(part.contains("<li>Priority is 1 - Critical <a"))
            // Paging: 50 a page.
            for index in 0..<60 {
                _ = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"Paged \#(index)"}"#, headers: .beth)
            }
            let first = try await browser.get("/app/list/incident?q=short_descriptionSTARTSWITHPaged&sort=number").text
            #expect(first.contains(#"<p class="summary">60 records, page 1 of 2</p>"#))
            #expect(Self.rows(first).count == 50)
            #expect(first.contains(#"href="/app/list/incident?q=short_descriptionSTARTSWITHPaged&amp;sort=number&amp;page=2" rel="next""#))
            let second = try await browser.get("/app/list/incident?q=short_descriptionSTARTSWITHPaged&sort=number&page=2").text
            #expect(Self.rows(second).count == 10)
            #expect(Set(Self.rows(first)).isDisjoint(with: Self.rows(second)))
        }
    }

    @Test("the filter's menus: a choice by its label, a person by name, 'is empty'; chips remove their condition; typos are refused with the field meant")
    func filter() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let added = try await browser.get("/app/list/incident?columns=number&add_field=priority&add_op=%3D&add_value=critical")
            #expect(added.status == .seeOther)
            #expect(added.location == "/app/list/incident?q=priority%3D1&columns=number")
            let person = try await browser.get("/app/list/incident?q=priority%3D1&add_field=assigned_to&add_op=%3D&add_value=John+Doe")
            let john = try #require(try await client.get("/api/now/table/sys_user?user_name=john.doe&sysparm_fields=sys_id", .admin).results.first?["sys_id"]?.stringValue)
            #expect(person.location.hasPrefix("/app/list/incident?q=priority%3D1%5Eassigned_to%3D\(john)"))
            let page = try await browser.get(person.location).text
            #expect(page.contains("<li>Priority is 1 - Critical <a"))
            #expect(page.contains("<li>Assigned to is John Doe <a"))
            #expect(page.contains(#"<input id="list-q" name="q" value="priority=1^assigned_to=\#(john)""#), "the encoded query is shown to edit")
            let chip = try #require(page.firstMatch(of: /<li>Priority is 1 - Critical <a href="([^"]+)"/)).1
            #expect(chip.hasPrefix("/app/list/incident?q=assigned_to%3D\(john)"))
            let empty = try await browser.get("/app/list/incident?add_field=assignment_group&add_op=ISEMPTY&add_value=ignored")
            #expect(empty.location == "/app/list/incident?q=assignment_groupISEMPTY")
            // What the menus cannot make is said above them, and the list stays as it was.
            for (query, message) in [
                ("add_field=staet&add_op=%3D&add_value=1", "Incident has no field staet to filter on."),
                ("add_field=priority&add_op=%3D&add_value=banana", "‘banana’ is not one of the Priority values: 1 - Critical (1)"),
                ("add_field=assigned_to&add_op=%3D&add_value=Nobody+At+All", "No user is called Nobody At All"),
                ("add_field=priority&add_op=BOGUS&add_value=1", "Choose an operator from the list."),
                ("add_field=short_description&add_op=%3D&add_value=a%5Eb", "A value may not hold ^"),
                ("add_field=priority&add_op=%3D&add_value=", "Give a value for Priority"),
            ] {
                let refused = try await browser.get("/app/list/incident?" + query)
                #expect(refused.status == .ok)
                #expect(refused.text.contains(#"<p class="error" role="alert">"#) && refused.text.contains(message), "\(query)")
            }
            // A typed query with a typo: refused with the field meant, and no rows rather than all of them.
            let typo = try await browser.get("/app/list/incident?q=staet%3D2").text
            #expect(typo.contains("That query cannot run: No field &#39;staet&#39; in incident; did you mean state?"))
            #expect(typo.contains("Fix the query to see the list."))
            #expect(Self.rows(typo).isEmpty)
            let malformed = try await browser.get("/app/list/incident?q=priority%3D1%5EORDERBY").text
            #expect(Self.rows(malformed).isEmpty || malformed.contains("That query"))
        }
    }

    @Test("columns chosen, saved as my list (loaded when I open it bare), forgotten; another user's list is theirs alone; CSRF is required")
    func saved() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            let chosen = try await john.get("/app/list/incident?col=number&col=state&col=caller_id&sort=number&dir=desc").text
            #expect(chosen.contains(">Caller</a></th>") && !chosen.contains(">Priority</a></th>"))
            #expect(chosen.contains(#"<input type="checkbox" name="col" value="caller_id" checked>"#))
            // Saving needs the form's token.
            let forged = try await john.post("/app/list/incident/save", [("q", "active=true")], csrf: "forged")
            #expect(forged.status.code == 403 || forged.status.code == 400)
            let saved = try await john.post("/app/list/incident/save", [("q", "active=true"), ("columns", "number,state"), ("sort", "number"), ("dir", "desc")])
            #expect(saved.status == .seeOther)
            #expect(saved.location == "/app/list/incident?q=active%3Dtrue&columns=number%2Cstate&sort=number&dir=desc&saved=1")
            #expect(try await john.get(saved.location).text.contains("Saved: this is your list of Incident from now on."))
            let bare = try await john.get("/app/list/incident").text
            #expect(bare.contains(#"<input id="list-q" name="q" value="active=true""#))
            #expect(bare.contains(">State</a></th>") && !bare.contains(">Priority</a></th>"))
            #expect(try await john.get("/app/lists").text.contains(#"<h2 id="saved-title">Your saved lists</h2>"#))
            // beth's bare list is the default one; she cannot read john's preference through the API either.
            var beth = WebBrowser(client)
            try await beth.signIn("beth.anglin", "password")
            #expect(try await beth.get("/app/list/incident").text.contains(">Priority</a></th>"))
            let theirs = try await client.get("/api/now/table/sys_user_preference?sysparm_fields=name", .beth)
            #expect(try theirs.results.isEmpty)
            // Nor hand it to someone else, or make one in someone else's name.
            let mine = try await client.get("/api/now/table/sys_user_preference?sysparm_fields=sys_id", .john)
            let id = try #require(try mine.results.first?["sys_id"]?.stringValue)
            let bethID = DemoData.userID("beth.anglin")
            let moved = try await client.send(.patch, "/api/now/table/sys_user_preference/\(id)", json: #"{"user":"\#(bethID)"}"#, headers: .john)
            #expect(moved.status == .forbidden, "\(moved.text)")
            let planted = try await client.send(
                .post, "/api/now/table/sys_user_preference", json: #"{"user":"\#(bethID)","name":"docket.list.incident","value":"q=active%3Dfalse"}"#,
                headers: .john
            )
            #expect(planted.status == .forbidden, "\(planted.text)")
            #expect(try await beth.get("/app/list/incident").text.contains(#"<input id="list-q" name="q" value="""#))
            // Forgotten: the bare list is the default again.
            let forgot = try await john.post("/app/list/incident/forget", [])
            #expect(forgot.status == .seeOther)
            #expect(try await john.get("/app/list/incident").text.contains(">Priority</a></th>"))
        }
    }

    @Test("access: a table the caller may not read is not found, rows they may not see are not listed, signed out goes to sign-in")
    func access() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            for table in ["sys_user_password", "oauth_entity", "no_such_table", "..%2Fetc"] {
                let refused = try await john.get("/app/list/\(table)")
                #expect(refused.status == .notFound, "\(table)")
            }
            // john's notifications only, as the engine's rules say.
            let notifications = try await john.get("/app/list/sys_notification?columns=user").text
            #expect(!notifications.contains("Beth Anglin"))
            var nobody = WebBrowser(client)
            let signedOut = try await nobody.get("/app/list/incident")
            #expect(signedOut.status == .seeOther && signedOut.location.hasPrefix("/?next="))
            #expect(try await nobody.get("/app/lists").status == .seeOther)
            let index = try await john.get("/app/lists").text
            #expect(index.contains(#"<a href="/app/list/incident">Incident</a>"#))
            #expect(!index.contains("/app/list/oauth_entity"))
        }
    }

    @Test("bad input never earns a 5xx: huge and hostile parameters, unknown columns, sorts and groups, pages out of range")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            let long = String(repeating: "a", count: 20_000)
            // A page past the end goes to the last page.
            let past = try await john.get("/app/list/incident?sort=number&page=5000")
            #expect(past.status == .seeOther && past.location == "/app/list/incident?sort=number")
            // Grouping by a value each record has alone is not offered, nor taken from the URL.
            let byID = try await john.get("/app/list/incident?group=sys_id").text
            #expect(!byID.contains("scope=\"colgroup\""))
            #expect(!byID.contains(#"<option value="number">"#) || !byID.contains(#"<select id="group" name="group"><option value="">(no grouping)</option><option value="number">"#))
            for query in [
                "q=" + long, "columns=" + String(repeating: "x,", count: 5000), "sort=password&group=password", "page=-5", "page=99999999999999999999",
                "page=abc", "group=description", "col=%00&col=%FF", "q=%3Cscript%3E", "q=priority%3D1%5ENQ%5Estate%3D2", "add_field=" + long,
                "q=sys_idIN" + String(repeating: "a,", count: 3000), "columns=number&sort=number&dir=sideways",
            ] {
                let response = try await john.get("/app/list/incident?" + query)
                #expect(response.status.code < 500, "\(query.prefix(60))")
                #expect(!response.text.contains("<script>"), "\(query.prefix(60))")
            }
            let tooMany = try await john.get("/app/list/incident?" + (0..<30).map { _ in "col=number" }.joined(separator: "&"))
            #expect(tooMany.text.components(separatedBy: ">Number</a></th>").count == 2)
        }
    }

    @Test("concurrent saves of one user's list all answer, the list loads as one of them, and the next save leaves one kept")
    func concurrentSaves() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            try await john.get("/app/list/incident")
            let states = (0..<6).map { "priority=\($0 + 1)" }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for state in states {
                    let browser = john
                    group.addTask {
                        var copy = browser
                        return Int(try await copy.post("/app/list/incident/save", [("q", state), ("columns", "number")]).status.code)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == 303 }, "\(statuses)")
            let bare = try await john.get("/app/list/incident").text
            let shown = try #require(bare.firstMatch(of: /<input id="list-q" name="q" value="([^"]*)"/)).1
            #expect(states.contains(String(shown)))
            // Saves at once may each have kept one; the next save leaves one.
            #expect(try await john.post("/app/list/incident/save", [("q", "priority=2")]).status == .seeOther)
            #expect(try await client.get("/api/now/table/sys_user_preference?sysparm_fields=value", .john).results.map { $0["value"]?.stringValue } == ["q=priority%3D2"])
        }
    }
}
