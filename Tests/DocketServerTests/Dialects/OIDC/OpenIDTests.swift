import Crypto
import DocketKit
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The OpenID Connect provider through the router: discovery and keys, the grants (password, authorization code
/// with PKCE through the web UI's sign-in, refresh with rotation and reuse detection), access tokens as bearer
/// credentials in the other dialects, userinfo, introspection, revocation and logout, and what it refuses.
@Suite("OpenID Connect provider")
struct OpenIDTests {
    static let realm = "/realms/docket"
    static let endpoints = realm + "/protocol/openid-connect"
    static let redirect = "http://localhost:8765/callback"

    static func form(_ pairs: [(String, String)]) -> ByteBuffer {
        ByteBuffer(string: pairs.map { WebBrowser.escape($0.0) + "=" + WebBrowser.escape($0.1) }.joined(separator: "&"))
    }

    static func post(_ client: any TestClientProtocol, _ path: String, _ pairs: [(String, String)], headers: HTTPFields = [:]) async throws
        -> TestResponse
    {
        var fields = headers
        fields[.contentType] = "application/x-www-form-urlencoded"
        return try await client.execute(uri: path, method: .post, headers: fields, body: form(pairs))
    }

    /// The password grant for the showcase's public client.
    static func passwordGrant(_ client: any TestClientProtocol, user: String = "john.doe", password: String = "password") async throws -> JSONValue {
        let response = try await post(client, endpoints + "/token", [
            ("grant_type", "password"), ("client_id", "datasync-starter-client"), ("username", user), ("password", password),
            ("scope", "openid profile email"),
        ])
        #expect(response.status == .ok, "\(response.text)")
        return try response.json
    }

    /// A JWT's payload, unverified.
    static func claims(_ token: String) throws -> JSONValue {
        let parts = token.split(separator: ".")
        return try JSONValue.parse(try #require(Base64URL.decode(parts[1])))
    }

    static func pkce() -> (verifier: String, challenge: String) {
        let verifier = Base64URL.random(bytes: 40)
        return (verifier, Base64URL.encode(Array(SHA256.hash(data: Data(verifier.utf8)))))
    }

    static func query(_ location: String) -> [String: String] {
        var result: [String: String] = [:]
        for item in URLComponents(string: location)?.queryItems ?? [] { result[item.name] = item.value ?? "" }
        return result
    }

    @Test("discovery under both prefixes names every endpoint and what AppAuth requires; the JWK Set publishes the RS256 key by its thumbprint; another realm does not exist")
    func discovery() async throws {
        try await TestApp.withRouter(configure: { $0.publicURL = "http://docket.example:8080/" }) { client in
            for prefix in ["", "/auth"] {
                let response = try await client.execute(
                    uri: prefix + Self.realm + "/.well-known/openid-configuration", method: .get, headers: [:], body: nil
                )
                #expect(response.status == .ok)
                let document = try response.json
                let issuer = "http://docket.example:8080" + prefix + "/realms/docket"
                #expect(document["issuer"]?.stringValue == issuer)
                #expect(document["token_endpoint"]?.stringValue == issuer + "/protocol/openid-connect/token")
                #expect(document["jwks_uri"]?.stringValue == issuer + "/protocol/openid-connect/certs")
                for key in ["authorization_endpoint", "userinfo_endpoint", "end_session_endpoint", "revocation_endpoint", "introspection_endpoint"] {
                    #expect(document[key]?.stringValue?.hasPrefix(issuer + "/protocol/openid-connect/") == true, "\(key)")
                }
                #expect(document["response_types_supported"] == .array([.string("code")]))
                #expect(document["subject_types_supported"] == .array([.string("public")]))
                #expect(document["id_token_signing_alg_values_supported"] == .array([.string("RS256")]))
                #expect(document["code_challenge_methods_supported"] == .array([.string("S256")]))
            }
            let keys = try await client.execute(uri: Self.endpoints + "/certs", method: .get, headers: [:], body: nil).json
            let key = try #require(keys["keys"]?.arrayValue?.first)
            #expect(key["kty"]?.stringValue == "RSA" && key["alg"]?.stringValue == "RS256" && key["use"]?.stringValue == "sig")
            #expect(key["d"] == nil && key["p"] == nil)
            let canonical = #"{"e":""# + (key["e"]?.stringValue ?? "") + #"","kty":"RSA","n":""# + (key["n"]?.stringValue ?? "") + #""}"#
            #expect(key["kid"]?.stringValue == Base64URL.encode(Array(SHA256.hash(data: Data(canonical.utf8)))))
            let other = try await client.execute(uri: "/realms/master/.well-known/openid-configuration", method: .get, headers: [:], body: nil)
            #expect(other.status == .notFound)
            #expect(try other.json["error"]?.stringValue == "Realm does not exist")
        }
    }

    @Test("the password grant gives RS256 access and ID tokens with Keycloak's claims; the access token is a bearer credential for the Table API, DataSync and userinfo")
    func passwordGrant() async throws {
        try await TestApp.withRouter { client in
            let grant = try await Self.passwordGrant(client)
            #expect(grant["token_type"]?.stringValue == "Bearer")
            #expect((grant["expires_in"]?.intValue ?? 0) > 0 && (grant["refresh_expires_in"]?.intValue ?? 0) > 0)
            let access = try #require(grant["access_token"]?.stringValue)
            let id = try #require(grant["id_token"]?.stringValue)
            let claims = try Self.claims(access)
            #expect(claims["preferred_username"]?.stringValue == "john.doe")
            #expect(claims["sub"]?.stringValue == DemoData.userID("john.doe"))
            #expect(claims["azp"]?.stringValue == "datasync-starter-client")
            #expect(claims["typ"]?.stringValue == "Bearer")
            #expect(claims["realm_access"]?["roles"]?.arrayValue?.contains(.string("itil")) == true)
            #expect(claims["sid"]?.stringValue == grant["session_state"]?.stringValue)
            let idClaims = try Self.claims(id)
            #expect(idClaims["aud"]?.stringValue == "datasync-starter-client" && idClaims["typ"]?.stringValue == "ID")
            #expect(idClaims["at_hash"]?.stringValue == OpenIDProvider.atHash(access))
            let header = try JSONValue.parse(try #require(Base64URL.decode(access.split(separator: ".")[0])))
            #expect(header["alg"]?.stringValue == "RS256" && header["kid"] != nil)

            let table = try await client.execute(
                uri: "/api/now/table/sys_user?sysparm_query=user_name=john.doe&sysparm_fields=user_name", method: .get, headers: .bearer(access), body: nil
            )
            #expect(table.status == .ok)
            #expect(try table.results.first?["user_name"]?.stringValue == "john.doe")
            let graphQL = try await client.execute(
                uri: "/graphql", method: .post, headers: .json(.bearer(access)), body: ByteBuffer(string: #"{"query":"{ allTasks { id title } }"}"#)
            )
            #expect(graphQL.status == .ok)
            #expect(try graphQL.json["errors"] == nil)
            let info = try await client.execute(uri: Self.endpoints + "/userinfo", method: .get, headers: .bearer(access), body: nil)
            #expect(info.status == .ok)
            #expect(try info.json["preferred_username"]?.stringValue == "john.doe")
            #expect(try info.json["sub"]?.stringValue == DemoData.userID("john.doe"))
            // RFC 6750 §2.2: the token as a form field of a POST; a body of another type carries none; a form that
            // cannot be read is the caller's error (400), never a refusal of the token.
            let posted = try await Self.post(client, Self.endpoints + "/userinfo", [("access_token", access)])
            #expect(posted.status == .ok)
            #expect(try posted.json["preferred_username"]?.stringValue == "john.doe")
            let otherType = try await client.execute(
                uri: Self.endpoints + "/userinfo", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"access_token":"\#(access)"}"#)
            )
            #expect(otherType.status == .unauthorized)
            #expect(otherType.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            let twice = try await Self.post(client, Self.endpoints + "/userinfo", [("access_token", access), ("access_token", access)])
            #expect(twice.status == .badRequest)
            #expect(try twice.json["error"]?.stringValue == "invalid_request")
            // A wrong password is invalid_grant; the client must be allowed the grant.
            let wrong = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "password"), ("client_id", "datasync-starter-client"), ("username", "john.doe"), ("password", "nope"),
            ])
            #expect(wrong.status == .badRequest)
            #expect(try wrong.json["error"]?.stringValue == "invalid_grant")
            let mobile = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "password"), ("client_id", "docket-mobile"), ("username", "john.doe"), ("password", "password"),
            ])
            #expect(try mobile.json["error"]?.stringValue == "unauthorized_client")
        }
    }

    @Test("a refresh token rotates on use; using a used one ends its session, so the newest refresh and access tokens stop too")
    func refreshRotation() async throws {
        try await TestApp.withRouter { client in
            let grant = try await Self.passwordGrant(client)
            let first = try #require(grant["refresh_token"]?.stringValue)
            let refreshed = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", first),
            ])
            #expect(refreshed.status == .ok)
            let second = try #require(try refreshed.json["refresh_token"]?.stringValue)
            let access = try #require(try refreshed.json["access_token"]?.stringValue)
            #expect(second != first)
            #expect(try await client.execute(uri: Self.endpoints + "/userinfo", method: .get, headers: .bearer(access), body: nil).status == .ok)
            // Another client cannot use (or burn) it.
            let foreign = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "docket-demo"), ("client_secret", DemoData.oauthClientSecret), ("refresh_token", second),
            ])
            #expect(try foreign.json["error"]?.stringValue == "invalid_grant")
            // The first one again: reuse detected, the whole session ends.
            let replay = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", first),
            ])
            #expect(replay.status == .badRequest)
            #expect(try replay.json["error"]?.stringValue == "invalid_grant")
            let after = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", second),
            ])
            #expect(try after.json["error"]?.stringValue == "invalid_grant")
            let api = try await client.execute(uri: "/api/now/table/incident?sysparm_limit=1", method: .get, headers: .bearer(access), body: nil)
            #expect(api.status == .unauthorized)
        }
    }

    @Test("authorization code with PKCE: the auth endpoint sends an unsigned-in browser to the web UI's sign-in and back, then to the app with a code and state; the code works once, with the right verifier and redirect URI")
    func authorizationCode() async throws {
        try await TestApp.withRouter { client in
            let (verifier, challenge) = Self.pkce()
            let authorize = Self.endpoints + "/auth?response_type=code&client_id=datasync-starter-client&redirect_uri="
                + WebBrowser.escape(Self.redirect) + "&scope=openid%20profile&state=xyz&nonce=n-0S6&code_challenge=" + challenge
                + "&code_challenge_method=S256&login_hint=john.doe"
            var browser = WebBrowser(client)
            let first = try await browser.get(authorize)
            #expect(first.status == .seeOther)
            #expect(first.location.hasPrefix("/?next=" + WebBrowser.escape(Self.endpoints + "/auth?")))
            #expect(first.location.contains("login_hint=john.doe"))
            let page = try await browser.get(first.location)
            #expect(page.status == .ok)
            #expect(page.text.contains(#"value="john.doe""#))
            // The page's form may end in a redirect to the app.
            #expect(page.headers[.contentSecurityPolicy]?.contains("form-action 'self' http://localhost:8765") == true)
            let next = try #require(Self.query("http://x" + first.location)["next"])
            let signedIn = try await browser.post("/app/login", [("user_name", "john.doe"), ("password", "password"), ("next", next)], csrf: browser.cookies[WebSessions.loginCookie] ?? "")
            #expect(signedIn.status == .seeOther)
            #expect(signedIn.location == next)
            let back = try await browser.get(signedIn.location)
            #expect(back.status == .found)
            #expect(back.location.hasPrefix(Self.redirect + "?"))
            let answer = Self.query(back.location)
            #expect(answer["state"] == "xyz")
            #expect(answer["iss"]?.hasSuffix("/realms/docket") == true)
            let code = try #require(answer["code"])

            let wrongVerifier = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", code),
                ("redirect_uri", Self.redirect), ("code_verifier", Self.pkce().verifier),
            ])
            #expect(try wrongVerifier.json["error"]?.stringValue == "invalid_grant")
            // The code was used by that attempt: it is spent, and its session ended.
            let late = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", code),
                ("redirect_uri", Self.redirect), ("code_verifier", verifier),
            ])
            #expect(try late.json["error"]?.stringValue == "invalid_grant")

            // Signed in now: a new request goes straight back with a code.
            let again = try await browser.get(authorize.replacingOccurrences(of: "state=xyz", with: "state=abc"))
            #expect(again.status == .found)
            let code2 = try #require(Self.query(again.location)["code"])
            let wrongRedirect = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", code2),
                ("redirect_uri", "http://localhost:9999/other"), ("code_verifier", verifier),
            ])
            #expect(try wrongRedirect.json["error"]?.stringValue == "invalid_grant")
            let again3 = try await browser.get(authorize)
            let code3 = try #require(Self.query(again3.location)["code"])
            let exchanged = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", code3),
                ("redirect_uri", Self.redirect), ("code_verifier", verifier),
            ])
            #expect(exchanged.status == .ok, "\(exchanged.text)")
            let idToken = try #require(try exchanged.json["id_token"]?.stringValue)
            #expect(try Self.claims(idToken)["nonce"]?.stringValue == "n-0S6")
            let replay = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", code3),
                ("redirect_uri", Self.redirect), ("code_verifier", verifier),
            ])
            #expect(try replay.json["error"]?.stringValue == "invalid_grant")
            // The replay ended the session the code started: its tokens stop.
            let access = try #require(try exchanged.json["access_token"]?.stringValue)
            #expect(try await client.execute(uri: Self.endpoints + "/userinfo", method: .get, headers: .bearer(access), body: nil).status == .unauthorized)

            // prompt=login asks for the password again even when signed in.
            let forced = try await browser.get(authorize + "&prompt=login")
            #expect(forced.status == .seeOther && forced.location.contains("force=1"))
            #expect(try await browser.get(forced.location).text.contains("user_name"))
            // prompt=none without a session: login_required, at the app.
            var stranger = WebBrowser(client)
            let none = try await stranger.get(authorize + "&prompt=none")
            #expect(none.status == .found && Self.query(none.location)["error"] == "login_required")
        }
    }

    @Test("the auth endpoint never redirects to an address the client did not register, and refuses a public client without PKCE")
    func authorizationRefusals() async throws {
        try await TestApp.withRouter { client in
            let (_, challenge) = Self.pkce()
            func get(_ query: String) async throws -> TestResponse {
                try await client.execute(uri: Self.endpoints + "/auth?" + query, method: .get, headers: [:], body: nil)
            }
            for redirect in ["http://localhost.evil.example/cb", "https://evil.example/cb", "http://localhost:8765/cb#frag", "http://user@localhost/cb", ""] {
                let response = try await get(
                    "response_type=code&client_id=datasync-starter-client&redirect_uri=" + WebBrowser.escape(redirect) + "&code_challenge=" + challenge
                        + "&code_challenge_method=S256"
                )
                #expect(response.status == .badRequest, "\(redirect)")
                #expect(response.headers[.location] == nil)
            }
            let unknown = try await get("response_type=code&client_id=nobody&redirect_uri=" + WebBrowser.escape(Self.redirect))
            #expect(unknown.status == .badRequest && unknown.headers[.location] == nil)
            let noPKCE = try await get("response_type=code&client_id=datasync-starter-client&state=s&redirect_uri=" + WebBrowser.escape(Self.redirect))
            #expect(noPKCE.status == .found)
            #expect(Self.query(noPKCE.location)["error"] == "invalid_request")
            #expect(Self.query(noPKCE.location)["state"] == "s")
            let plain = try await get(
                "response_type=code&client_id=datasync-starter-client&redirect_uri=" + WebBrowser.escape(Self.redirect) + "&code_challenge=" + challenge
                    + "&code_challenge_method=plain"
            )
            #expect(Self.query(plain.location)["error"] == "invalid_request")
            let token = try await get(
                "response_type=token&client_id=datasync-starter-client&redirect_uri=" + WebBrowser.escape(Self.redirect) + "&code_challenge=" + challenge
                    + "&code_challenge_method=S256"
            )
            #expect(Self.query(token.location)["error"] == "unsupported_response_type")
            // Loopback redirects on any port (RFC 8252), a custom scheme exactly as registered.
            let loopback = try await get(
                "response_type=code&client_id=datasync-starter-client&redirect_uri=" + WebBrowser.escape("http://127.0.0.1:51234/done")
                    + "&code_challenge=" + challenge + "&code_challenge_method=S256"
            )
            #expect(loopback.status == .seeOther)
            let app = try await get(
                "response_type=code&client_id=docket-mobile&redirect_uri=" + WebBrowser.escape("com.docket.app:/oauth2redirect")
                    + "&code_challenge=" + challenge + "&code_challenge_method=S256"
            )
            #expect(app.status == .seeOther)
        }
    }

    @Test("revocation, introspection (confidential clients only), logout with an ID token hint and with a refresh token, and a new password end what was issued")
    func endings() async throws {
        try await TestApp.withRouter { client in
            let demo = HTTPFields.basic(DemoData.oauthClientID, DemoData.oauthClientSecret)
            func introspect(_ token: String) async throws -> JSONValue {
                try await Self.post(client, Self.endpoints + "/token/introspect", [("token", token)], headers: demo).json
            }
            func works(_ access: String) async throws -> Bool {
                try await client.execute(uri: "/api/now/table/incident?sysparm_limit=1", method: .get, headers: .bearer(access), body: nil).status == .ok
            }
            // Revoking the access token ends its session.
            let grant = try await Self.passwordGrant(client)
            let access = try #require(grant["access_token"]?.stringValue)
            let refresh = try #require(grant["refresh_token"]?.stringValue)
            #expect(try await introspect(access)["active"] == .bool(true))
            #expect(try await introspect(access)["username"]?.stringValue == "john.doe")
            #expect(try await introspect(refresh)["active"] == .bool(true))
            let publicAsks = try await Self.post(client, Self.endpoints + "/token/introspect", [("token", access), ("client_id", "datasync-starter-client")])
            #expect(publicAsks.status == .unauthorized)
            #expect(try await works(access))
            let revoked = try await Self.post(client, Self.endpoints + "/revoke", [("token", access), ("client_id", "datasync-starter-client")])
            #expect(revoked.status == .ok)
            #expect(try await !works(access))
            #expect(try await introspect(access)["active"] == .bool(false))
            #expect(try await introspect(refresh)["active"] == .bool(false))
            #expect(try await introspect("garbage")["active"] == .bool(false))

            // RP-initiated logout: back to a registered address with the state; elsewhere refused.
            let second = try await Self.passwordGrant(client)
            let idToken = try #require(second["id_token"]?.stringValue)
            let evil = try await client.execute(
                uri: Self.endpoints + "/logout?id_token_hint=" + idToken + "&post_logout_redirect_uri=" + WebBrowser.escape("https://evil.example/"),
                method: .get, headers: [:], body: nil
            )
            #expect(evil.status == .badRequest && evil.headers[.location] == nil)
            #expect(try await works(try #require(second["access_token"]?.stringValue)))
            let out = try await client.execute(
                uri: Self.endpoints + "/logout?id_token_hint=" + idToken + "&post_logout_redirect_uri=" + WebBrowser.escape("http://localhost:8765/bye")
                    + "&state=st",
                method: .get, headers: [:], body: nil
            )
            #expect(out.status == .found)
            #expect(out.location == "http://localhost:8765/bye?state=st")
            #expect(try await !works(try #require(second["access_token"]?.stringValue)))

            // The form POST with a refresh token: 204.
            let third = try await Self.passwordGrant(client)
            let ended = try await Self.post(client, Self.endpoints + "/logout", [
                ("client_id", "datasync-starter-client"), ("refresh_token", try #require(third["refresh_token"]?.stringValue)),
            ])
            #expect(ended.status == .noContent)
            #expect(try await !works(try #require(third["access_token"]?.stringValue)))

            // A new password ends every session of the user.
            let fourth = try await Self.passwordGrant(client, user: "beth.anglin")
            let beth = try #require(fourth["access_token"]?.stringValue)
            #expect(try await works(beth))
            let changed = try await client.execute(
                uri: "/api/now/table/sys_user/" + DemoData.userID("beth.anglin"), method: .patch, headers: .json(.admin),
                body: ByteBuffer(string: #"{"user_password":"another-secret-1"}"#)
            )
            #expect(changed.status == .ok)
            #expect(try await !works(beth))
        }
    }

    @Test("bad requests are OAuth errors, never 5xx: wrong content type, repeated parameters, unknown grants and clients, a wrong client secret, tokens of other kinds")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            let json = try await client.execute(
                uri: Self.endpoints + "/token", method: .post, headers: [.contentType: "application/json"], body: ByteBuffer(string: "{}")
            )
            #expect(try json.status == .badRequest && json.json["error"]?.stringValue == "invalid_request")
            let twice = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "password"), ("grant_type", "password")])
            #expect(try twice.json["error"]?.stringValue == "invalid_request")
            let unknownGrant = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "implicit"), ("client_id", "datasync-starter-client")])
            #expect(try unknownGrant.json["error"]?.stringValue == "unsupported_grant_type")
            let nobody = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "password"), ("client_id", "nobody")])
            #expect(try nobody.status == .unauthorized && nobody.json["error"]?.stringValue == "invalid_client")
            let badSecret = try await Self.post(
                client, Self.endpoints + "/token", [("grant_type", "password"), ("username", "john.doe"), ("password", "password")],
                headers: .basic(DemoData.oauthClientID, "wrong")
            )
            #expect(badSecret.status == .unauthorized && badSecret.headers[.wwwAuthenticate] != nil)
            let noSecret = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "password"), ("client_id", DemoData.oauthClientID)])
            #expect(noSecret.status == .unauthorized)
            let big = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "password"), ("x", String(repeating: "a", count: 70_000))])
            #expect(big.status.code == 413 || big.status == .badRequest)
            #expect(big.status.code < 500)
            let badCode = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", "authorization_code"), ("client_id", "datasync-starter-client"), ("code", "nope"), ("redirect_uri", Self.redirect),
            ])
            #expect(try badCode.json["error"]?.stringValue == "invalid_grant")
            // userinfo: RFC 6750's challenge; a ServiceNow OAuth token or a forged JWT is no OpenID access token.
            let none = try await client.execute(uri: Self.endpoints + "/userinfo", method: .get, headers: [:], body: nil)
            #expect(none.status == .unauthorized && none.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            let grant = try await Self.passwordGrant(client)
            let access = try #require(grant["access_token"]?.stringValue)
            let parts = access.split(separator: ".").map(String.init)
            guard case .object(var fields) = try Self.claims(access) else { Issue.record("no claims"); return }
            fields["preferred_username"] = .string("admin")
            fields["sub"] = .string(DemoData.userID("admin"))
            let payload = JSONValue.object(fields)
            let forged = parts[0] + "." + Base64URL.encode(payload.serialized()) + "." + parts[2]
            let refused = try await client.execute(uri: Self.endpoints + "/userinfo", method: .get, headers: .bearer(forged), body: nil)
            #expect(refused.status == .unauthorized)
            #expect(refused.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true)
            let table = try await client.execute(uri: "/api/now/table/incident", method: .get, headers: .bearer(forged), body: nil)
            #expect(table.status == .unauthorized)
            // ServiceNow's 401, with RFC 6750's challenge beside its own.
            let challenges = table.headers[values: .wwwAuthenticate]
            #expect(challenges.contains(#"Basic realm="Service-now""#))
            #expect(challenges.contains { $0.hasPrefix("Bearer") && $0.contains(#"error="invalid_token""#) })
            let unsigned = Base64URL.encode(Array(#"{"alg":"none"}"#.utf8)) + "." + Base64URL.encode(payload.serialized()) + "."
            #expect(try await client.execute(uri: "/api/now/table/incident", method: .get, headers: .bearer(unsigned), body: nil).status == .unauthorized)
            let missingRealm = try await client.execute(uri: "/realms/docket/protocol/openid-connect/nothing", method: .get, headers: [:], body: nil)
            #expect(missingRealm.status == .notFound)
        }
    }

    @Test("client_credentials: a confidential client registered through the Table API acts as its service account, without a refresh token; public clients and clients without one are refused")
    func clientCredentials() async throws {
        try await TestApp.withRouter { client in
            let created = try await client.execute(
                uri: "/api/now/table/oauth_entity", method: .post, headers: .json(.admin),
                body: ByteBuffer(string: #"{"name":"Reports","client_id":"reports","client_secret":"reports-secret-123456","grant_types":"client_credentials"}"#)
            )
            #expect(created.status == .created)
            let secretHeaders = HTTPFields.basic("reports", "reports-secret-123456")
            let before = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "client_credentials")], headers: secretHeaders)
            #expect(try before.json["error"]?.stringValue == "unauthorized_client")
            let account = try await client.execute(
                uri: "/api/now/table/sys_user", method: .post, headers: .json(.admin),
                body: ByteBuffer(string: #"{"user_name":"service-account-reports","name":"Reports robot"}"#)
            )
            #expect(account.status == .created)
            let grant = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "client_credentials")], headers: secretHeaders)
            #expect(grant.status == .ok, "\(grant.text)")
            #expect(try grant.json["refresh_token"] == nil)
            let access = try #require(try grant.json["access_token"]?.stringValue)
            #expect(try Self.claims(access)["preferred_username"]?.stringValue == "service-account-reports")
            let table = try await client.execute(uri: "/api/now/table/sys_user?sysparm_limit=1", method: .get, headers: .bearer(access), body: nil)
            #expect(table.status == .ok)
            let wrong = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "client_credentials")], headers: .basic("reports", "nope-nope-nope-nope"))
            #expect(wrong.status == .unauthorized)
            let publicClient = try await Self.post(client, Self.endpoints + "/token", [("grant_type", "client_credentials"), ("client_id", "datasync-starter-client")])
            #expect(try publicClient.json["error"]?.stringValue == "unauthorized_client")
        }
    }

    @Test("mobile-services.json describes this server for a public client: sync-app with its WebSocket URL, keycloak with realm and resource")
    func mobileServices() async throws {
        try await TestApp.withRouter(configure: { $0.publicURL = "https://tasks.example.com" }) { client in
            let document = try await client.execute(uri: "/mobile-services.json", method: .get, headers: [:], body: nil).json
            let services = try #require(document["services"]?.arrayValue)
            let sync = try #require(services.first { $0["type"]?.stringValue == "sync-app" })
            #expect(sync["url"]?.stringValue == "https://tasks.example.com/graphql")
            #expect(sync["config"]?["websocketUrl"]?.stringValue == "wss://tasks.example.com/graphql")
            let keycloak = try #require(services.first { $0["type"]?.stringValue == "keycloak" })
            #expect(keycloak["config"]?["auth-server-url"]?.stringValue == "https://tasks.example.com")
            #expect(keycloak["config"]?["realm"]?.stringValue == "docket")
            #expect(keycloak["config"]?["resource"]?.stringValue == "datasync-starter-client")
            #expect(services.allSatisfy { $0["id"]?.stringValue?.isEmpty == false })
            // DocketKit reads it as an app would.
            let raw = try await client.execute(uri: "/mobile-services.json", method: .get, headers: [:], body: nil)
            let decoded = try MobileServicesConfiguration.decode(Data(raw.body.readableBytesView))
            #expect(decoded.openID?.issuer.absoluteString == "https://tasks.example.com/realms/docket")
            #expect(decoded.sync?.webSocket.absoluteString == "wss://tasks.example.com/graphql")
            let mobile = try await client.execute(uri: "/mobile-services.json?client_id=docket-mobile", method: .get, headers: [:], body: nil).json
            #expect(mobile["clientId"]?.stringValue == "docket-mobile")
            let confidential = try await client.execute(uri: "/mobile-services.json?client_id=docket-demo", method: .get, headers: [:], body: nil)
            #expect(confidential.status == .unauthorized)
            let unknown = try await client.execute(uri: "/mobile-services.json?client_id=nobody", method: .get, headers: [:], body: nil)
            #expect(unknown.status == .unauthorized)
        }
    }

    @Test("the device grant: docket-cli gets a device code and a user code; polling says pending, then slow down; a person signed in to the web UI allows it and the next poll gets tokens once; a denied code is access_denied; a wrong code is refused on the page")
    func deviceGrant() async throws {
        try await TestApp.withRouter { client in
            let cli: [(String, String)] = [("client_id", "docket-cli"), ("client_secret", "docket-cli")]
            func start() async throws -> JSONValue {
                let response = try await Self.post(client, Self.endpoints + "/auth/device", cli + [("scope", "openid")])
                #expect(response.status == .ok, "\(response.text)")
                return try response.json
            }
            func poll(_ device: String) async throws -> TestResponse {
                try await Self.post(client, Self.endpoints + "/token", cli + [("grant_type", OpenIDProvider.deviceGrant), ("device_code", device)])
            }
            let started = try await start()
            let device = try #require(started["device_code"]?.stringValue)
            let userCode = try #require(started["user_code"]?.stringValue)
            #expect(userCode.count == 9 && userCode.contains("-"))
            #expect(started["verification_uri"]?.stringValue == "http://localhost/realms/docket/device")
            #expect(started["interval"]?.intValue == 5 && started["expires_in"]?.intValue == 600)
            #expect(try await poll(device).json["error"]?.stringValue == "authorization_pending")
            #expect(try await poll(device).json["error"]?.stringValue == "slow_down")

            var browser = WebBrowser(client)
            let verification = try await browser.get("/realms/docket/device?user_code=" + userCode)
            #expect(verification.status == .seeOther && verification.location == "/app/device?user_code=" + userCode)
            let signIn = try await browser.get(verification.location)
            #expect(signIn.status == .seeOther)
            try await browser.signIn()
            let page = try await browser.get("/app/device?user_code=" + userCode.lowercased())
            #expect(page.status == .ok)
            #expect(page.text.contains("Docket command-line app"))
            let wrong = try await browser.post("/app/device", [("user_code", "BBBB-BBBB"), ("decision", "allow")])
            #expect(wrong.status == .badRequest)
            let forged = try await browser.post("/app/device", [("user_code", userCode), ("decision", "allow")], csrf: "forged")
            #expect(forged.status == .forbidden)
            let allowed = try await browser.post("/app/device", [("user_code", userCode), ("decision", "allow")])
            #expect(allowed.status == .ok)
            #expect(allowed.text.contains("Device signed in"))
            let granted = try await poll(device)
            #expect(granted.status == .ok, "\(granted.text)")
            let access = try #require(try granted.json["access_token"]?.stringValue)
            #expect(try Self.claims(access)["preferred_username"]?.stringValue == "john.doe")
            #expect(try granted.json["refresh_token"]?.stringValue?.isEmpty == false)
            #expect(try await poll(device).json["error"]?.stringValue == "invalid_grant")
            // The code cannot be decided again.
            #expect(try await browser.post("/app/device", [("user_code", userCode), ("decision", "allow")]).status == .badRequest)

            let second = try await start()
            let secondCode = try #require(second["user_code"]?.stringValue)
            #expect(try await browser.post("/app/device", [("user_code", secondCode), ("decision", "deny")]).status == .ok)
            #expect(try await poll(try #require(second["device_code"]?.stringValue)).json["error"]?.stringValue == "access_denied")
            // Another client cannot poll it, and a client without the grant cannot start one.
            let third = try await start()
            let foreign = try await Self.post(client, Self.endpoints + "/token", [
                ("grant_type", OpenIDProvider.deviceGrant), ("device_code", try #require(third["device_code"]?.stringValue)),
                ("client_id", DemoData.oauthClientID), ("client_secret", DemoData.oauthClientSecret),
            ])
            #expect(try foreign.json["error"]?.stringValue == "unauthorized_client")
            let notAllowed = try await Self.post(client, Self.endpoints + "/auth/device", [("client_id", "datasync-starter-client")])
            #expect(try notAllowed.json["error"]?.stringValue == "unauthorized_client")
            // Guessing codes is held back (RFC 8628 §5.1): after ten wrong ones, even a right one waits.
            let fourth = try await start()
            var guesser = WebBrowser(client)
            try await guesser.signIn("beth.anglin", "password")
            _ = try await guesser.get("/app/device")
            for _ in 0..<OpenIDProvider.deviceAttempts {
                #expect(try await guesser.post("/app/device", [("user_code", "BBBB-BBBB"), ("decision", "allow")]).status == .badRequest)
            }
            let held = try await guesser.post("/app/device", [("user_code", try #require(fourth["user_code"]?.stringValue)), ("decision", "allow")])
            #expect(held.status == .tooManyRequests)
            #expect(held.headers[.retryAfter] != nil)
        }
    }

    @Test("pruning removes ended sign-ins with their refresh tokens and spent codes, and keeps live ones")
    func prune() async throws {
        try await TestApp.withStore { store in
            let storage = store.storage
            let now = 1_000_000
            try await OpenIDGrants.start(
                .init(sid: "old", userID: "u", clientID: "c", authTime: 0, expires: now - 1),
                refresh: ("h-old", .init(sid: "old", clientID: "c", scope: "", nonce: "", expires: now - 1)), storage: storage
            )
            try await OpenIDGrants.start(
                .init(sid: "live", userID: "u", clientID: "c", authTime: 0, expires: now + 100),
                refresh: ("h-live", .init(sid: "live", clientID: "c", scope: "", nonce: "", expires: now + 100)), storage: storage
            )
            #expect(try await OpenIDGrants.prune(now: now, storage: storage) == 1)
            #expect(try await OpenIDGrants.refresh("h-old", now: now - 10, storage: storage) == nil)
            #expect(try await OpenIDGrants.refresh("h-live", now: now, storage: storage)?.1.sid == "live")
        }
    }

    @Test("many refreshes of one token at once: exactly one succeeds, and the session then ends (reuse)")
    func concurrentRefresh() async throws {
        try await TestApp.withRouter { client in
            let grant = try await Self.passwordGrant(client)
            let refresh = try #require(grant["refresh_token"]?.stringValue)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await Self.post(client, Self.endpoints + "/token", [
                            ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", refresh),
                        ]).status.code
                    }
                }
                var all: [Int] = []
                for try await status in group { all.append(status) }
                return all
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 400 }.count == 7)
        }
    }
}

