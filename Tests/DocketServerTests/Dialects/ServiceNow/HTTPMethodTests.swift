import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

@Suite("HEAD and X-HTTP-Method-Override")
struct HTTPMethodTests {
    @Test("HEAD answers GET's status and headers without a body")
    func head() async throws {
        try await TestApp.withRouter { client throws in
            let list = try await client.execute(uri: "/api/now/table/incident?sysparm_limit=2", method: .head, headers: .john, body: nil)
            #expect(list.status == .ok)
            #expect(list.headers[.xTotalCount] == "22")
            #expect(list.body.readableBytes == 0)
            let missing = try await client.execute(
                uri: "/api/now/table/incident/0123456789abcdef0123456789abcdef", method: .head, headers: .john, body: nil
            )
            #expect(missing.status == .notFound)
            let anonymous = try await client.execute(uri: "/api/now/table/incident", method: .head, headers: [:], body: nil)
            #expect(anonymous.status == .unauthorized)
        }
    }

    @Test("a POST with X-HTTP-Method-Override: PATCH or DELETE acts as that method")
    func override() async throws {
        try await TestApp.withRouter { client throws in
            var headers = HTTPFields.json(.john)
            headers[.xHTTPMethodOverride] = "PATCH"
            let patched = try await client.execute(
                uri: "/api/now/table/incident/\(Demo.incident1)?sysparm_fields=short_description", method: .post,
                headers: headers, body: ByteBuffer(string: #"{"short_description":"via override"}"#)
            )
            #expect(patched.status == .ok)
            #expect(try patched.result.string("short_description") == "via override")
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"doomed"}"#)
            let id = try created.result.string("sys_id")
            headers[.xHTTPMethodOverride] = "delete"
            let deleted = try await client.execute(uri: "/api/now/table/incident/\(id)", method: .post, headers: headers, body: nil)
            #expect(deleted.status == .noContent)
            headers[.xHTTPMethodOverride] = "TRACE"
            let ignored = try await client.execute(uri: "/api/now/table/incident/\(id)", method: .post, headers: headers, body: nil)
            // Other methods are not overridden: a POST to a record URI is no resource, as on ServiceNow.
            #expect(ignored.status == .badRequest)
            #expect(ignored.errorMessage == "Requested URI does not represent any resource")
        }
    }
}
