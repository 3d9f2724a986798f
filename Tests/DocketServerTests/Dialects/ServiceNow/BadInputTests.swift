import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Bad input answers 4xx and changes nothing")
struct BadInputTests {
    /// A fingerprint of the incident table, to prove a request changed no data.
    func snapshot(_ client: any TestClientProtocol) async throws -> String {
        try await client.get("/api/now/table/incident?sysparm_fields=sys_id,short_description,sys_mod_count,priority", .admin).text
    }

    @Test(
        "malformed or hostile query parameters are 400s",
        arguments: [
            "sysparm_query=stateFOO1", "sysparm_query=%3D1", "sysparm_limit=-1", "sysparm_limit=abc",
            "sysparm_limit=99999999999999999999999", "sysparm_limit=10001", "sysparm_offset=-1", "sysparm_offset=x",
            "sysparm_query=priorityBETWEEN1",
        ]
    )
    func badParameters(query: String) async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/now/table/incident?\(query)")
            #expect(response.status == .badRequest)
            #expect(try response.json["status"] == .string("failure"))
        }
    }

    @Test("NUL characters in values, queries and user names are text like any other, on every storage")
    func nulCharacters() async throws {
        try await TestApp.withRouter { client in
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"nul\u0000here"}"#)
            #expect(created.status == .created)
            let found = try await client.get("/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHnul%00&sysparm_fields=sys_id")
            #expect(found.status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_query=number%3DINC%00", .john).status == .ok)
            #expect(try await client.get("/api/now/table/incident", .basic("john.doe\u{0}", "password")).status == .unauthorized)
            let eto = try await client.send(
                .post, "/API/Security.svc/SSOAuthenticate/", json: #"{"security":{"Email":"a\u0000@example.com","Password":"x"}}"#, headers: [:]
            )
            #expect(eto.status == .ok)
        }
    }

    @Test("a negative offset has ServiceNow's exact message")
    func negativeOffset() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/now/table/incident?sysparm_offset=-1")
            #expect(response.errorMessage == "offset is -1")
        }
    }

    @Test("unknown tables are 400 Invalid table on every method")
    func unknownTable() async throws {
        try await TestApp.withRouter { client throws in
            for method in [HTTPRequest.Method.get, .post] {
                let response = try await client.send(method, "/api/now/table/no_such_table", json: method == .post ? "{}" : nil)
                #expect(response.status == .badRequest)
                #expect(response.errorMessage == "Invalid table no_such_table")
            }
            let single = try await client.send(.patch, "/api/now/table/no_such_table/abc", json: "{}")
            #expect(single.errorMessage == "Invalid table no_such_table")
        }
    }

    @Test("unknown fields in queries are ignored and in sysparm_fields left out")
    func unknownFields() async throws {
        try await TestApp.withRouter { client throws in
            let filtered = try await client.get("/api/now/table/incident?sysparm_query=no_such_field=1^number=INC0010001")
            #expect(try filtered.results.map { $0.string("number") } == ["INC0010001"])
            let fields = try await client.get("/api/now/table/incident/\(DemoData.id("incident", 1))?sysparm_fields=number,bogus")
            #expect(try fields.result.objectValue?.map(\.0) == ["number"])
        }
    }

    @Test(
        "invalid bodies are 400s and change nothing",
        arguments: [
            #"{"short_description": "#, "not json", #"{"priority":"high"}"#, #"{"opened_at":"yesterday"}"#,
            #"{"active":"maybe"}"#, #"{"caller_id":"x' OR 1=1--"}"#, #"{"short_description":["a"]}"#, #""text""#,
        ]
    )
    func badBodies(body: String) async throws {
        try await TestApp.withRouter { client throws in
            let before = try await snapshot(client)
            let create = try await client.send(.post, "/api/now/table/incident", json: body)
            #expect(create.status == .badRequest)
            let update = try await client.send(.patch, "/api/now/table/incident/\(DemoData.id("incident", 1))", json: body)
            #expect(update.status == .badRequest)
            #expect(try await snapshot(client) == before)
        }
    }

    @Test("SQL injection attempts are plain values: no match, a 400, or an ignored field — and no change")
    func injection() async throws {
        try await TestApp.withRouter { client throws in
            let before = try await snapshot(client)
            // Values are bound, so these match nothing.
            for query in [
                "sysparm_query=short_description=x'%20OR%201=1--", "short_description=x'%20OR%201=1--",
                "sysparm_query=short_descriptionLIKE%25'%3B%20DROP%20TABLE%20task%3B--",
            ] {
                let response = try await client.get("/api/now/table/incident?\(query)")
                #expect(response.status == .ok)
                #expect(try response.results.isEmpty)
                #expect(response.headers[.xTotalCount] == "0")
            }
            // Names never reach SQL unchecked: a bad sort field is a malformed query, a bad field is ignored.
            let order = try await client.get("/api/now/table/incident?sysparm_query=ORDERBYnumber%3B%20DROP%20TABLE%20task")
            #expect(order.status == .badRequest)
            let fields = try await client.get("/api/now/table/incident?sysparm_fields=number%3B%20DROP%20TABLE%20task")
            #expect(fields.status == .ok)
            #expect(try fields.results.count == 22)
            #expect(try fields.results.allSatisfy { $0 == .object([:]) })
            #expect(try await snapshot(client) == before)
            let record = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"x'); DROP TABLE task;--"}"#)
            #expect(record.status == .created)
            #expect(try record.result.string("short_description") == "x'); DROP TABLE task;--")
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == "23")
        }
    }

    @Test("a body over the configured limit is a 413 in ServiceNow's envelope and creates nothing")
    func oversizedBody() async throws {
        try await TestApp.withRouter { client throws in
            let text = String(repeating: "x", count: 5 * 1024 * 1024)
            let response = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"\#(text)"}"#)
            #expect(response.status == .contentTooLarge)
            #expect(response.errorMessage == "Request body too large")
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == "22")
        }
    }

    @Test("unsupported formats are 406 and 415; unknown API paths 400")
    func negotiation() async throws {
        try await TestApp.withRouter { client throws in
            var xml = HTTPFields.john
            xml[.accept] = "application/xml"
            #expect(try await client.get("/api/now/table/incident", xml).status == .notAcceptable)
            var form = HTTPFields.john
            form[.contentType] = "application/x-www-form-urlencoded"
            let post = try await client.execute(uri: "/api/now/table/incident", method: .post, headers: form, body: .init(string: "a=b"))
            #expect(post.status == .unsupportedMediaType)
            let unknown = try await client.get("/api/x_unknown/v1/whatever")
            #expect(unknown.status == .badRequest)
            #expect(unknown.errorMessage == "Requested URI does not represent any resource")
        }
    }

    @Test("an unknown record is 404 No Record found on every method")
    func unknownRecord() async throws {
        try await TestApp.withRouter { client throws in
            let id = "0123456789abcdef0123456789abcdef"
            #expect(try await client.get("/api/now/table/incident/\(id)").errorMessage == "No Record found")
            #expect(try await client.send(.patch, "/api/now/table/incident/\(id)", json: "{}").status == .notFound)
            #expect(try await client.send(.put, "/api/now/table/incident/\(id)", json: #"{"urgency":"1"}"#).status == .notFound)
        }
    }
}