@Suite("Trusted OpenID providers: configuration")
struct TrustedIssuerTests {
    @Test("--oidc-trust reads ISSUER,audience=…[,username=…][,roles=…] (or client=… as the audience) and refuses what is not that")
    func parse() throws {
        let full = try TrustedIssuer.parse("https://sso.example.com/realms/acme,audience=docket,username=email,roles=realm_access.roles")
        #expect(full == TrustedIssuer(issuer: "https://sso.example.com/realms/acme", audience: "docket", usernameClaim: "email", rolesClaim: "realm_access.roles"))
        setenv("DOCKET_TEST_SSO_SECRET", "s3cret", 1)
        let web = try TrustedIssuer.parse("https://sso.example.com,client=docket-web,secret-env=DOCKET_TEST_SSO_SECRET,name=Acme SSO")
        #expect(web.clientID == "docket-web" && web.clientSecret == "s3cret" && web.label == "Acme SSO")
        // Without audience=, tokens must be issued to the client; with neither, any application's token would do: refused.
        #expect(web.audience == nil)
        #expect(try TrustedIssuer.parse("https://sso.example.com/realms/acme,audience=docket").label == "sso.example.com")
        for bad in [
            "", "sso.example.com", "https://login.example.com", "https://login.example.com,roles=groups", "ftp://sso.example.com", "https://sso.example.com?x=1", "https://sso.example.com,audience",
            "https://sso.example.com,colour=red", "https://", "https://sso.example.com,client=x,secret-env=DOCKET_TEST_UNSET_VARIABLE",
        ] {
            #expect(throws: TrustedIssuerError.self, "\(bad)") { try TrustedIssuer.parse(bad) }
        }
    }

