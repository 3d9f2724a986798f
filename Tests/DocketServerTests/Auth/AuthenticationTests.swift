import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Authentication and access over HTTP")
struct AuthenticationTests {
    @Test("no or wrong credentials are 401 with WWW-Authenticate (RFC 6750's too for a bearer token) and the ServiceNow body")
    func unauthenticated() async throws {
        try await TestApp.withRouter { client throws in
            for headers: HTTPFields in [[:], .basic("john.doe", "wrong"), .basic("nobody", "x"), [.authorization: "Bearer abc"]] {
                let response = try await client.get("/api/now/table/incident", headers)
                #expect(response.status == .unauthorized)
                // ServiceNow's challenge first; a refused bearer token also gets RFC 6750's.
                let challenges = response.headers[values: .wwwAuthenticate]
                #expect(challenges.first == #"Basic realm="Service-now""#)
                #expect(challenges.dropFirst() == (headers[.authorization]?.hasPrefix("Bearer") == true ? [#"Bearer realm="Service-now", error="invalid_token""#] : []))
                #expect(try response.json == .object([
                    "error": .object(["message": .string("User is not authenticated"), "detail": .string("Required to provide Auth information")]),
                    "status": .string("failure")]))
            }
        }
    }

    @Test("a user without a password (fred.luddy) cannot log in")
    func noPassword() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.get("/api/now/table/sys_user", .basic("fred.luddy", "")).status == .unauthorized)
        }
    }

    @Test("health needs no authentication")
    func health() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.execute(uri: "/health", method: .get)
            #expect(response.status == .ok)
            #expect(try response.json["status"] == .string("ok"))
        }
    }

    @Test("abel.tuter cannot read john.doe's incidents he did not open, in lists or by id")
    func rowAccess() async throws {
        try await TestApp.withRouter { client throws in
            let hidden = DemoData.id("incident", 3)
            #expect(try await client.get("/api/now/table/incident/\(hidden)", .abel).status == .notFound)
            let list = try await client.get("/api/now/table/incident?sysparm_fields=sys_id,caller_id,opened_by&sysparm_exclude_reference_link=true", .abel)
            let results = try list.results
            #expect(!results.isEmpty)
            #expect(!results.contains { $0.string("sys_id") == hidden })
            let abel = DemoData.userID("abel.tuter")
            #expect(results.allSatisfy { $0.string("caller_id") == abel || $0.string("opened_by") == abel })
            #expect(list.headers[.xTotalCount] == String(results.count))
            // The journal of a hidden task is hidden too, and dot-walking cannot reach it.
            #expect(try await client.get("/api/now/table/sys_journal_field?sysparm_query=element_id=\(hidden)", .abel).results.isEmpty)
            #expect(try await client.get("/api/now/table/incident?sysparm_query=parent_incident.number=INC0010003", .abel).results.isEmpty)
        }
    }

    @Test("writes outside the rules answer the ServiceNow 403 body")
    func forbiddenWrites() async throws {
        try await TestApp.withRouter { client throws in
            let create = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"x"}"#, headers: .abel)
            #expect(create.status == .forbidden)
            #expect(create.errorMessage == "Operation Failed")
            #expect((try? create.json)?["error"]?.string("detail") == "ACL Exception Insert Failed due to security constraints")
            let own = DemoData.id("incident", 1)
            let edit = try await client.send(.patch, "/api/now/table/incident/\(own)", json: #"{"short_description":"x"}"#, headers: .abel)
            #expect(edit.status == .forbidden)
            let comment = try await client.send(.patch, "/api/now/table/incident/\(own)", json: #"{"comments":"any update?"}"#, headers: .abel)
            #expect(comment.status == .ok)
            let user = try await client.send(.patch, "/api/now/table/sys_user/\(DemoData.userID("john.doe"))", json: #"{"title":"x"}"#)
            #expect(user.status == .forbidden)
            let journal = try await client.send(.post, "/api/now/table/sys_journal_field", json: #"{"value":"forged"}"#)
            #expect(journal.status == .forbidden)
        }
    }

    @Test("no password hash leaves the server, in any field or display mode")
    func noPasswordLeak() async throws {
        try await TestApp.withRouter { client throws in
            for mode in ["false", "true", "all"] {
                for fields in ["", "&sysparm_fields=user_name,user_password", "&sysparm_fields=manager.user_password", "&sysparm_fields=password"] {
                    let response = try await client.get("/api/now/table/sys_user?sysparm_display_value=\(mode)\(fields)", .admin)
                    #expect(response.status == .ok)
                    #expect(!response.text.contains("$2"))
                    #expect(!response.text.contains("\"password\""))
                }
                // The password field reads as a mask where one is set, and empty where none is.
                let masked = try await client.get(
                    "/api/now/table/sys_user?sysparm_display_value=\(mode)&sysparm_fields=user_name,user_password&sysparm_query=user_nameINadmin,fred.luddy^ORDERBYuser_name",
                    .admin
                ).results
                #expect(masked.count == 2)
                let shown = masked.map { $0["user_password"]?.stringValue ?? $0["user_password"]?["value"]?.stringValue ?? "?" }
                #expect(shown == ["********", ""])
            }
            let dotWalk = try await client.get("/api/now/table/incident?sysparm_fields=caller_id.user_password", .admin)
            #expect(!dotWalk.text.contains("$2"))
            let probe = try await client.get("/api/now/table/sys_user?sysparm_query=user_passwordSTARTSWITH$2", .admin)
            #expect(probe.status == .forbidden)
            #expect(probe.errorMessage == "Insufficient rights to query records")
            // An admin can set a password, which is stored hashed and works for login.
            let set = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("fred.luddy"))", json: #"{"password":"n3w-Secret"}"#, headers: .admin
            )
            #expect(set.status == .ok)
            #expect(!set.text.contains("n3w-Secret") && !set.text.contains("$2"))
            #expect(try await client.get("/api/now/table/sys_user?user_name=fred.luddy", .basic("fred.luddy", "n3w-Secret")).status == .ok)
            // user_password is the field's name; writing back the mask a read returned changes nothing.
            let renamed = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("fred.luddy"))", json: #"{"user_password":"an0ther-Secret"}"#, headers: .admin
            )
            #expect(try renamed.result.string("user_password") == "********")
            #expect(try await client.get("/api/now/table/sys_user?user_name=fred.luddy", .basic("fred.luddy", "an0ther-Secret")).status == .ok)
            let echoed = try await client.send(
                .put, "/api/now/table/sys_user/\(DemoData.userID("fred.luddy"))", json: #"{"user_password":"********","title":"CFO"}"#, headers: .admin
            )
            #expect(echoed.status == .ok)
            #expect(try await client.get("/api/now/table/sys_user?user_name=fred.luddy", .basic("fred.luddy", "an0ther-Secret")).status == .ok)
        }
    }
}
