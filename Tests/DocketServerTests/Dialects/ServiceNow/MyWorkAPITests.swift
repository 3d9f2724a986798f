import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("My Work API")
struct MyWorkAPITests {
    @Test("tracker/task groups the caller's active tasks by class label, oldest first")
    func tasks() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/x_snc_my_work/v1/tracker/task")
            #expect(response.status == .ok)
            let groups = try response.result.objectValue ?? [:]
            #expect(groups.map(\.0) == ["Incident", "Defect", "Problem", "Change Request"])
            let incidents = groups.elements[0].value.arrayValue ?? []
            #expect(incidents.count == 10)  // resolved (state 6) stays active, as in ServiceNow
            let first = incidents[0]
            #expect(first.objectValue?.map(\.0) == ["number", "short_desc", "sys_id", "link", "snowui", "created"])
            #expect(first.string("number") == "INC0010001")
            #expect(first.string("link").hasSuffix("/api/now/v2/table/incident/\(DemoData.id("incident", 1))"))
            #expect(first.string("snowui").hasSuffix("/incident.do?sys_id=\(DemoData.id("incident", 1))"))
            let created = incidents.map { $0.string("created") }
            #expect(created == created.sorted())
            // Closed incidents assigned to john.doe (INC0010012, INC0010013) are not listed.
            #expect(!incidents.contains { $0.string("number") == "INC0010012" })
        }
    }

    @Test("a caller with nothing assigned gets an empty result object")
    func empty() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/x_snc_my_work/v1/tracker/task", .abel)
            #expect(response.status == .ok)
            #expect(try response.json == .object(["result": .object([:])]))
        }
    }

    @Test("comment adds a work note and answers 201 with the raw data body")
    func comment() async throws {
        try await TestApp.withRouter { client throws in
            let id = DemoData.id("incident", 2)
            let response = try await client.send(
                .post, "/api/x_snc_my_work/v1/tracker/task/\(id)/comment", json: #"{"comment":"Hello, world!"}"#
            )
            #expect(response.status == .created)
            #expect(response.text == #"{"data":"Successfully inserted"}"#)
            let latest = try await client.get(
                "/api/now/v2/table/sys_journal_field?sysparm_query=element_id=\(id)^ORDERBYDESCsys_created_on&sysparm_limit=1"
            ).results.first
            #expect(latest?.string("value") == "Hello, world!")
            #expect(latest?.string("element") == "work_notes")
            #expect(latest?.string("sys_created_by") == "john.doe")
        }
    }

    @Test("comment without text is a 400 with the script's message")
    func missingComment() async throws {
        try await TestApp.withRouter { client throws in
            for body in [#"{}"#, #"{"comments":"wrong key"}"#, #"{"comment":""}"#, #"{"comment":42}"#] {
                let response = try await client.send(
                    .post, "/api/x_snc_my_work/v1/tracker/task/\(DemoData.id("incident", 2))/comment", json: body
                )
                #expect(response.status == .badRequest)
                #expect(response.errorMessage?.hasPrefix("Valid inputs not present in request.") == true)
            }
        }
    }

    @Test("comment on an unknown or hidden task is a 404")
    func unknownTask() async throws {
        try await TestApp.withRouter { client throws in
            let unknown = try await client.send(.post, "/api/x_snc_my_work/v1/tracker/task/0123456789abcdef0123456789abcdef/comment", json: #"{"comment":"x"}"#)
            #expect(unknown.status == .notFound)
            #expect(unknown.errorMessage == "Task with Record Id not found")
            let hidden = try await client.send(
                .post, "/api/x_snc_my_work/v1/tracker/task/\(DemoData.id("incident", 3))/comment", json: #"{"comment":"x"}"#,
                headers: .abel
            )
            #expect(hidden.status == .notFound)
        }
    }

    @Test("the seed client's flow: Basic once, then the session cookie alone")
    func cookieFlow() async throws {
        try await TestApp.withRouter { client throws in
            let login = try await client.get("/api/now/v2/table/sys_user?sysparm_query=user_name%3Djohn.doe")
            #expect(login.status == .ok)
            let setCookie = login.headers[.setCookie] ?? ""
            #expect(setCookie.hasPrefix("JSESSIONID="))
            #expect(setCookie.contains("HttpOnly"))
            let cookie = String(setCookie.split(separator: ";")[0])
            let tasks = try await client.get("/api/x_snc_my_work/v1/tracker/task", [.cookie: cookie])
            #expect(tasks.status == .ok)
            #expect(try tasks.result["Incident"] != nil)
            let posted = try await client.execute(
                uri: "/api/x_snc_my_work/v1/tracker/task/\(DemoData.id("incident", 1))/comment", method: .post,
                headers: [.cookie: cookie, .contentType: "application/json"], body: .init(string: #"{"comment":"via cookie"}"#)
            )
            #expect(posted.status == .created)
            #expect(try await client.get("/api/x_snc_my_work/v1/tracker/task", [.cookie: "JSESSIONID=FORGED"]).status == .unauthorized)
            // /logout.do ends the session and clears the cookie; the cookie no longer works.
            let logout = try await client.execute(uri: "/logout.do", method: .post, headers: [.cookie: cookie], body: nil)
            #expect(logout.status == .ok)
            #expect(logout.headers[.setCookie]?.contains("Max-Age=0") == true)
            #expect(try await client.get("/api/x_snc_my_work/v1/tracker/task", [.cookie: cookie]).status == .unauthorized)
            // Unknown or missing sessions are simply gone.
            #expect(try await client.execute(uri: "/logout.do", method: .get, headers: [:], body: nil).status == .ok)
        }
    }
}
