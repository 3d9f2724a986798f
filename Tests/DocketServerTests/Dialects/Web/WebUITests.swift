import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The web UI through the router: signing in and out, every page and form, CSRF, escaping, access and refusals.
@Suite("Web UI")
struct WebUITests {
    /// SAMPL00000002: assigned to john.doe, state Assigned.
    static let defect2 = DemoData.id("defect", 2)

    @Test("ServiceNow's page links (the My Work API's snowui) open the item in the web UI; lists and new forms too")
    func classicLinks() async throws {
        try await TestApp.withRouter { client in
            let tasks = try await client.get("/api/x_snc_my_work/v1/tracker/task", .john)
            let link = try #require(tasks.json["result"]?["Incident"]?.arrayValue?.first?["snowui"]?.stringValue)
            let path = String(link.drop { $0 != "/" }.dropFirst(2).drop { $0 != "/" })
            #expect(path.hasPrefix("/incident.do?sys_id="), "\(link)")
            // Signed out: the redirect to the item, which then asks to sign in and comes back to it.
            let first = try await client.get(path, [:])
            #expect(first.status == .seeOther)
            #expect(first.location.hasPrefix("/app/item/"), "\(first.location)")
            let signIn = try await client.get(first.location, [:])
            #expect(signIn.location.hasPrefix("/?next=%2Fapp%2Fitem%2F") || signIn.location.hasPrefix("/?next=/app/item/"), "\(signIn.location)")
            var browser = WebBrowser(client)
            try await browser.signIn()
            let item = try await browser.get(first.location)
            #expect(item.status == .ok)
            #expect(try await client.get("/incident.do", [:]).location == "/app/new/incident")
            #expect(try await client.get("/incident_list.do?sysparm_query=active=true", [:]).location == "/app/work")
            #expect(try await client.get("/no_such_table.do?sys_id=x", [:]).status == .notFound)
            // The root's own .do paths are untouched.
            #expect(try await client.execute(uri: "/oauth_token.do", method: .post, headers: [:], body: nil).status != .seeOther)
        }
    }

    @Test("behind a TLS proxy (an https public URL) session cookies are Secure; over plain HTTP they are not", arguments: [true, false])
    func secureCookies(behindTLS: Bool) async throws {
        try await TestApp.withRouter(configure: { if behindTLS { $0.publicURL = "https://docket.example.com" } }) { client in
            var browser = WebBrowser(client)
            let signedIn = try await browser.signIn()
            let web = try #require(WebBrowser.setCookies(signedIn)[WebSessions.cookie])
            #expect(web.contains("Secure") == behindTLS, "\(web)")
            let api = try await client.get("/api/now/table/incident?sysparm_limit=1", .john)
            let session = try #require(WebBrowser.setCookies(api)["JSESSIONID"])
            #expect(session.contains("Secure") == behindTLS, "\(session)")
        }
    }

