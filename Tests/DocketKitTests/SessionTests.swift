@testable import DocketKit
import Foundation
import Synchronization
import Testing

/// A transport that answers from a script and records what it was sent.
final class ScriptedTransport: Transport {
    private let state: Mutex<(responses: [HTTPResponseData], sent: [HTTPRequestData])>

    init(_ responses: [HTTPResponseData]) { state = Mutex((responses, [])) }

    var sent: [HTTPRequestData] { state.withLock { $0.sent } }

    func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
        try state.withLock { state in
            state.sent.append(request)
            guard !state.responses.isEmpty else { throw URLError(.cannotConnectToHost) }
            return state.responses.removeFirst()
        }
    }
}

func json(_ status: Int, _ body: String, headers: [String: [String]] = [:]) -> HTTPResponseData {
    HTTPResponseData(status: status, headers: headers, body: Data(body.utf8))
}

@Suite("Session behaviour")
struct SessionTests {
    let ok = json(200, #"{"result":[]}"#)

    @Test("Basic on the first request, then cookies only; a 401 logs in again once")
    func cookiesAndRelogin() async throws {
        let transport = ScriptedTransport([
            json(200, #"{"result":[]}"#, headers: ["Set-Cookie": ["JSESSIONID=ABC; Path=/; HttpOnly"]]),
            json(200, #"{"result":[]}"#),
            json(401, #"{"error":{"message":"User is not authenticated","detail":null},"status":"failure"}"#),
            json(200, #"{"result":[]}"#, headers: ["Set-Cookie": ["JSESSIONID=DEF; Path=/"]]),
        ])
        let client = try DocketClient(instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: transport)
        _ = try await client.table.records(in: "incident")
        _ = try await client.table.records(in: "incident")
        _ = try await client.table.records(in: "incident")
        let sent = transport.sent
        #expect(sent.count == 4)
        #expect(sent[0].headers["Authorization"]?.hasPrefix("Basic ") == true)
        #expect(sent[1].headers["Authorization"] == nil)
        #expect(sent[1].headers["Cookie"] == "JSESSIONID=ABC")
        #expect(sent[2].headers["Cookie"] == "JSESSIONID=ABC")
        #expect(sent[3].headers["Authorization"]?.hasPrefix("Basic ") == true)
    }

    @Test("a 401 to Basic credentials is final")
    func wrongPassword() async throws {
        let transport = ScriptedTransport([json(401, #"{"error":{"message":"User is not authenticated"}}"#)])
        let client = try DocketClient(instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: transport)
        await #expect { _ = try await client.table.records(in: "incident") } throws: { ($0 as? DocketError)?.status == 401 }
        #expect(transport.sent.count == 1)
    }

    @Test("429 waits Retry-After and retries, a bounded number of times")
    func rateLimit() async throws {
        let limited = json(429, #"{"error":{"message":"Rate limit exceeded"}}"#, headers: ["Retry-After": ["0"]])
        let transport = ScriptedTransport([limited, limited, json(200, #"{"result":[]}"#)])
        let client = try DocketClient(instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: transport)
        let page = try await client.table.records(in: "incident")
        #expect(page.records.isEmpty)
        #expect(transport.sent.count == 3)

        let stubborn = ScriptedTransport([limited, limited, limited])
        let giveUp = try DocketClient(
            instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: stubborn,
            retryPolicy: .init(maximumRetries: 2, maximumDelay: .seconds(1))
        )
        await #expect { _ = try await giveUp.table.records(in: "incident") } throws: { ($0 as? DocketError)?.status == 429 }
        #expect(stubborn.sent.count == 3)
    }

    @Test("OAuth: password grant, bearer token, refresh grant when the token is rejected")
    func oauth() async throws {
        let transport = ScriptedTransport([
            json(200, #"{"access_token":"A1","refresh_token":"R1","token_type":"Bearer","expires_in":1799,"scope":"useraccount"}"#),
            json(200, #"{"result":[]}"#),
            json(401, #"{"error":{"message":"User is not authenticated"}}"#),
            json(200, #"{"access_token":"A2","refresh_token":"R1","token_type":"Bearer","expires_in":1799}"#),
            json(200, #"{"result":[]}"#),
        ])
        let client = try DocketClient(
            instance: "http://x.test", credentials: .oauth(clientID: "c", clientSecret: "s", userName: "u", password: "p"),
            transport: transport
        )
        _ = try await client.table.records(in: "incident")
        _ = try await client.table.records(in: "incident")
        let sent = transport.sent
        #expect(sent.map(\.url.path) == ["/oauth_token.do", "/api/now/table/incident", "/api/now/table/incident", "/oauth_token.do", "/api/now/table/incident"])
        #expect(String(decoding: sent[0].body ?? Data(), as: UTF8.self).contains("grant_type=password"))
        #expect(sent[0].headers["Content-Type"] == "application/x-www-form-urlencoded")
        #expect(sent[1].headers["Authorization"] == "Bearer A1")
        #expect(String(decoding: sent[3].body ?? Data(), as: UTF8.self).contains("grant_type=refresh_token&client_id=c&client_secret=s&refresh_token=R1"))
        #expect(sent[4].headers["Authorization"] == "Bearer A2")
    }

    @Test("OpenID: however many requests need a token at once, one refresh serves them; the rotated refresh token is reported once, to be saved; a refused refresh is loginExpired")
    func openIDSingleFlight() async throws {
        final class Provider: Transport {
            let refreshes = Mutex<[String]>([])
            func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
                if request.url.path.hasSuffix("/token") {
                    let body = String(decoding: request.body ?? Data(), as: UTF8.self)
                    let used = body.components(separatedBy: "refresh_token=").last ?? ""
                    let count = refreshes.withLock { $0.append(used); return $0.count }
                    try await Task.sleep(for: .milliseconds(50))
                    guard used == "R\(count)" else { return json(400, #"{"error":"invalid_grant","error_description":"reused"}"#) }
                    return json(200, #"{"access_token":"A\#(count)","refresh_token":"R\#(count + 1)","token_type":"Bearer","expires_in":300}"#)
                }
                return json(200, #"{"result":[]}"#)
            }
        }
        let provider = Provider()
        let saved = Mutex<[Credentials]>([])
        let login = OpenIDLogin(
            issuer: "http://x.test/realms/docket", tokenEndpoint: "http://x.test/realms/docket/protocol/openid-connect/token",
            clientID: "docket-cli", clientSecret: "docket-cli", userName: "john.doe", refreshToken: "R1"
        )
        let session = DocketSession(
            instance: try Instance("http://x.test"), credentials: .openID(login), transport: provider,
            credentialsDidChange: { credentials in saved.withLock { $0.append(credentials) } }
        )
        let client = DocketClient(session: session)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 { group.addTask { _ = try await client.table.records(in: "incident") } }
            try await group.waitForAll()
        }
        #expect(provider.refreshes.withLock { $0 } == ["R1"])
        #expect(saved.withLock { $0 }.count == 1)
        guard case .openID(let rotated) = saved.withLock({ $0.first }) else { Issue.record("nothing saved"); return }
        #expect(rotated.refreshToken == "R2")
        #expect(await session.openIDLogin?.refreshToken == "R2")
        // A spent refresh token: the sign-in has ended.
        let stale = DocketClient(session: DocketSession(instance: try Instance("http://x.test"), credentials: .openID(login), transport: provider))
        do {
            _ = try await stale.table.records(in: "incident")
            Issue.record("a spent refresh token worked")
        } catch let error as DocketError {
            #expect(error.kind == .loginExpired)
        }
    }

    @Test("logout says whether the instance ended the login: a revoked OpenID sign-in is ended; a refused or unreachable revocation, or none to call, is not confirmed")
    func logoutOutcome() async throws {
        struct Unreachable: Error {}
        final class Revoker: Transport {
            let status: Int?
            let requests = Mutex<[String]>([])
            init(status: Int?) { self.status = status }
            func send(_ request: HTTPRequestData) async throws -> HTTPResponseData {
                requests.withLock { $0.append(request.url.path) }
                guard let status else { throw Unreachable() }
                return json(status, status == 200 ? "{}" : #"{"error":"invalid_client","error_description":"no such client"}"#)
            }
        }
        let login = OpenIDLogin(
            issuer: "http://x.test/realms/docket", tokenEndpoint: "http://x.test/realms/docket/protocol/openid-connect/token",
            revocationEndpoint: "http://x.test/realms/docket/protocol/openid-connect/revoke", clientID: "docket-cli",
            userName: "john.doe", refreshToken: "R1"
        )
        for (status, ended) in [(200, true), (401, false), (nil, false)] as [(Int?, Bool)] {
            let transport = Revoker(status: status)
            let outcome = await DocketSession(instance: try Instance("http://x.test"), credentials: .openID(login), transport: transport).logout()
            #expect((outcome == .ended) == ended, "\(String(describing: status)): \(outcome)")
            #expect(transport.requests.withLock { $0 } == ["/realms/docket/protocol/openid-connect/revoke"])
        }
        var unrevocable = login
        unrevocable.revocationEndpoint = nil
        let outcome = await DocketSession(instance: try Instance("http://x.test"), credentials: .openID(unrevocable), transport: Revoker(status: 200)).logout()
        #expect(outcome == .notConfirmed("the provider has no revocation endpoint"))
        // A password login has nothing to end on the instance.
        #expect(await DocketSession(instance: try Instance("http://x.test"), credentials: .basic(userName: "a", password: "b"), transport: Revoker(status: nil)).logout() == .ended)
    }

    @Test("the login kept after an OpenID sign-in: the provider's endpoints, the client, the user the access token names and the refresh token; none without a refresh token")
    func openIDLoginFromTokens() throws {
        let payload = Data(#"{"sub":"u1","preferred_username":"john.doe"}"#.utf8).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        let configuration = try JSONDecoder().decode(OpenIDConfiguration.self, from: Data(#"""
            {"issuer":"http://x.test/realms/docket","token_endpoint":"http://x.test/t","revocation_endpoint":"http://x.test/r"}
            """#.utf8))
        let tokens = OpenIDTokens(accessToken: "h." + payload + ".s", refreshToken: "R1", idToken: nil, expiresIn: 300)
        let login = try OpenIDLogin(tokens: tokens, configuration: configuration, clientID: "docket-mobile")
        #expect(login == OpenIDLogin(
            issuer: "http://x.test/realms/docket", tokenEndpoint: "http://x.test/t", revocationEndpoint: "http://x.test/r",
            clientID: "docket-mobile", userName: "john.doe", refreshToken: "R1"
        ))
        var withoutRefresh = tokens
        withoutRefresh.refreshToken = nil
        #expect(throws: DocketError.self) { try OpenIDLogin(tokens: withoutRefresh, configuration: configuration, clientID: "docket-mobile") }
    }

    @Test("credentials are never sent to another host")
    func foreignLinks() async throws {
        let transport = ScriptedTransport([])
        let client = try DocketClient(instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: transport)
        await #expect(throws: DocketError.self) { _ = try await client.session.send("GET", url: URL(string: "http://evil.test/x")!) }
        #expect(transport.sent.isEmpty)
    }

    @Test("instance names become ServiceNow URLs; URLs stay as given")
    func instances() throws {
        #expect(try Instance("acme").baseURL.absoluteString == "https://acme.service-now.com")
        #expect(try Instance("http://127.0.0.1:8080/").baseURL.absoluteString == "http://127.0.0.1:8080")
        #expect(try Instance("docket.example.com").baseURL.absoluteString == "https://docket.example.com")
        #expect(throws: DocketError.self) { try Instance("not a url") }
        #expect(throws: DocketError.self) { try Instance("ftp://x") }
    }

    @Test("the file credential store is readable only by its owner")
    func fileStore() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = FileCredentialStore(directory: directory)
        let instance = try Instance("acme")
        #expect(try store.credentials(for: instance) == nil)
        try store.save(.basic(userName: "u", password: "secret"), for: instance)
        #expect(try store.credentials(for: instance) == .basic(userName: "u", password: "secret"))
        let mode = try FileManager.default.attributesOfItem(atPath: store.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try store.delete(for: instance)
        #expect(try store.credentials(for: instance) == nil)
        #expect(FileCredentialStore.defaultDirectory(environment: ["XDG_CONFIG_HOME": "/x"]).path == "/x/docket")
        #expect(FileCredentialStore.defaultDirectory(environment: ["HOME": "/home/u"]).path == "/home/u/.config/docket")
    }

    @Test("a credentials file that cannot be read or understood is an error, and a save after it keeps it; saves from many at once keep every instance")
    func fileStoreFailures() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("docket-store-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = FileCredentialStore(directory: directory)
        let first = try Instance("acme")
        try store.save(.basic(userName: "u", password: "secret"), for: first)
        // Damaged: refused, never taken as empty (the next save would wipe the other logins).
        try Data("{not json".utf8).write(to: store.url)
        #expect(throws: DocketError.self) { try store.credentials(for: first) }
        #expect(throws: DocketError.self) { try store.save(.basic(userName: "v", password: "other"), for: try Instance("globex")) }
        #expect(try Data(contentsOf: store.url) == Data("{not json".utf8))
        // Unreadable (a folder where the file should be): an error too, not "no credentials".
        try FileManager.default.removeItem(at: store.url)
        try FileManager.default.createDirectory(at: store.url, withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { try store.credentials(for: first) }
        try FileManager.default.removeItem(at: store.url)
        // Twenty programs logging in to twenty instances at once: all twenty kept, the file always whole.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<20 {
                group.addTask {
                    try FileCredentialStore(directory: directory).save(.basic(userName: "u\(index)", password: "p"), for: try Instance("i\(index)"))
                }
            }
            try await group.waitForAll()
        }
        for index in 0..<20 {
            #expect(try store.credentials(for: try Instance("i\(index)")) == .basic(userName: "u\(index)", password: "p"))
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".new-") }
        #expect(leftovers.isEmpty)
    }

    @Test("repeated Set-Cookie headers joined by Foundation split back correctly")
    func cookieSplitting() {
        #expect(URLSessionTransport.splitCookies("A=1; Path=/, B=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly, C=3")
            == ["A=1; Path=/", "B=2; Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly", "C=3"])
    }
}

@Suite("Cookies")
struct CookieTests {
    @Test("Expires and Max-Age are honoured: a cookie past its expiry is neither sent nor saved")
    func expiry() async throws {
        let transport = ScriptedTransport([
            json(200, #"{"result":[]}"#, headers: ["Set-Cookie": [
                "JSESSIONID=ABC; Path=/; HttpOnly", "SHORT=1; Max-Age=1; Path=/", "OLD=2; Expires=Wed, 21 Oct 2015 07:28:00 GMT; Path=/",
                "LONG=3; Expires=Wed, 21 Oct 2099 07:28:00 GMT; Path=/", "GONE=4; Max-Age=0; Path=/",
            ]]),
            json(200, #"{"result":[]}"#),
            json(200, #"{"result":[]}"#, headers: ["Set-Cookie": ["LONG=; Max-Age=0; Path=/"]]),
            json(200, #"{"result":[]}"#),
        ])
        let client = try DocketClient(instance: "http://x.test", credentials: .basic(userName: "u", password: "p"), transport: transport)
        _ = try await client.table.records(in: "incident")
        _ = try await client.table.records(in: "incident")
        #expect(transport.sent[1].headers["Cookie"] == "JSESSIONID=ABC; LONG=3; SHORT=1")
        try await Task.sleep(for: .milliseconds(1_100))
        _ = try await client.table.records(in: "incident")
        #expect(transport.sent[2].headers["Cookie"] == "JSESSIONID=ABC; LONG=3")
        _ = try await client.table.records(in: "incident")
        #expect(transport.sent[3].headers["Cookie"] == "JSESSIONID=ABC")
        #expect(await client.session.sessionCookies == ["JSESSIONID": "ABC"])
    }

    @Test("one Set-Cookie header as Foundation reads it: dates in their forms, Max-Age over Expires")
    func parsing() throws {
        let url = try #require(URL(string: "https://x.test/api"))
        let session = try #require(DocketSession.cookie("A=1; Path=/; Secure; HttpOnly", from: url))
        #expect(session.name == "A" && session.value == "1" && session.expires == nil)
        let dated = try #require(DocketSession.cookie("B=2; Expires=Wed, 21 Oct 2099 07:28:00 GMT", from: url))
        #expect(dated.expires == Date(timeIntervalSince1970: 4_096_250_880))
        let both = try #require(DocketSession.cookie("C=3; Expires=Wed, 21 Oct 2099 07:28:00 GMT; Max-Age=60", from: url))
        #expect(both.expires.map { abs($0.timeIntervalSinceNow - 60) < 5 } == true)
        let deleted = try #require(DocketSession.cookie("D=; Max-Age=0", from: url))
        #expect(deleted.value.isEmpty)
    }
}