    @Test("a sign-in in progress is sealed for the browser: what comes back unchanged is read, anything altered is not")
    func sealed() throws {
        let sessions = WebSessions(secret: Array(repeating: 1, count: 64), secure: false)
        let value = JSONValue.object(["s": .string("state"), "i": .integer(0)])
        let sealed = sessions.seal(value)
        #expect(sessions.unseal(sealed) == value)
        let body = String(sealed.split(separator: ".")[0])
        #expect(sessions.unseal(Base64URL.encode(Array(#"{"s":"state","i":1}"#.utf8)) + "." + sealed.split(separator: ".")[1]) == nil)
        #expect(sessions.unseal(body) == nil)
        #expect(WebSessions(secret: Array(repeating: 2, count: 64), secure: false).unseal(sealed) == nil)
    }

    @Test("a token that names no trusted issuer is left to docketd's own kinds; the allow-list has no shared-secret or none algorithm")
    func issuerOf() throws {
        let issuers = TrustedIssuers([TrustedIssuer(issuer: "https://sso.example.com")])
        func token(_ payload: String) -> String { Base64URL.encode(Array(#"{"alg":"RS256"}"#.utf8)) + "." + Base64URL.encode(Array(payload.utf8)) + ".sig" }
        #expect(issuers.issuer(of: token(#"{"iss":"https://sso.example.com"}"#))?.issuer == "https://sso.example.com")
        #expect(issuers.issuer(of: token(#"{"iss":"https://sso.example.com/"}"#)) == nil)
        #expect(issuers.issuer(of: token(#"{"sub":"x"}"#)) == nil)
        #expect(issuers.issuer(of: "not-a-jwt") == nil)
        #expect(!TrustedIssuers.allowedAlgorithms.contains("none") && !TrustedIssuers.allowedAlgorithms.contains { $0.hasPrefix("HS") })
        // A provider's absurd dates are clamped, never a trap (and never overflow when the leeway is added).
        #expect(TrustedIssuers.Claims.seconds(1e300) == 4_500_000_000_000_000)
        #expect(TrustedIssuers.Claims.seconds(-.infinity) < 0 && TrustedIssuers.Claims.seconds(.nan) < 0)  // NaN: long expired
        #expect(TrustedIssuers.Claims.seconds(1_700_000_000.9) == 1_700_000_000)
    }
}