    @Test("GET / is the sign-in page; signing in sets an HttpOnly, SameSite=Strict cookie; sign-out ends the session")
    func signInAndOut() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            let page = try await browser.get("/")
            #expect(page.status == .ok)
            #expect(page.text.contains("Sign in to Docket"))
            #expect(page.headers[.contentSecurityPolicy]?.contains("script-src 'self'") == true)
            let signedIn = try await browser.signIn()
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.location == "/app/work")
            let cookie = WebBrowser.setCookies(signedIn)[WebSessions.cookie] ?? ""
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && !cookie.contains("Secure"))
            let work = try await browser.get("/app/work")
            #expect(work.status == .ok)
            #expect(work.text.contains("John Doe"))
            // Signed in, / goes to My work.
            #expect(try await browser.get("/").location == "/app/work")
            // The APIs do not take the web cookie.
            let api = try await client.execute(uri: "/api/now/table/incident", method: .get, headers: browser.cookieHeader, body: nil)
            #expect(api.status == .unauthorized)
            // A second browser has a session of its own: signing out here leaves it signed in.
            var laptop = WebBrowser(client)
            try await laptop.signIn()
            #expect(laptop.cookies[WebSessions.cookie] != browser.cookies[WebSessions.cookie])
            let out = try await browser.post("/app/logout", [])
            #expect(out.status == .seeOther && out.location == "/")
            #expect(browser.cookies[WebSessions.cookie] == nil)
            let after = try await browser.get("/app/work")
            #expect(after.status == .seeOther)
            #expect(after.location == "/?next=/app/work")
            #expect(try await laptop.get("/app/work").status == .ok)
        }
    }

    @Test("a wrong password, a locked account and a flood of failures each get a clear message")
    func signInRefusals() async throws {
        try await TestApp.withRouter(configure: {
            $0.loginThrottle.firstDelay = .seconds(30)
            $0.loginThrottle.throttledAnswerDelay = .zero
        }) { client in
            var browser = WebBrowser(client)
            let wrong = try await browser.signIn("beth.anglin", "wrong")
            #expect(wrong.status == .unauthorized)
            #expect(wrong.text.contains("The user name or password is not right"))
            #expect(wrong.text.contains(#"value="beth.anglin""#))
            // An administrator locks beth; her right password now says so (a wrong one still says only "not right").
            let lock = try await client.send(.patch, "/api/now/table/sys_user/\(DemoData.userID("beth.anglin"))", json: #"{"locked_out":"true"}"#, headers: .admin)
            #expect(lock.status == .ok)
            let locked = try await browser.signIn("beth.anglin", "password")
            #expect(locked.status == .forbidden)
            #expect(locked.text.contains("This account is locked"))
            var flood = WebBrowser(client)
            var last: TestResponse? = nil
            for _ in 0..<7 { last = try await flood.signIn("john.doe", "wrong") }
            #expect(last?.status == .tooManyRequests)
            #expect(last?.text.contains("Too many failed attempts") == true)
            #expect(last?.headers[.retryAfter] != nil)
            // The sign-in form without its login cookie token is refused.
            var stranger = WebBrowser(client)
            try await stranger.get("/")
            let forged = try await stranger.post("/app/login", [("user_name", "john.doe"), ("password", "password")], csrf: "forged")
            #expect(forged.status == .forbidden)
            #expect(stranger.cookies[WebSessions.cookie] == nil)
        }
    }

    @Test("My work groups active items by type with counts; opened by me, plain-word and encoded searches, paging")
    func myWork() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let work = try await browser.get("/app/work").text
            for group in ["Incident", "Defect", "Change Request"] { #expect(work.contains(">\(group) <span class=\"count\">")) }
            #expect(work.contains("SAMPL00000002"))
            #expect(work.contains("Defect list does not refresh on pull"))
            #expect(work.contains(#"data-live-table="task""#))
            let opened = try await browser.get("/app/work?view=opened").text
            #expect(opened.contains(#"aria-current="page">Opened by me"#))
            let words = try await browser.get("/app/work?q=refresh+pull").text
            #expect(words.contains("SAMPL00000002"))
            #expect(!words.contains("SAMPL00000001"))
            let encoded = try await browser.get("/app/work?q=" + WebBrowser.escape("number=SAMPL00000001")).text
            #expect(encoded.contains("SAMPL00000001") && !encoded.contains("SAMPL00000002"))
            let bad = try await browser.get("/app/work?q=" + WebBrowser.escape("priority=1^ORDERBY"))
            #expect(bad.status == .ok)
            #expect(bad.text.contains("That search is not a valid encoded query"))
            // A typo is refused with the field meant, not dropped (which would list everything as if it matched).
            let typo = try await browser.get("/app/work?q=" + WebBrowser.escape("staet=2"))
            #expect(typo.status == .ok)
            #expect(typo.text.contains("That search cannot run: No field &#39;staet&#39; in") || typo.text.contains("That search cannot run: No field 'staet' in"), "\(typo.text.prefix(3000))")
            #expect(typo.text.contains("did you mean state?"))
            let far = try await browser.get("/app/work?page=999999999999999999999")
            #expect(far.status == .ok)
            #expect(far.text.contains("20 active items"), "a page past the end shows the summary and no rows")
            // 60 more incidents for john: two pages.
            for index in 0..<60 {
                _ = try await client.send(
                    .post, "/api/now/table/incident",
                    json: #"{"short_description":"Paging \#(index)","assigned_to":"\#(DemoData.userID("john.doe"))"}"#
                )
            }
            let first = try await browser.get("/app/work").text
            #expect(first.contains("Page 1 of 2"))
            #expect(first.contains(#"rel="next""#))
            let second = try await browser.get("/app/work?view=assigned&page=2").text
            #expect(second.contains("Page 2 of 2"))
        }
    }

    @Test("the item page shows fields, actions, comments and attachments; comments and work notes are added")
    func itemAndComments() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let page = try await browser.get("/app/item/defect/\(Self.defect2)")
            #expect(page.status == .ok)
            let text = page.text
            #expect(text.contains("SAMPL00000002"))
            #expect(text.contains("<dt>State</dt><dd>Assigned</dd>"))
            #expect(text.contains("/action/Resolve\">Resolve</a>"))
            #expect(!text.contains("/action/Close\""), "Close is not legal from Assigned")
            #expect(text.contains(#"name="sys_mod_count""#))
            let comment = try await browser.post("/app/item/defect/\(Self.defect2)/comment", [("text", "Seen on iOS 18"), ("element", "comments")])
            #expect(comment.status == .seeOther)
            let note = try await browser.post("/app/item/defect/\(Self.defect2)/comment", [("text", "Internal note"), ("element", "work_notes")])
            #expect(note.status == .seeOther)
            let after = try await browser.get("/app/item/defect/\(Self.defect2)").text
            #expect(after.contains("Seen on iOS 18") && after.contains("Internal note") && after.contains("Work note"))
            let empty = try await browser.post("/app/item/defect/\(Self.defect2)/comment", [("text", "  "), ("element", "comments")])
            #expect(empty.status == .badRequest)
            // Attachments: upload, list, download as an attachment.
            let upload = try await browser.upload("/app/item/defect/\(Self.defect2)/attachments", fileName: "log.txt", contents: "crash log")
            #expect(upload.status == .seeOther)
            let listed = try await browser.get("/app/item/defect/\(Self.defect2)").text
            #expect(listed.contains(">log.txt</a>"))
            let link = listed.range(of: #"href="/app/attachment/"#).map { String(listed[$0.upperBound...].prefix(32)) } ?? ""
            let download = try await browser.get("/app/attachment/\(link)")
            #expect(download.status == .ok)
            #expect(download.text == "crash log")
            #expect(download.headers[.contentDisposition]?.hasPrefix("attachment;") == true)
        }
    }

    @Test("hostile record text renders as text")
    func escaping() async throws {
        try await TestApp.withRouter { client in
            let created = try await client.send(
                .post, "/api/now/table/incident",
                json: #"{"short_description":"<script>alert(1)</script>","assigned_to":"\#(DemoData.userID("john.doe"))","description":"\"><img src=x onerror=alert(2)>"}"#
            )
            let sysID = try created.result.string("sys_id")
            var browser = WebBrowser(client)
            try await browser.signIn()
            for page in [try await browser.get("/app/work").text, try await browser.get("/app/item/incident/\(sysID)").text] {
                #expect(!page.contains("<script>alert(1)</script>"))
                #expect(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
                #expect(!page.contains("<img src=x"))
            }
        }
    }

    @Test("an administrator sees a default notification rule in the web UI and deactivates it; john may not change it")
    func notificationRules() async throws {
        try await TestApp.withRouter { client in
            let path = "/app/item/sysevent_email_action/\(NotificationSchema.defaultRuleID("state"))"
            var admin = WebBrowser(client)
            try await admin.signIn("admin", "admin")
            let page = try await admin.get(path)
            #expect(page.status == .ok)
            #expect(page.text.contains("State of your item changed"))
            let saved = try await admin.post(path + "/edit", [("sys_mod_count", "0"), ("active", "false")])
            #expect(saved.status == .seeOther, "\(saved.text.prefix(2000))")
            let rule = try await client.get("/api/now/table/sysevent_email_action/\(NotificationSchema.defaultRuleID("state"))", .admin)
            #expect(try rule.result.string("active") == "false")
            var john = WebBrowser(client)
            try await john.signIn()
            let refused = try await john.post(path + "/edit", [("sys_mod_count", "1"), ("active", "true")])
            #expect(refused.status.code >= 400 && refused.status.code < 500)
        }
    }

    @Test("edit saves changes, refuses a stale save with who changed it, and shows the engine's messages by the fields")
    func editing() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let path = "/app/item/defect/\(Self.defect2)"
            try await browser.get(path)
            let saved = try await browser.post(path + "/edit", [("sys_mod_count", "0"), ("priority", "1"), ("assigned_to", "John Doe")])
            #expect(saved.status == .seeOther)
            // The page it comes back to says the save worked.
            #expect(saved.location == path + "?saved=1")
            #expect(try await browser.get(saved.location).text.contains(#"<p class="flash" role="status">Your changes were saved.</p>"#))
            #expect(try await browser.get(path).text.contains("Your changes were saved.") == false)
            #expect(try await browser.get(path).text.contains("<dt>Priority</dt><dd>1-Resolve Immediately</dd>"))
            // beth changes it through the API; john's form still says sys_mod_count 1.
            let beth = try await client.send(.patch, "/api/now/table/defect/\(Self.defect2)", json: #"{"priority":"4"}"#, headers: .beth)
            #expect(beth.status == .ok)
            let stale = try await browser.post(path + "/edit", [("sys_mod_count", "1"), ("priority", "2")])
            #expect(stale.status == .conflict)
            #expect(stale.text.contains("beth.anglin changed this item after you opened it"))
            #expect(stale.text.contains(#"<option value="2" selected>"#), "the user's value stays in the form")
            // Emptying a mandatory field: the message sits next to it.
            let invalid = try await browser.post(path + "/edit", [("sys_mod_count", "2"), ("short_description", "")])
            #expect(invalid.status == .badRequest)
            #expect(invalid.text.contains(#"<p class="field-error" id="m-short_description">Required"#))
            let unknown = try await browser.post(path + "/edit", [("sys_mod_count", "2"), ("assigned_to", "Nobody At All")])
            #expect(unknown.status == .badRequest)
            #expect(unknown.text.contains("No user is called Nobody At All"))
        }
    }

    @Test("a state change runs only legal actions and reports the missing mandatory field; delete asks first")
    func actionsAndDelete() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let path = "/app/item/defect/\(Self.defect2)"
            let form = try await browser.get(path + "/action/Resolve")
            #expect(form.status == .ok)
            #expect(form.text.contains(#"Resolution <abbr class="req""#))
            let missing = try await browser.post(path + "/action/Resolve", [("sys_mod_count", "0"), ("resolution", "")])
            #expect(missing.status == .badRequest)
            #expect(missing.text.contains("Mandatory fields are empty: Resolution (Resolve)"))
            #expect(missing.text.contains(#"id="m-resolution">Required for Resolve"#))
            let resolved = try await browser.post(path + "/action/Resolve", [("sys_mod_count", "0"), ("resolution", "Fixed")])
            #expect(resolved.status == .seeOther)
            #expect(try await browser.get(path).text.contains("<dt>State</dt><dd>Resolved</dd>"))
            // Not legal now (Resolved → Assign) and unknown actions.
            #expect(try await browser.post(path + "/action/Assign", [("sys_mod_count", "1")]).status == .badRequest)
            #expect(try await browser.get(path + "/action/Fly").status == .notFound)
            // john (itil) may delete a defect: confirmation page, then the delete.
            let confirm = try await browser.get(path + "/delete")
            #expect(confirm.text.contains("This cannot be undone"))
            let deleted = try await browser.post(path + "/delete", [])
            #expect(deleted.status == .seeOther)
            #expect(deleted.location.hasPrefix("/app/work?deleted=SAMPL00000002"))
            #expect(try await browser.get(path).status == .notFound)
        }
    }

    @Test("create forms offer choices and resolve typed references; refusals keep the input")
    func create() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let form = try await browser.get("/app/new/defect")
            #expect(form.status == .ok)
            #expect(form.text.contains(#"<option value="2">2-Major</option>"#))
            #expect(form.text.contains(#"data-lookup="sys_user""#))
            let lookup = try await browser.get("/app/lookup/sys_user?q=beth")
            #expect(try lookup.json.arrayValue?.first?.string("label") == "Beth Anglin (beth.anglin)")
            let missing = try await browser.post("/app/new/defect", [("short_description", " "), ("description", "Crash on save")])
            #expect(missing.status == .badRequest)
            #expect(missing.text.contains(#"id="m-short_description">Required"#))
            #expect(missing.text.contains(">Crash on save</textarea>"))
            let created = try await browser.post(
                "/app/new/defect", [("short_description", "Crash on save"), ("severity", "2"), ("assigned_to", "Beth Anglin (beth.anglin)")]
            )
            #expect(created.status == .seeOther)
            let page = try await browser.get(created.location).text
            #expect(page.contains("<dt>Assigned to</dt><dd>Beth Anglin</dd>"))
            #expect(page.contains("<dt>State</dt><dd>Submitted</dd>"))
            let incident = try await browser.post("/app/new/incident", [("short_description", "Printer jam"), ("urgency", "2")])
            #expect(incident.status == .seeOther && incident.location.hasPrefix("/app/item/incident/"))
            #expect(try await browser.get("/app/new/sys_nothing").status == .notFound)
        }
    }

    @Test("a create form offers the fields a person fills in, not those set later or worked out (reopen count, resolved by, priority)")
    func createFields() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let incident = try await browser.get("/app/new/incident").text
            for wanted in ["short_description", "description", "caller_id", "urgency", "impact", "assigned_to", "category"] {
                #expect(incident.contains(#"id="f-\#(wanted)""#), "\(wanted)")
            }
            for unwanted in ["reopen_count", "resolved_by", "resolved_at", "close_code", "incident_state", "priority", "opened_at", "hold_reason"] {
                #expect(!incident.contains(#"id="f-\#(unwanted)""#), "\(unwanted)")
            }
            // A defect's priority is chosen by people (Compass), and its submit action's mandatory fields stay.
            let defect = try await browser.get("/app/new/defect").text
            #expect(defect.contains(#"id="f-severity""#))
            #expect(!defect.contains(#"id="f-resolution""#))
        }
    }

    @Test("an item's actions and its state come before its fields, Delete after them; people are named by full name, also for the last change")
    func itemLayout() async throws {
        try await TestApp.withRouter { client in
            let changed = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident1)", json: #"{"description":"changed by beth"}"#, headers: .beth
            )
            #expect(changed.status == .ok)
            var browser = WebBrowser(client)
            try await browser.signIn()
            let page = try await browser.get("/app/item/incident/\(Demo.incident1)").text
            let actions = try #require(page.range(of: #"id="actions""#))
            let fields = try #require(page.range(of: #"id="fields""#))
            #expect(actions.lowerBound < fields.lowerBound)
            #expect(page.contains("<dt>Updated by</dt><dd>Beth Anglin</dd>"), "\(page)")
            #expect(!page.contains(">beth.anglin<"))
            // An incident's state (a field, no workflow's actions) is changed at the top, not only inside Edit.
            let stateForm = try #require(page.range(of: #"<form method="post" action="/app/item/incident/\#(Demo.incident1)/edit" class="state-change">"#))
            #expect(stateForm.lowerBound < fields.lowerBound)
            #expect(page.contains(#"<select id="state-now" name="state"><option value="1">New</option><option value="2" selected>In Progress</option>"#))
            let modCount = try #require(page.firstMatch(of: /class="state-change">\s*<input type="hidden" name="csrf" value="[^"]*">\s*<input type="hidden" name="sys_mod_count" value="(\d+)">/)).1
            let moved = try await browser.post("/app/item/incident/\(Demo.incident1)/edit", [("sys_mod_count", String(modCount)), ("state", "3")])
            #expect(moved.status == .seeOther)
            let after = try await browser.get(moved.location).text
            #expect(after.contains("<dt>State</dt><dd>On Hold</dd>"))
            #expect(after.contains(#"<dt>Description</dt><dd class="wide">changed by beth</dd>"#), "only the state was written")
            // Delete sits apart, after the details and the activity, never beside the everyday actions.
            let defect = try await browser.get("/app/item/defect/\(Self.defect2)").text
            #expect(!defect.contains("state-change"), "a defect's state moves by its workflow's actions")
            let defectFields = try #require(defect.range(of: #"id="fields""#))
            let delete = try #require(defect.range(of: #"<a class="button danger" href="/app/item/defect/\#(Self.defect2)/delete">Delete…</a>"#))
            #expect(delete.lowerBound > defectFields.lowerBound)
            #expect(try #require(defect.range(of: #"id="journal""#)).lowerBound < delete.lowerBound)
            let actionsSection = defect[try #require(defect.range(of: #"id="actions""#)).lowerBound..<defectFields.lowerBound]
            #expect(!actionsSection.contains("/delete"))
        }
    }

    @Test("every form refuses a missing or foreign CSRF token, and changes nothing")
    func csrf() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            var other = WebBrowser(client)
            try await other.signIn("beth.anglin", "password")
            try await other.get("/app/work")
            let path = "/app/item/defect/\(Self.defect2)"
            let forms: [(String, [(String, String)])] = [
                (path + "/comment", [("text", "forged"), ("element", "comments")]),
                (path + "/edit", [("priority", "1")]),
                (path + "/action/Resolve", [("resolution", "Fixed")]),
                (path + "/delete", []),
                ("/app/new/incident", [("short_description", "forged")]),
                ("/app/logout", []),
            ]
            for (uri, fields) in forms {
                for token in ["", "forged", other.csrf] {
                    let response = try await browser.post(uri, fields, csrf: token)
                    #expect(response.status == .forbidden, "\(uri) with token '\(token)'")
                    #expect(response.text.contains("This form has expired"))
                }
            }
            let upload = try await browser.upload(path + "/attachments", fileName: "x.txt", contents: "x", csrf: "forged")
            #expect(upload.status == .forbidden)
            let page = try await browser.get(path).text
            #expect(!page.contains("forged") && page.contains("<dt>State</dt><dd>Assigned</dd>") && !page.contains(">x.txt<"))
            #expect(try await browser.get("/app/work").status == .ok, "still signed in")
        }
    }

    @Test("access: records others may not read are not found; signed-out requests go to sign-in or get 401")
    func access() async throws {
        try await TestApp.withRouter { client in
            var abel = WebBrowser(client)
            try await abel.signIn("abel.tuter", "password")
            // INC0010003: abel is not involved.
            let hidden = try await abel.get("/app/item/incident/\(Demo.incident3)")
            #expect(hidden.status == .notFound)
            #expect(hidden.text.contains("does not exist, or you may not see it"))
            #expect(try await abel.get("/app/item/nosuchtable/\(Demo.incident3)").status == .notFound)
            #expect(try await abel.get("/app/item/incident/" + String(repeating: "a", count: 500)).status == .notFound)
            var nobody = WebBrowser(client)
            #expect(try await nobody.get("/app/item/incident/\(Demo.incident1)").location == "/?next=/app/item/incident/\(Demo.incident1)")
            #expect(try await nobody.post("/app/new/incident", [("short_description", "x")]).status == .unauthorized)
            #expect(try await nobody.get("/app/events?table=task").status == .unauthorized)
            #expect(try await nobody.get("/app/lookup/sys_user?q=a").status == .unauthorized)
            // Unknown pages are pages too; an off-site next is ignored.
            var john = WebBrowser(client)
            try await john.get("/")
            let offsite = try await john.post(
                "/app/login", [("user_name", "john.doe"), ("password", "password"), ("next", "//evil.example/")],
                csrf: john.cookies[WebSessions.loginCookie] ?? ""
            )
            #expect(offsite.location == "/app/work")
            let missing = try await john.get("/app/nothing-here")
            #expect(missing.status == .notFound)
            #expect(missing.headers[.contentType]?.hasPrefix("text/html") == true)
        }
    }

    @Test("assets are served by docketd with cache headers and validators")
    func assets() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            let page = try await browser.get("/").text
            let version = page.range(of: "app.css?v=").map { String(page[$0.upperBound...].prefix { $0 != "\"" }) } ?? ""
            #expect(!version.isEmpty)
            let css = try await browser.get("/app/assets/app.css?v=\(version)")
            #expect(css.status == .ok)
            #expect(css.headers[.contentType] == "text/css; charset=utf-8")
            #expect(css.headers[.cacheControl]?.contains("max-age=31536000") == true)
            let etag = css.headers[.eTag] ?? ""
            #expect(try await browser.get("/app/assets/app.css", headers: [.ifNoneMatch: etag]).status == .notModified)
            #expect(try await browser.get("/app/assets/app.js").headers[.contentType] == "text/javascript; charset=utf-8")
            #expect(try await browser.get("/app/assets/../Package.swift").status == .notFound)
            // No page names anything outside docketd.
            #expect(!page.contains("http://") && !page.contains("https://"))
        }
    }

    @Test("bad input never earns a 5xx: malformed forms, huge values, wrong content types")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let path = "/app/item/defect/\(Self.defect2)"
            var headers = browser.cookieHeader
            headers[.contentType] = "application/x-www-form-urlencoded"
            for body in ["%", "csrf=%ZZ&text=%", "&&&==&", String(repeating: "a=b&", count: 5000)] {
                let response = try await client.execute(uri: path + "/comment", method: .post, headers: headers, body: ByteBuffer(string: body))
                #expect(response.status.code < 500, "\(body.prefix(20))")
            }
            headers[.contentType] = "application/json"
            let json = try await client.execute(uri: path + "/comment", method: .post, headers: headers, body: ByteBuffer(string: "{}"))
            #expect(json.status == .unsupportedMediaType)
            headers[.contentType] = "multipart/form-data"
            let noBoundary = try await client.execute(uri: path + "/attachments", method: .post, headers: headers, body: ByteBuffer(string: "x"))
            #expect(noBoundary.status == .badRequest)
            let long = try await browser.post(path + "/edit", [("sys_mod_count", "0"), ("short_description", String(repeating: "x", count: 100_000))])
            #expect(long.status.code < 500)
            let weird = try await browser.post(path + "/edit", [("sys_mod_count", "99999999999999999999999"), ("priority", "1")])
            #expect(weird.status.code < 500)
        }
    }

    @Test("concurrent comments all land; concurrent saves from one read: one wins, the others are told")
    func concurrency() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            try await browser.get("/app/item/defect/\(Self.defect2)")
            let snapshot = browser
            let path = "/app/item/defect/\(Self.defect2)"
            let comments = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        var copy = snapshot
                        return try await copy.post(path + "/comment", [("text", "parallel \(index)"), ("element", "comments")]).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(comments.allSatisfy { $0 == .seeOther })
            let page = try await browser.get(path).text
            for index in 0..<8 { #expect(page.contains("parallel \(index)")) }
            let saves = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for priority in [1, 2, 4] {
                    group.addTask {
                        var copy = snapshot
                        return try await copy.post(path + "/edit", [("sys_mod_count", "8"), ("priority", "\(priority)")]).status
                    }
                }
                return try await group.reduce(into: [HTTPResponse.Status]()) { $0.append($1) }
            }
            #expect(saves.filter { $0 == .seeOther }.count == 1)
            #expect(saves.filter { $0 == .conflict }.count == 2)
        }
    }
}
