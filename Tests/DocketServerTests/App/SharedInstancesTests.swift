import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@testable import DocketServer

/// Two docketd applications on one PostgreSQL database, as behind a load balancer: a client may send each
/// request to either and sees one service. Runs when `DOCKET_TEST_POSTGRES_URL` names a server.
@Suite("Several instances, one service", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct SharedInstancesTests {
    static func withTwoApps(
        configure: (inout Configuration) -> Void = { _ in },
        _ test: @Sendable (any TestClientProtocol, any TestClientProtocol) async throws -> Void
    ) async throws {
        let directoryA = TemporaryDirectory()
        let directoryB = TemporaryDirectory()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directoryA.path)
        configure(&configuration)
        var other = configuration
        other.dataDirectory = directoryB.path
        let a = try await buildApplication(configuration)
        let b = try await buildApplication(other)
        try await a.test(.router) { clientA in
            try await b.test(.router) { clientB in try await test(clientA, clientB) }
        }
    }

    static func cookie(_ response: TestResponse) throws -> String {
        try #require(response.headers[.setCookie]?.split(separator: ";").first.map(String.init))
    }

    @Test("several instances started at once on an empty database all start; the command-line client is offered once")
    func concurrentStart() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("docket-start-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: base) }
        let started = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<3 {
                group.addTask {
                    var configuration = TestApp.configuration(dataDirectory: base + "/\(index)", demo: false)
                    configuration.database = location
                    let app = try await buildApplication(configuration)
                    return try await app.test(.router) { client in
                        try await client.get("/health", [:]).status == .ok
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(started == [true, true, true])
        let storage = try await location.open(logger: Logger(label: "test"))
        let clients = try await storage.read { db in
            try await db.integer("SELECT COUNT(*) FROM oauth_entity WHERE client_id = 'docket-cli'")
        }
        try await storage.close()
        #expect(clients == 1)
    }

    @Test("a start waits while another instance holds the write lock past one lock wait (preparing the database on a slow machine)")
    func startWaitsForTheWriteLock() async throws {
        let location = try #require(TestDatabase.freshPostgres())
        let other = try await location.open(logger: Logger(label: "test"))
        let starting = try await location.open(logger: Logger(label: "test"))
        do {
            let (held, holding) = AsyncStream<Void>.makeStream()
            // Another instance's write, held past PostgreSQL's lock_timeout for the instances waiting behind it.
            let holder = Task {
                try await other.write { db in
                    try await db.run("SELECT 1")
                    holding.yield()
                    try await Task.sleep(for: PostgresStorage.leaseTimeout + .seconds(2))
                }
            }
            for await _ in held { break }
            let isNew = try await SchemaStore.prepare(starting, lockWait: .seconds(60))
            try await holder.value
            #expect(isNew)
            #expect(try await starting.read { db in try await db.integer("SELECT COUNT(*) FROM sys_db_object") } > 0)
        } catch {
            try? await other.close()
            try? await starting.close()
            throw error
        }
        try await other.close()
        try await starting.close()
    }

    @Test("a session started on one instance works on the other, and a logout on either ends it on both")
    func sessions() async throws {
        try await Self.withTwoApps { a, b in
            let cookie = try Self.cookie(try await a.get("/api/now/table/incident?sysparm_limit=1", .john))
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .ok)
            #expect(try await a.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .ok)
            _ = try await b.execute(uri: "/logout.do", method: .post, headers: [.cookie: cookie], body: nil)
            #expect(try await a.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .unauthorized)
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .unauthorized)
        }
    }

    @Test("wrong passwords spread over both instances are throttled as one")
    func sharedThrottle() async throws {
        // A first wait long enough that a machine busy with other tests cannot outlast it between two requests.
        try await Self.withTwoApps(configure: { $0.loginThrottle.firstDelay = .seconds(30) }) { a, b in
            // The demo allows five failures of one user from one address: three here, three there.
            for client in [a, b, a, b, a] {
                #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .basic("beth.anglin", "wrong")).status == .unauthorized)
            }
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .basic("beth.anglin", "wrong")).status == .unauthorized)
            // The sixth failure was past the allowance: the next attempt waits, on either instance.
            let throttled = try await a.get("/api/now/table/incident?sysparm_limit=1", .basic("beth.anglin", "password"))
            #expect(throttled.status == .tooManyRequests)
            #expect(throttled.headers[.retryAfter] != nil)
        }
    }

    @Test("a password changed through one instance ends the old password, sessions and tokens on the other at once")
    func passwordChange() async throws {
        try await Self.withTwoApps { a, b in
            // B verified (and remembers) john's password, and holds a session and a token of his.
            let cookie = try Self.cookie(try await b.get("/api/now/table/incident?sysparm_limit=1", .john))
            let token = try await b.passwordGrant().string("access_token")
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .ok)
            let patched = try await a.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("john.doe"))", json: #"{"password":"changed-password"}"#,
                headers: .admin
            )
            #expect(patched.status == .ok)
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .john).status == .unauthorized)
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .unauthorized)
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .unauthorized)
            #expect(
                try await b.get("/api/now/table/incident?sysparm_limit=1", .basic("john.doe", "changed-password")).status == .ok
            )
        }
    }

    @Test("a token revoked through one instance is refused by the other")
    func revocation() async throws {
        try await Self.withTwoApps { a, b in
            let token = try await a.passwordGrant().string("access_token")
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .ok)
            let revoked = try await a.form("/oauth_revoke_token.do", "token=\(token)")
            #expect(revoked.status == .ok)
            #expect(try await b.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .unauthorized)
        }
    }

    @Test("OpenID: a token issued by one instance works on the other; a revocation, a logout or a new password through one stops it on the other at once; a refresh token rotated on one is spent on both")
    func openID() async throws {
        try await Self.withTwoApps { a, b in
            func works(_ access: String, on client: any TestClientProtocol) async throws -> Bool {
                try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(access)).status == .ok
            }
            let first = try await OpenIDTests.passwordGrant(a)
            let access = try #require(first["access_token"]?.stringValue)
            #expect(try await works(access, on: b))
            // Rotated on B, the old refresh token is spent on A too; replaying it ends the sign-in everywhere.
            let refreshed = try await OpenIDTests.post(b, OpenIDTests.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", try #require(first["refresh_token"]?.stringValue)),
            ])
            #expect(refreshed.status == .ok)
            let replay = try await OpenIDTests.post(a, OpenIDTests.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", try #require(first["refresh_token"]?.stringValue)),
            ])
            #expect(try replay.json["error"]?.stringValue == "invalid_grant")
            #expect(try await !works(try #require(try refreshed.json["access_token"]?.stringValue), on: b))
            // Revoked through A, refused by B.
            let second = try await OpenIDTests.passwordGrant(b)
            let secondAccess = try #require(second["access_token"]?.stringValue)
            #expect(try await works(secondAccess, on: b))
            let revoked = try await OpenIDTests.post(a, OpenIDTests.endpoints + "/revoke", [("token", secondAccess), ("client_id", "datasync-starter-client")])
            #expect(revoked.status == .ok)
            #expect(try await !works(secondAccess, on: b))
            // A new password through A ends the sign-ins B knows.
            let third = try await OpenIDTests.passwordGrant(b)
            let thirdAccess = try #require(third["access_token"]?.stringValue)
            #expect(try await works(thirdAccess, on: b))
            let patched = try await a.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("john.doe"))", json: #"{"password":"changed-password"}"#, headers: .admin
            )
            #expect(patched.status == .ok)
            #expect(try await !works(thirdAccess, on: b))
        }
    }

    @Test("a rate limit counts requests to every instance together, also when they come at once")
    func rateLimits() async throws {
        try await Self.withTwoApps { a, b in
            let rule = try await a.send(
                .post, "/api/now/table/sys_rate_limit_rules",
                json: #"{"name":"itil table","resource":"table","type":"role","role":"itil","rate_limit":"10"}"#, headers: .admin
            )
            #expect(rule.status == .created)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for index in 0..<16 {
                    group.addTask { try await (index % 2 == 0 ? a : b).get("/api/now/table/incident?sysparm_limit=1").status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .ok }.count == 10)
            #expect(statuses.filter { $0 == .tooManyRequests }.count == 6)
        }
    }

    @Test("a record changed through one instance reads changed through the other; a table added is there")
    func recordsAndSchema() async throws {
        try await Self.withTwoApps { a, b in
            let uri = "/api/now/table/incident/\(Demo.incident1)?sysparm_fields=short_description"
            #expect(try await b.get(uri, .admin).status == .ok)
            let patched = try await a.send(.patch, uri, json: #"{"short_description":"Changed through A"}"#, headers: .admin)
            #expect(patched.status == .ok)
            #expect(try await b.get(uri, .admin).result.string("short_description") == "Changed through A")
            let created = try await a.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"u_fleet","label":"Fleet"}"#, headers: .admin)
            #expect(created.status == .created)
            let made = try await b.send(.post, "/api/now/table/u_fleet", json: "{}", headers: .admin)
            #expect(made.status == .created)
        }
    }
}
