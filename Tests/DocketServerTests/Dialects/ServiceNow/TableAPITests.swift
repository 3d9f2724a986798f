import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Table API")
struct TableAPITests {
    let incident1 = DemoData.id("incident", 1)

    @Test("GET list returns result, X-Total-Count and Link with first/next/last")
    func list() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/now/table/incident?sysparm_limit=5&sysparm_fields=number,short_description")
            #expect(response.status == .ok)
            #expect(response.headers[.contentType] == "application/json;charset=UTF-8")
            #expect(response.headers[.xTotalCount] == "22")
            let results = try response.results
            #expect(results.count == 5)
            #expect(results[0].string("number") == "INC0010001")
            #expect(results[0].objectValue?.map(\.0) == ["number", "short_description"])
            let link = response.headers[.link] ?? ""
            #expect(link.contains("sysparm_offset=0>;rel=\"first\""))
            #expect(link.contains("sysparm_offset=5>;rel=\"next\""))
            #expect(link.contains("sysparm_offset=20>;rel=\"last\""))
            #expect(!link.contains("rel=\"prev\""))
            let page2 = try await client.get("/api/now/table/incident?sysparm_limit=5&sysparm_offset=5&sysparm_fields=number")
            #expect(try page2.results.first?.string("number") == "INC0010006")
            #expect(page2.headers[.link]?.contains("rel=\"prev\"") == true)
        }
    }

    @Test("a reference is written the same way on create and update: a sys_id, a display value, a user name or 'Name (user_name)' store the sys_id; a value naming no record or several is refused with the candidates")
    func referenceValues() async throws {
        try await TestApp.withRouter { client throws in
            let beth = DemoData.userID("beth.anglin")
            let abel = DemoData.userID("abel.tuter")
            let fields = "?sysparm_fields=sys_id,assigned_to,caller_id&sysparm_exclude_reference_link=true"
            for (assigned, caller) in [(beth, "abel.tuter"), ("Beth Anglin", "Abel Tuter"), ("beth.anglin", "Abel Tuter (abel.tuter)")] {
                let created = try await client.send(
                    .post, "/api/now/table/incident" + fields,
                    json: #"{"short_description":"refs","assigned_to":"\#(assigned)","caller_id":"\#(caller)"}"#
                )
                #expect(created.status == .created, "\(assigned)")
                #expect(try created.result.string("assigned_to") == beth && created.result.string("caller_id") == abel)
                let id = try created.result.string("sys_id")
                let updated = try await client.send(
                    .patch, "/api/now/table/incident/\(id)" + fields, json: #"{"assigned_to":"\#(caller)","caller_id":"\#(assigned)"}"#
                )
                #expect(updated.status == .ok, "\(assigned)")
                #expect(try updated.result.string("assigned_to") == abel && updated.result.string("caller_id") == beth)
            }
            let before = try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count
            for (value, detail) in [
                ("alice", "No user is called 'alice'"), ("beth", "No user is called 'beth'; did you mean Beth Anglin (beth.anglin)?"),
                ("0123456789abcdef0123456789abcdef", "No user is called '0123456789abcdef0123456789abcdef'"),
            ] {
                for (method, uri) in [(HTTPRequest.Method.post, "/api/now/table/incident"), (.patch, "/api/now/table/incident/\(incident1)")] {
                    let refused = try await client.send(method, uri, json: #"{"short_description":"refused","assigned_to":"\#(value)"}"#)
                    #expect(refused.status == .badRequest, "\(value)")
                    #expect(refused.errorMessage == "Invalid value for field 'assigned_to'")
                    #expect(try refused.json["error"]?["detail"]?.stringValue == detail)
                }
            }
            // Two users of one name: the name alone is refused with both; the user name picks one.
            let twin = try await client.send(
                .post, "/api/now/table/sys_user", json: #"{"user_name":"beth.twin","first_name":"Beth","last_name":"Anglin","name":"Beth Anglin"}"#,
                headers: .admin
            )
            #expect(twin.status == .created)
            let ambiguous = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"refused","assigned_to":"Beth Anglin"}"#)
            #expect(ambiguous.status == .badRequest)
            #expect(try ambiguous.json["error"]?["detail"]?.stringValue?.contains("Beth Anglin (beth.anglin), Beth Anglin (beth.twin)") == true)
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"ok","assigned_to":"beth.twin"}"#).status == .created)
            #expect(try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count == before + 1)
            #expect(try await client.get("/api/now/table/incident/\(incident1)?sysparm_fields=short_description").result.string("short_description") != "refused")
        }
    }

    @Test("an update may send back a reference to a record deleted since (a form sends every field); a new one must exist")
    func danglingReference() async throws {
        try await TestApp.withRouter { client throws in
            let user = try await client.send(
                .post, "/api/now/table/sys_user", json: #"{"user_name":"leaving","name":"Leaving User"}"#, headers: .admin
            ).result.string("sys_id")
            let incident = try await client.send(
                .post, "/api/now/table/incident", json: #"{"short_description":"dangling","assigned_to":"\#(user)"}"#
            ).result.string("sys_id")
            #expect(try await client.execute(uri: "/api/now/table/sys_user/\(user)", method: .delete, headers: .admin, body: nil).status == .noContent)
            let kept = try await client.send(
                .patch, "/api/now/table/incident/\(incident)", json: #"{"short_description":"still here","assigned_to":"\#(user)"}"#
            )
            #expect(kept.status == .ok)
            let other = try await client.send(
                .patch, "/api/now/table/incident/\(incident)", json: #"{"caller_id":"\#(user)"}"#
            )
            #expect(other.status == .badRequest)
            #expect(other.errorMessage == "Invalid value for field 'caller_id'")
        }
    }

    @Test("a value refused for a field with choices names them; their labels are taken with sysparm_input_display_value")
    func choiceValues() async throws {
        try await TestApp.withRouter { client throws in
            let refused = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"x","state":"Resolved"}"#)
            #expect(refused.status == .badRequest)
            #expect(try refused.json["error"]?["detail"]?.stringValue?.contains("Resolved (6)") == true)
            let labelled = try await client.send(
                .post, "/api/now/table/incident?sysparm_input_display_value=true&sysparm_fields=state,urgency",
                json: #"{"short_description":"x","state":"In Progress","urgency":"1 - High"}"#
            )
            #expect(labelled.status == .created)
            #expect(try labelled.result.string("state") == "2" && labelled.result.string("urgency") == "1")
        }
    }

    @Test("v1, v2 and unversioned paths all serve; v1 answers 404 for an empty match")
    func versions() async throws {
        try await TestApp.withRouter { client throws in
            for prefix in ["/api/now/table", "/api/now/v1/table", "/api/now/v2/table"] {
                #expect(try await client.get("\(prefix)/incident/\(incident1)").status == .ok)
            }
            #expect(try await client.get("/api/now/v2/table/incident?sysparm_query=number=NONE").results.isEmpty)
            #expect(try await client.get("/api/now/v2/table/incident?sysparm_query=number=NONE").status == .ok)
            #expect(try await client.get("/api/now/v1/table/incident?sysparm_query=number=NONE").status == .notFound)
        }
    }

    @Test("sysparm_query filters and orders")
    func query() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get(
                "/api/now/table/incident?sysparm_query=active%3Dtrue%5Epriority%3C%3D2%5EORDERBYDESCnumber&sysparm_fields=number,priority,active"
            )
            let results = try response.results
            #expect(!results.isEmpty)
            #expect(results.allSatisfy { Int($0.string("priority"))! <= 2 && $0.string("active") == "true" })
            let numbers = results.map { $0.string("number") }
            #expect(numbers == numbers.sorted(by: >))
            #expect(response.headers[.xTotalCount] == String(results.count))
        }
    }

    @Test("name-value parameters filter, and accept display values")
    func nameValueFilters() async throws {
        try await TestApp.withRouter { client throws in
            let users = try await client.get("/api/now/v2/table/sys_user?user_name=john.doe&sysparm_fields=user_name,name").results
            #expect(users.count == 1)
            #expect(users.first?.string("name") == "John Doe")
            let byLabel = try await client.get("/api/now/table/incident?state=Closed&sysparm_fields=state").results
            #expect(!byLabel.isEmpty && byLabel.allSatisfy { $0.string("state") == "7" })
            let byName = try await client.get("/api/now/table/incident?assigned_to=beth.anglin&sysparm_fields=number").results
            #expect(byName.count == 7)
        }
    }

    @Test("spaces encoded as + decode to spaces (Python clients)")
    func plusIsSpace() async throws {
        try await TestApp.withRouter { client throws in
            let results = try await client.get("/api/now/table/incident?sysparm_query=short_descriptionLIKEoffice+wifi").results
            #expect(results.map { $0.string("number") } == ["INC0010001"])
        }
    }

    @Test("GET one; a parent table serves a child record with its class")
    func single() async throws {
        try await TestApp.withRouter { client throws in
            let record = try await client.get("/api/now/table/incident/\(incident1)").result
            #expect(record.string("number") == "INC0010001")
            #expect(record.string("comments") == "")
            #expect(record["password"] == nil)
            let task = try await client.get("/api/now/v2/table/task/\(incident1)").result
            #expect(task.string("sys_class_name") == "incident")
            #expect(task["caller_id"] == nil)
            #expect(try await client.get("/api/now/table/problem/\(incident1)").status == .notFound)
        }
    }

    @Test("display value modes shape references, choices and journals as the spec shows")
    func displayValues() async throws {
        try await TestApp.withRouter { client throws in
            let base = "/api/now/table/incident/\(incident1)?sysparm_fields=priority,caller_id,comments,sys_class_name"
            let raw = try await client.get(base).result
            #expect(raw.string("priority") == "3")
            #expect(raw["caller_id"]?.string("value") == DemoData.userID("abel.tuter"))
            #expect(raw["caller_id"]?.string("link").hasSuffix("/api/now/table/sys_user/\(DemoData.userID("abel.tuter"))") == true)
            let display = try await client.get(base + "&sysparm_display_value=true").result
            #expect(display.string("priority") == "3 - Moderate")
            #expect(display["caller_id"]?.string("display_value") == "Abel Tuter")
            #expect(display["caller_id"]?["value"] == nil)
            #expect(display.string("sys_class_name") == "Incident")
            #expect(display.string("comments").contains("(Additional comments)\nThanks for reporting this."))
            let all = try await client.get(base + "&sysparm_display_value=all").result
            #expect(all["priority"] == .object(["display_value": .string("3 - Moderate"), "value": .string("3")]))
            #expect(all["caller_id"]?.objectValue?.map(\.0) == ["display_value", "link", "value"])
            let excluded = try await client.get(base + "&sysparm_display_value=true&sysparm_exclude_reference_link=true").result
            #expect(excluded["caller_id"] == .string("Abel Tuter"))
            let rawExcluded = try await client.get(base + "&sysparm_exclude_reference_link=true").result
            #expect(rawExcluded["caller_id"] == .string(DemoData.userID("abel.tuter")))
        }
    }

    @Test("dot-walked fields come back under their dotted names")
    func dotWalkedFields() async throws {
        try await TestApp.withRouter { client throws in
            let record = try await client.get(
                "/api/now/table/incident/\(incident1)?sysparm_fields=number,caller_id.email,assigned_to.name&sysparm_exclude_reference_link=true"
            ).result
            #expect(record.string("caller_id.email") == "abel.tuter@example.com")
            #expect(record.string("assigned_to.name") == "John Doe")
        }
    }

    @Test("POST creates a record: 201, Location, every field, journal from comments")
    func create() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.send(
                .post, "/api/now/table/incident",
                json: #"{"short_description":"Unable to connect to office wifi","urgency":2,"impact":"2","caller_id":"\#(DemoData.userID("abel.tuter"))","comments":"First note","unknown_field":"ignored"}"#
            )
            #expect(response.status == .created)
            let record = try response.result
            let id = record.string("sys_id")
            #expect(response.headers[.location]?.hasSuffix("/api/now/table/incident/\(id)") == true)
            #expect(record.string("number") == "INC0010023")
            #expect(record.string("priority") == "3")
            #expect(record.string("urgency") == "2")
            #expect(record.string("sys_mod_count") == "0")
            #expect(record["unknown_field"] == nil)
            let journal = try await client.get("/api/now/table/sys_journal_field?sysparm_query=element_id=\(id)").results
            #expect(journal.map { $0.string("value") } == ["First note"])
        }
    }

    @Test("PUT and PATCH update partially and echo the record; X-no-response-body suppresses it")
    func updates() async throws {
        try await TestApp.withRouter { client throws in
            for method in [HTTPRequest.Method.put, .patch] {
                let response = try await client.send(method, "/api/now/table/incident/\(incident1)", json: #"{"urgency":"1"}"#)
                #expect(response.status == .ok)
                #expect(try response.result.string("priority") == "2")
                #expect(try response.result.string("short_description") == "Unable to connect to office wifi")
            }
            var headers = HTTPFields.john
            headers[.xNoResponseBody] = "true"
            let quiet = try await client.send(.patch, "/api/now/table/incident/\(incident1)", json: #"{"urgency":"3"}"#, headers: headers)
            #expect(quiet.status == .ok)
            #expect(quiet.body.readableBytes == 0)
        }
    }

    @Test("DELETE answers 204 and the record is gone")
    func delete() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.execute(uri: "/api/now/table/incident/\(incident1)", method: .delete, headers: .john)
            #expect(response.status == .noContent)
            #expect(response.body.readableBytes == 0)
            #expect(try await client.get("/api/now/table/incident/\(incident1)").status == .notFound)
            let again = try await client.execute(uri: "/api/now/table/incident/\(incident1)", method: .delete, headers: .john)
            #expect(again.status == .notFound)
            #expect(again.errorMessage == "No Record found")
        }
    }

    @Test("sys_journal_field lists a task's entries newest first, like the seed clients ask")
    func journalList() async throws {
        try await TestApp.withRouter { client throws in
            let results = try await client.get(
                "/api/now/v2/table/sys_journal_field?sysparm_query=element_id%3D\(incident1)%5EORDERBYDESCsys_created_on"
            ).results
            #expect(results.count == 2)
            let dates = results.map { $0.string("sys_created_on") }
            #expect(dates == dates.sorted(by: >))
            #expect(results.allSatisfy { $0.string("element_id") == incident1 && $0.string("name") == "incident" })
        }
    }

    @Test("sysparm_no_count and sysparm_suppress_pagination_header drop their headers")
    func headerSwitches() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/now/table/incident?sysparm_no_count=true&sysparm_suppress_pagination_header=true&sysparm_limit=1")
            #expect(response.headers[.xTotalCount] == nil)
            #expect(response.headers[.link] == nil)
            #expect(try response.results.count == 1)
        }
    }

    @Test("sysparm_input_display_value accepts choice labels and reference names")
    func inputDisplayValue() async throws {
        try await TestApp.withRouter { client throws in
            let record = try await client.send(
                .patch, "/api/now/table/incident/\(incident1)?sysparm_input_display_value=true",
                json: #"{"state":"On Hold","assigned_to":"Beth Anglin"}"#
            ).result
            #expect(record.string("state") == "3")
            #expect(record["assigned_to"]?.string("value") == DemoData.userID("beth.anglin"))
        }
    }
}
