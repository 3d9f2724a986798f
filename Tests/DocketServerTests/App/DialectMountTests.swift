import DocketModel
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// Each dialect answers everything below its mount point itself, in its own words and after its own
/// authentication — including paths and methods no route of it takes.
@Suite("Dialect mounts")
struct DialectMountTests {
    @Test("below /api, ServiceNow authenticates first, then answers unknown paths and methods in its envelope")
    func serviceNowOwnsAPI() async throws {
        try await TestApp.withRouter { client throws in
            for (method, uri) in [
                (HTTPRequest.Method.get, "/api/x_unknown/v1/whatever"), (.put, "/api/now/table/incident"),
                (.options, "/api/now/table/incident"), (.delete, "/api/now/stats/incident"), (.get, "/api"),
            ] {
                let anonymous = try await client.execute(uri: uri, method: method, headers: .json([:]), body: nil)
                #expect(anonymous.status == .unauthorized, "\(method) \(uri)")
                #expect(anonymous.errorMessage == "User is not authenticated", "\(method) \(uri)")
                #expect(anonymous.headers[.xIsLoggedIn] == "false")
                let known = try await client.execute(uri: uri, method: method, headers: .json(.john), body: nil)
                #expect(known.status == .badRequest, "\(method) \(uri)")
                #expect(known.errorMessage == "Requested URI does not represent any resource", "\(method) \(uri)")
                #expect(known.headers[.xIsLoggedIn] == "true")
            }
        }
    }

    @Test("/graphql answers every failure in GraphQL's error shape, unknown methods and paths included")
    func dataSyncOwnsGraphQL() async throws {
        try await TestApp.withRouter { client throws in
            let anonymous = try await client.execute(uri: "/graphql", method: .put, headers: [:], body: nil)
            #expect(anonymous.status == .unauthorized)
            #expect(try anonymous.json["errors"]?[0]?["extensions"]?["code"]?.stringValue == "UNAUTHENTICATED")
            let put = try await client.execute(uri: "/graphql", method: .put, headers: .john, body: nil)
            #expect(put.status == .methodNotAllowed)
            #expect(put.headers[.allow] == "GET, POST")
            #expect(try put.json["errors"]?[0]?["extensions"]?["code"]?.stringValue == "METHOD_NOT_ALLOWED")
            let below = try await client.get("/graphql/schema", .john)
            #expect(below.status == .notFound)
            #expect(try below.json["errors"]?[0]?["extensions"]?["code"]?.stringValue == "NOT_FOUND")
            // The ServiceNow envelope and its headers stay out of it.
            #expect(below.headers[.xIsLoggedIn] == nil)
        }
    }

    @Test("paths that only begin like a mount point belong to nobody: a plain 404")
    func prefixesAreWholeSegments() async throws {
        try await TestApp.withRouter { client throws in
            for uri in ["/graphqlx", "/apix/now/table/incident", "/nothing"] {
                let response = try await client.get(uri, [:])
                #expect(response.status == .notFound, "\(uri)")
                #expect(response.headers[.xIsLoggedIn] == nil, "\(uri)")
            }
            #expect(try await client.get("/health", [:]).status == .ok)
        }
    }

    @Test("X-HTTP-Method-Override is ServiceNow's: it does not turn a POST to /graphql into another method")
    func methodOverrideStaysInServiceNow() async throws {
        try await TestApp.withRouter { client throws in
            var headers = HTTPFields.json(.john)
            headers[.xHTTPMethodOverride] = "DELETE"
            let response = try await client.execute(
                uri: "/graphql", method: .post, headers: headers, body: ByteBuffer(string: #"{"query":"{ allTasks { id } }"}"#)
            )
            #expect(response.status == .ok)
            #expect(try response.json["data"]?["allTasks"]?.arrayValue != nil)
        }
    }
}
