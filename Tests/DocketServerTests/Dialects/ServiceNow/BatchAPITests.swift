import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Batch API")
struct BatchAPITests {
    static func base64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    static func decode(_ answer: JSONValue) throws -> JSONValue {
        let body = try #require(Data(base64Encoded: answer.string("body")))
        return try JSONValue.parse(body)
    }

    @Test("sub-requests run as the caller, in order, with base64 bodies in and out (pysnc's shapes)")
    func serviced() async throws {
        try await TestApp.withRouter { client throws in
            let body = """
                {"batch_request_id":"7","rest_requests":[
                  {"id":"get","method":"GET","url":"/api/now/table/incident?sysparm_limit=2&sysparm_fields=number",
                   "headers":[{"name":"Accept","value":"application/json"}]},
                  {"id":"post","method":"POST","url":"/api/now/table/incident?sysparm_fields=sys_id,number",
                   "headers":[{"name":"Content-Type","value":"application/json"}],
                   "body":"\(Self.base64(#"{"short_description":"from a batch"}"#))"},
                  {"id":"missing","method":"GET","url":"/api/now/table/incident/0123456789abcdef0123456789abcdef",
                   "headers":[], "exclude_response_headers":true},
                  {"id":"hidden","method":"GET","url":"/api/now/table/oauth_entity"}
                ]}
                """
            let response = try await client.send(.post, "/api/now/v1/batch", json: body)
            #expect(response.status == .ok)
            let json = try response.json
            #expect(json.string("batch_request_id") == "7")
            #expect(json["unserviced_requests"] == .array([]))
            let answers = try #require(json["serviced_requests"]?.arrayValue)
            #expect(answers.map { $0.string("id") } == ["get", "post", "missing", "hidden"])
            #expect(answers.map { $0["status_code"] } == [.number(200), .number(201), .number(404), .number(200)])
            // Lists are filtered by access rules, as outside a batch: john.doe sees no OAuth clients.
            #expect(try Self.decode(answers[3])["result"] == .array([]))
            #expect(try Self.decode(answers[0])["result"]?.arrayValue?.count == 2)
            let headers = answers[0]["headers"]?.arrayValue ?? []
            #expect(headers.contains { $0.string("name").lowercased() == "x-total-count" })
            #expect(answers[2]["headers"] == nil)
            let created = try Self.decode(answers[1])["result"]
            let id = created?.string("sys_id") ?? ""
            let check = try await client.get("/api/now/table/incident/\(id)?sysparm_fields=short_description,opened_by")
            #expect(try check.result.string("short_description") == "from a batch")
            #expect(try check.result["opened_by"]?.string("value") == DemoData.userID("john.doe"))
        }
    }

    @Test("numeric batch ids come back as strings; credentials inside sub-requests are ignored")
    func identity() async throws {
        try await TestApp.withRouter { client throws in
            let body = """
                {"batch_request_id":3,"rest_requests":[{"id":"1","method":"GET",
                  "url":"/api/now/table/sys_user?sysparm_query=user_name=admin&sysparm_fields=user_name",
                  "headers":[{"name":"Authorization","value":"Basic \(Self.base64("admin:wrong"))"}]}]}
                """
            let json = try await client.send(.post, "/api/now/batch", json: body, headers: .abel).json
            #expect(json.string("batch_request_id") == "3")
            let answer = try #require(json["serviced_requests"]?.arrayValue?.first)
            #expect(answer["status_code"] == .number(200))
        }
    }

    @Test(
        "malformed batches are 400s",
        arguments: [
            "[]", #"{"rest_requests":"x"}"#, #"{"rest_requests":[{"method":"GET","url":"/api/now/table/incident"}]}"#,
            #"{"rest_requests":[{"id":"1","method":"TRACE","url":"/api/now/table/incident"}]}"#,
            #"{"rest_requests":[{"id":"1","method":"GET","url":"http://elsewhere/api"}]}"#,
            #"{"rest_requests":[{"id":"1","method":"POST","url":"/api/now/table/incident","body":"***"}]}"#,
            #"{"rest_requests":[{"id":"1","method":"GET","url":"/api/now/table/incident","headers":[{"name":1}]}]}"#,
            "not json",
        ]
    )
    func malformed(body: String) async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.send(.post, "/api/now/v1/batch", json: body)
            #expect(response.status == .badRequest)
            #expect(try response.json.string("status") == "failure")
        }
    }

    @Test("a batch inside a batch, or a URL outside the REST APIs, is answered 400 in its slot")
    func nested() async throws {
        try await TestApp.withRouter { client throws in
            let body = """
                {"batch_request_id":"n","rest_requests":[
                  {"id":"a","method":"POST","url":"/api/now/v1/batch","body":"\(Self.base64("{}"))"},
                  {"id":"b","method":"GET","url":"/health"}]}
                """
            let answers = try await client.send(.post, "/api/now/v1/batch", json: body).json["serviced_requests"]?.arrayValue
            #expect(answers?.map { $0["status_code"] } == [.number(400), .number(400)])
        }
    }
}
