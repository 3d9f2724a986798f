import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("OAuth 2.0 at /oauth_token.do and bearer tokens")
struct OAuthTests {
    static let accessDenied = JSONValue.object([
        "error_description": .string("access_denied"), "error": .string("server_error")])

    @Test("a password grant issues ServiceNow's token response and the token works on every API")
    func passwordGrant() async throws {
        try await TestApp.withRouter { client throws in
            let token = try await client.passwordGrant()
            #expect(token.string("token_type") == "Bearer")
            #expect(token.string("scope") == "useraccount")
            #expect(token["expires_in"] == .number(1799))
            let access = token.string("access_token")
            #expect(access.count >= 40)
            #expect(token.string("refresh_token").count >= 40)
            let incident = try await client.get("/api/now/table/incident/\(Demo.incident1)", .bearer(access))
            #expect(incident.status == .ok)
            let work = try await client.get("/api/x_snc_my_work/v1/tracker/task", .bearer(access))
            #expect(work.status == .ok)
            let stats = try await client.get("/api/now/stats/incident?sysparm_count=true", .bearer(access))
            #expect(stats.status == .ok)
            // The token stands for john.doe: what he may not do, the token may not do.
            let denied = try await client.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"u_x"}"#, headers: .bearer(access))
            #expect(denied.status == .forbidden)
        }
    }

    @Test("client credentials are accepted in HTTP Basic as well as in the form")
    func basicClientAuthentication() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.form(
                "/oauth_token.do", "grant_type=password&username=john.doe&password=password",
                headers: .basic("docket-demo", "docket-demo-secret")
            )
            #expect(response.status == .ok)
            #expect(try response.json.string("token_type") == "Bearer")
        }
    }

    @Test("the refresh grant returns a new access token and the current refresh token")
    func refreshGrant() async throws {
        try await TestApp.withRouter { client throws in
            let first = try await client.passwordGrant()
            let refreshed = try await client.form(
                "/oauth_token.do",
                "grant_type=refresh_token&client_id=docket-demo&client_secret=docket-demo-secret&refresh_token="
                    + first.string("refresh_token")
            )
            #expect(refreshed.status == .ok)
            let body = try refreshed.json
            #expect(body.string("refresh_token") == first.string("refresh_token"))
            #expect(body.string("access_token") != first.string("access_token"))
            #expect(try await client.get("/api/now/table/incident/\(Demo.incident1)", .bearer(body.string("access_token"))).status == .ok)
        }
    }

    @Test(
        "every failure at the token endpoint is the same 401",
        arguments: [
            "grant_type=password&client_id=docket-demo&client_secret=wrong&username=john.doe&password=password",
            "grant_type=password&client_id=docket-demo&client_secret=docket-demo-secret&username=john.doe&password=wrong",
            "grant_type=password&client_id=nobody&client_secret=x&username=john.doe&password=password",
            // The mobile app's client lists no client_credentials grant (and is public).
            "grant_type=client_credentials&client_id=docket-mobile&client_secret=docket-demo-secret",
            "grant_type=magic&client_id=docket-demo&client_secret=docket-demo-secret",
            "grant_type=refresh_token&client_id=docket-demo&client_secret=docket-demo-secret&refresh_token=forged",
            "grant_type=refresh_token&client_id=docket-demo&client_secret=docket-demo-secret",
            "grant_type=password&username=john.doe&password=password",
            "",
            "%%%&&==",
        ]
    )
    func failures(body: String) async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.form("/oauth_token.do", body)
            #expect(response.status == .unauthorized)
            #expect(try response.json == Self.accessDenied)
        }
    }

    @Test("a deactivated client stops getting tokens at once")
    func deactivatedClient() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.passwordGrant().string("token_type") == "Bearer")
            let clientID = DemoData.id("oauth_entity", 1)
            let update = try await client.send(.patch, "/api/now/table/oauth_entity/\(clientID)", json: #"{"active":"false"}"#, headers: .admin)
            #expect(update.status == .ok)
            #expect(try await client.passwordGrant() == Self.accessDenied)
        }
    }

    @Test("a JSON token request is a 400 invalid_request")
    func jsonBody() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.send(
                .post, "/oauth_token.do", json: #"{"grant_type":"password"}"#, headers: [:]
            )
            #expect(response.status == .badRequest)
            #expect(try response.json.string("error") == "invalid_request")
        }
    }

    @Test("forged, expired and revoked bearer tokens are 401s")
    func badTokens() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.get("/api/now/table/incident", .bearer("forged")).status == .unauthorized)
            // A client whose tokens expire at once.
            let registered = try await client.send(
                .post, "/api/now/table/oauth_entity",
                json: #"{"name":"instant","client_id":"instant","client_secret":"s","access_token_lifespan":"0"}"#,
                headers: .admin
            )
            #expect(registered.status == .created)
            #expect(try registered.result.string("client_secret") == "********")
            let expired = try await client.form(
                "/oauth_token.do", "grant_type=password&client_id=instant&client_secret=s&username=john.doe&password=password"
            ).json.string("access_token")
            #expect(try await client.get("/api/now/table/incident", .bearer(expired)).status == .unauthorized)

            let token = try await client.passwordGrant()
            let access = token.string("access_token")
            #expect(try await client.get("/api/now/table/incident", .bearer(access)).status == .ok)
            let revoke = try await client.get("/oauth_revoke_token.do?token=" + token.string("refresh_token"), [:])
            #expect(revoke.status == .ok)
            // Revoking the refresh token revokes the access tokens issued with it.
            #expect(try await client.get("/api/now/table/incident", .bearer(access)).status == .unauthorized)
        }
    }

    @Test("tokens are stored hashed and survive a restart")
    func durable() async throws {
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        let access = try await buildApplication(configuration).test(.router) { client throws in
            let access = try await client.passwordGrant().string("access_token")
            let stored = try await client.get("/api/now/table/oauth_credential?sysparm_fields=token", .admin).text
            #expect(!stored.contains(access))
            return access
        }
        try await buildApplication(configuration).test(.router) { client throws in
            #expect(try await client.get("/api/now/table/incident/\(Demo.incident1)", .bearer(access)).status == .ok)
        }
    }
}

@Suite("OAuth revocation input")
struct OAuthRevocationTests {
    @Test("an oversized revocation body is a 413, never a 500")
    func oversized() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.form("/oauth_revoke_token.do", "token=" + String(repeating: "x", count: 70_000))
            #expect(response.status == .contentTooLarge)
        }
    }
}
