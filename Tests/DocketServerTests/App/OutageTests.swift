import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import HummingbirdTesting
import NIOCore
import SQLiteKit
import Synchronization
import Testing

@testable import DocketServer

/// A storage that fails on demand, around a real one: while `down`, every read and write fails as an unreachable
/// database does; `failNext` fails the next statement whose SQL matches (the storage's own COMMIT and ROLLBACK
/// included), through the real storage's ``StatementFaults``.
final class FaultyStorage: Storage {
    private let state = Mutex<(base: (any Storage)?, down: Bool)>((nil, false))

    /// Wraps the storage an app opens (``Configuration/wrapStorage``).
    func wrap(_ base: any Storage) -> any Storage {
        state.withLock { $0.base = base }
        return self
    }

    var base: any Storage { state.withLock { $0.base! } }
    var dialect: StorageDialect { base.dialect }
    var faults: StatementFaults { base.faults }

    func setDown(_ down: Bool) { state.withLock { $0.down = down } }

    func failNext(_ matches: @escaping @Sendable (String) -> Bool) { base.faults.failNext(matches) }

    static let outage = StorageUnavailable(reason: "the test cut the database off")

    private func check() throws {
        if state.withLock({ $0.down }) { throw Self.outage }
    }

    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try check()
        return try await base.read(body)
    }

    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try check()
        return try await base.write(scope: scope, body)
    }

    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T {
        try check()
        return try await base.writeUnordered(body)
    }

    func close() async throws { try await base.close() }
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>? { base.logSignals(ignoring: ignoring) }
    var isAlone: Bool { base.isAlone }
    func tryBeingAlone(catchingUp: @Sendable () async throws -> Void) async { await base.tryBeingAlone(catchingUp: catchingUp) }

    func latestEventSequence() async throws -> Int {
        try check()
        return try await base.latestEventSequence()
    }
}

@Suite("When the database is unavailable")
struct OutageTests {
    /// Runs `test` against a demo app whose storage fails on demand.
    static func withFaultyRouter(
        configure: (inout Configuration) -> Void = { _ in },
        _ test: @Sendable (any TestClientProtocol, FaultyStorage) async throws -> Void
    ) async throws {
        let faulty = FaultyStorage()
        try await TestApp.withRouter(configure: { configuration in
            configuration.wrapStorage = { faulty.wrap($0) }
            configuration.runsMaintenance = false
            configure(&configuration)
        }) { client in
            try await test(client, faulty)
        }
    }

    static func expectUnavailable(
        _ response: TestResponse, _ what: String, _ source: SourceLocation = #_sourceLocation
    ) {
        #expect(response.status == .serviceUnavailable, "\(what): \(response.status)", sourceLocation: source)
        #expect(response.headers[.retryAfter] == StorageUnavailable.retryAfter, "\(what)", sourceLocation: source)
    }

    @Test("every API answers 503 with Retry-After in its own error shape, never 401; the same credentials work when it is back")
    func everyDialect() async throws {
        try await Self.withFaultyRouter { client, faulty in
            // Credentials of every kind, while the database answers.
            let grant = try await client.passwordGrant()
            let bearer = HTTPFields.bearer(grant.string("access_token"))
            let first = try await client.get("/api/now/table/incident?sysparm_limit=1", .john)
            #expect(first.status == .ok)
            let cookie = try #require(WebBrowser.setCookies(first)["JSESSIONID"]?.split(separator: ";").first.map(String.init))
            let session: HTTPFields = [.cookie: cookie]
            let compass = try await CompassAPITests.login(client)
            let eto = try await ETOSecurityTests.siteToken(client)
            var browser = WebBrowser(client)
            _ = try await browser.signIn()
            #expect(try await browser.get("/app/work").status == .ok)

            faulty.setDown(true)
            for (what, headers) in [("bearer", bearer), ("basic", HTTPFields.john), ("cookie", session)] {
                let response = try await client.get("/api/now/table/incident?sysparm_limit=1", headers)
                Self.expectUnavailable(response, "Table API, \(what)")
                #expect(try response.json["status"]?.stringValue == "failure")
                #expect(try response.json["error"]?["message"]?.stringValue?.isEmpty == false)
            }
            // A token that cannot be looked up is no answer about the token: not 401.
            Self.expectUnavailable(try await client.get("/api/now/table/incident", .bearer("unknown-token")), "unknown bearer")
            let refused = try await client.passwordGrant()
            #expect(refused.string("error") == "temporarily_unavailable")
            let refresh = try await client.form(
                "/oauth_token.do",
                "grant_type=refresh_token&client_id=docket-demo&client_secret=docket-demo-secret&refresh_token=\(grant.string("refresh_token"))"
            )
            Self.expectUnavailable(refresh, "refresh grant")
            Self.expectUnavailable(
                try await client.get("/oauth_revoke_token.do?token=\(grant.string("access_token"))", [:]), "revocation"
            )
            Self.expectUnavailable(try await client.get("/logout.do", session), "logout")
            let defect = try await client.get(CompassAPITests.base + "/records/defect/SAMPL00000001", compass)
            Self.expectUnavailable(defect, "Compass")
            #expect(try defect.json["status"]?.intValue == 503)
            let programs = try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", eto.headers)
            Self.expectUnavailable(programs, "ETO")
            let tasks = try await DataSyncAPITests.apollo(client, nil, "{ allTasks { id } }", headers: bearer)
            Self.expectUnavailable(tasks, "DataSync")
            Self.expectUnavailable(try await browser.get("/app/work"), "web UI")
            for uri in [
                "/api/now/attachment?sysparm_limit=1", "/api/x_snc_my_work/v1/tracker/task",
                "/api/now/stats/incident?sysparm_count=true",
            ] {
                let response = try await client.get(uri, .john)
                Self.expectUnavailable(response, uri)
                #expect(try response.json["status"]?.stringValue == "failure", "\(uri)")
            }
            let graphQL = try await client.send(
                .post, "/api/now/graphql", json: #"{"query":"{ GlideRecord_Query { incident { _rowCount } } }"}"#
            )
            Self.expectUnavailable(graphQL, "Now GraphQL")
            // A batch reports each sub-request as it went: what could not reach the database is a 503 with
            // Retry-After of its own, the batch itself a 200 (earlier sub-requests may have committed).
            let batch = try await client.send(.post, "/api/now/batch", json: #"{"batch_request_id":"1","rest_requests":[{"id":"a","method":"GET","url":"/api/now/table/incident?sysparm_limit=1","headers":[]}]}"#)
            #expect(batch.status == .ok)
            let sub = try #require(try batch.json["serviced_requests"]?.arrayValue?.first)
            #expect(sub["status_code"] == .number(503))
            #expect(sub["headers"]?.arrayValue?.contains { $0.string("name").lowercased() == "retry-after" } == true, "\(sub)")
            let unhealthy = try await client.get("/health", [:])
            Self.expectUnavailable(unhealthy, "health")
            #expect(try unhealthy.json["status"]?.stringValue == "unavailable")

            faulty.setDown(false)
            for (what, headers) in [("bearer", bearer), ("basic", HTTPFields.john), ("cookie", session), ("compass", compass)] {
                let uri = what == "compass" ? CompassAPITests.base + "/records/defect/SAMPL00000001" : "/api/now/table/incident?sysparm_limit=1"
                #expect(try await client.get(uri, headers).status == .ok, "\(what) after the outage")
            }
            #expect(try await client.get("/API/Form.svc/Forms/Program/GetPrograms/101", eto.headers).status == .ok)
            #expect(try await browser.get("/app/work").status == .ok)
            // /health reuses a check for a second.
            var health = try await client.get("/health", [:])
            for _ in 0..<30 where health.status != .ok {
                try await Task.sleep(for: .milliseconds(100))
                health = try await client.get("/health", [:])
            }
            #expect(health.status == .ok)
            // The logout refused during the outage did not happen: the session still works, and ends now.
            #expect(try await client.get("/logout.do", session).status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", session).status == .unauthorized)
        }
    }

    @Test("the OpenID provider: its token endpoint, userinfo, revocation and an OpenID access token on the Table API answer 503 with Retry-After, never invalid_grant or 401; the token works again after")
    func openID() async throws {
        try await Self.withFaultyRouter { client, faulty in
            let grant = try await OpenIDTests.passwordGrant(client)
            let access = try #require(grant["access_token"]?.stringValue)
            let refresh = try #require(grant["refresh_token"]?.stringValue)
            faulty.setDown(true)
            let password = try await OpenIDTests.post(client, OpenIDTests.endpoints + "/token", [
                ("grant_type", "password"), ("client_id", "datasync-starter-client"), ("username", "john.doe"), ("password", "password"),
            ])
            Self.expectUnavailable(password, "password grant")
            #expect(try password.json["error"]?.stringValue == "temporarily_unavailable")
            let refreshed = try await OpenIDTests.post(client, OpenIDTests.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", refresh),
            ])
            Self.expectUnavailable(refreshed, "refresh grant")
            Self.expectUnavailable(try await client.get(OpenIDTests.endpoints + "/userinfo", .bearer(access)), "userinfo")
            Self.expectUnavailable(try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(access)), "Table API with an OpenID token")
            let revoked = try await OpenIDTests.post(client, OpenIDTests.endpoints + "/revoke", [("token", refresh), ("client_id", "datasync-starter-client")])
            Self.expectUnavailable(revoked, "revocation")
            faulty.setDown(false)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(access)).status == .ok)
            let after = try await OpenIDTests.post(client, OpenIDTests.endpoints + "/token", [
                ("grant_type", "refresh_token"), ("client_id", "datasync-starter-client"), ("refresh_token", refresh),
            ])
            #expect(after.status == .ok)
        }
    }

    @Test("a write refused during the outage left nothing behind")
    func refusedWrite() async throws {
        try await Self.withFaultyRouter { client, faulty in
            let before = try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount]
            faulty.setDown(true)
            Self.expectUnavailable(
                try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"during"}"#), "create"
            )
            faulty.setDown(false)
            // The commit itself fails: the write is rolled back and reported as not done. (With a comment, the
            // create is two statements, so also on PostgreSQL it commits with COMMIT.)
            faulty.failNext { $0 == "COMMIT" }
            Self.expectUnavailable(
                try await client.send(
                    .post, "/api/now/table/incident", json: #"{"short_description":"at commit","comments":"noted"}"#
                ),
                "commit"
            )
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == before)
            // The insert fails: on PostgreSQL a plain create is that one statement, run on its own (no COMMIT).
            faulty.failNext { $0.hasPrefix("WITH docket_inserted") || $0.hasPrefix("INSERT INTO  (") }
            Self.expectUnavailable(
                try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"at insert"}"#), "insert"
            )
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == before)
            let done = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"after"}"#)
            #expect(done.status == .created)
        }
    }

    @Test(
        "a create whose insert committed and whose answer was lost (or could not be decoded) is answered 201 with the row as committed, stored once",
        arguments: [false, true]
    )
    func lostAnswer(undecodable: Bool) async throws {
        try await Self.withFaultyRouter { client, faulty in
            let count = { try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount].flatMap { Int($0) } }
            let before = try #require(try await count())
            // On PostgreSQL the insert is the whole write, commits on its own, and none of its rows come back (its
            // number, its row, its event's number). On SQLite the write reads nothing from the insert (the row is read
            // after it, in the transaction), so the same fault changes nothing there.
            // Or its rows come back and a value of them cannot be decoded (PostgreSQL's runner reads the rest, and says
            // the statement ran: ``UndecodableAnswer``).
            if undecodable {
                faulty.faults.spoilAnswerOfNext { $0.hasPrefix("WITH docket_inserted") }
            } else {
                faulty.faults.loseAnswerOfNext { $0.hasPrefix("WITH docket_inserted") || $0.hasPrefix("INSERT INTO  (") }
            }
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"answer lost"}"#)
            #expect(created.status == .created)
            let result = try created.json["result"]
            #expect(result?["short_description"]?.stringValue == "answer lost")
            let number = try #require(result?["number"]?.stringValue)
            #expect(number.hasPrefix("INC"))
            let sysID = try #require(result?["sys_id"]?.stringValue)
            #expect(created.headers[.location]?.hasSuffix("/api/now/table/incident/\(sysID)") == true)
            #expect(try await count() == before + 1)
            let read = try await client.get("/api/now/table/incident/\(sysID)")
            #expect(try read.json["result"]?["number"]?.stringValue == number)
        }
    }

    @Test(
        "a create in a transaction whose insert's answer was lost (or could not be decoded) is rolled back: a failure, nothing stored; the next write works",
        arguments: [false, true]
    )
    func lostAnswerInTransaction(undecodable: Bool) async throws {
        try await Self.withFaultyRouter { client, faulty in
            let count = { try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount].flatMap { Int($0) } }
            let before = try #require(try await count())
            // With a field through a reference in its answer the create is BEGIN, the insert, the answer's read and
            // COMMIT on PostgreSQL: the insert's rows lost there fail the write before COMMIT, which rolls it back.
            // (SQLite's insert is another statement, which the fault does not match: that create is stored as usual.)
            if undecodable {
                faulty.faults.spoilAnswerOfNext { $0.hasPrefix("WITH docket_inserted") }
            } else {
                faulty.faults.loseAnswerOfNext { $0.hasPrefix("WITH docket_inserted") }
            }
            let failed = try await client.send(
                .post, "/api/now/table/incident?sysparm_fields=number,caller_id.user_name",
                json: #"{"short_description":"answer lost","comments":"noted"}"#
            )
            if faulty.dialect == .postgres { #expect(failed.status == .internalServerError) }
            #expect(try await count() == before + (faulty.dialect == .postgres ? 0 : 1))
            let next = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"next","comments":"noted"}"#)
            #expect(next.status == .created)
            #expect(try await count() == before + (faulty.dialect == .postgres ? 1 : 2))
        }
    }

    @Test("a transaction whose rollback failed does not leave its connection inside it: the next write works")
    func failedRollback() async throws {
        try await Self.withFaultyRouter { client, faulty in
            let before = try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount]
            faulty.failNext { $0 == "COMMIT" }
            faulty.failNext { $0 == "ROLLBACK" }
            Self.expectUnavailable(
                try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"lost","comments":"noted"}"#),
                "commit"
            )
            let done = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"after"}"#)
            #expect(done.status == .created)
            let count = try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount]
            #expect(count.flatMap { Int($0) } == before.flatMap { Int($0) }.map { $0 + 1 })
        }
    }

    @Test("a schema change whose catalog could not be read again after its commit is answered as committed")
    func reloadAfterCommit() async throws {
        try await Self.withFaultyRouter { client, faulty in
            let admin = HTTPFields.basic("admin", "admin")
            // A new choice changes the catalog, which is read again after the commit: that read fails.
            faulty.failNext { $0.hasPrefix("SELECT sys_id, name, label, super_class") }
            let choice = try await client.send(
                .post, "/api/now/table/sys_choice",
                json: #"{"name":"incident","element":"urgency","value":"4","label":"4 - Trivial"}"#, headers: admin
            )
            #expect(choice.status == .created)
            // The catalog is read again in the background: the new choice becomes usable.
            var incident = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"trivial","urgency":"4"}"#)
            for _ in 0..<30 where incident.status != .created {
                try await Task.sleep(for: .milliseconds(200))
                incident = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"trivial","urgency":"4"}"#)
            }
            #expect(incident.status == .created)
        }
    }

    @Test("a session whose logout could not be recorded still works; it is not ended in memory only")
    func failedLogout() async throws {
        try await Self.withFaultyRouter { client, faulty in
            let first = try await client.get("/api/now/table/incident?sysparm_limit=1", .john)
            let cookie = try #require(WebBrowser.setCookies(first)["JSESSIONID"]?.split(separator: ";").first.map(String.init))
            faulty.failNext { $0.hasPrefix("DELETE") }
            Self.expectUnavailable(try await client.get("/logout.do", [.cookie: cookie]), "logout")
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .ok)
        }
    }

    @Test("SQLite locked by another process: writes are answered 503 within the bounded wait, and work once it lets go")
    func sqliteLocked() async throws {
        guard TestDatabase.freshPostgres() == nil else { return }
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        let path = configuration.databasePath
        try await buildApplication(configuration).test(.router) { client in
            let other = try await SQLiteConnection.open(storage: .file(path: path))
            do {
                let before = try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount]
                _ = try await other.query("BEGIN EXCLUSIVE").get()
                let writes = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                    for index in 0..<3 {
                        group.addTask {
                            try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"locked \#(index)"}"#)
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                for write in writes { Self.expectUnavailable(write, "write while locked") }
                _ = try await other.query("ROLLBACK").get()
                #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == before)
                #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"free"}"#).status == .created)
            } catch {
                try? await other.close()
                throw error
            }
            try await other.close()
        }
    }
}

@Suite("The write queue")
struct AsyncLockTests {
    @Test("a waiter gives up after its timeout with StorageUnavailable; a cancelled one leaves the queue; the lock still works")
    func boundedWaits() async throws {
        let lock = AsyncLock()
        let (released, release) = AsyncStream<Void>.makeStream()
        let (held, holding) = AsyncStream<Void>.makeStream()
        let holder = Task {
            try await lock.withLock {
                holding.yield()
                for await _ in released { break }
            }
        }
        for await _ in held { break }
        await #expect(throws: StorageUnavailable.self) {
            try await lock.withLock(timeout: .milliseconds(100)) {}
        }
        let cancelled = Task { try await lock.withLock(timeout: .seconds(60)) {} }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        release.yield()
        try await holder.value
        try await lock.withLock(timeout: .seconds(1)) {}
    }

    @Test("a write stuck ahead makes the next one fail with StorageUnavailable, not wait for it, on every storage", .timeLimit(.minutes(1)))
    func stuckWriteAhead() async throws {
        try await TestApp.withStore { store in
            let (entered, entering) = AsyncStream<Void>.makeStream()
            let (released, release) = AsyncStream<Void>.makeStream()
            let stuck = Task {
                try await store.storage.write { db in
                    entering.yield()
                    for await _ in released { break }
                }
            }
            for await _ in entered { break }
            // However many writers a process lets through (SQLite one, PostgreSQL a few waiting on the server's
            // lock), those behind the stuck one give up within the bound instead of waiting for it.
            let behind = (0..<4).map { _ in Task { try await store.storage.write { _ in } } }
            for writer in behind {
                await #expect(throws: StorageUnavailable.self) { try await writer.value }
            }
            release.yield()
            try await stuck.value
            try await store.storage.write { _ in }
        }
    }

    @Test("a caller already cancelled (a shutdown, a test past its time limit) still closes an SQLite storage: what comes after is refused")
    func closeWhenCancelled() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await SQLiteStorage.open(path: directory.path + "/test.sqlite", readers: 2, logger: Logger(label: "test"))
        let closing = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await storage.close()
        }
        // Left open, the connections would also trip SQLiteNIO's assertion when the storage goes away.
        try await closing.value
        await #expect(throws: StorageUnavailable.self) { try await storage.read { _ in } }
        await #expect(throws: StorageUnavailable.self) { try await storage.write { _ in } }
    }

    @Test("with three permits three hold it at once, a fourth waits for one of them, and none is lost")
    func permits() async throws {
        let lock = AsyncLock(permits: 3)
        let inside = Shared((now: 0, most: 0))
        let (released, release) = AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded)
        let (entered, entering) = AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded)
        var holders: [Task<Void, any Error>] = []
        for _ in 0..<3 {
            holders.append(Task {
                try await lock.withLock(timeout: .seconds(5)) {
                    inside.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                    entering.yield()
                    for await _ in released { break }
                    inside.withLock { $0.now -= 1 }
                }
            })
        }
        var count = 0
        for await _ in entered {
            count += 1
            if count == 3 { break }
        }
        // All three are inside: a fourth cannot be.
        await #expect(throws: StorageUnavailable.self) {
            try await lock.withLock(timeout: .milliseconds(100)) {}
        }
        let fourth = Task { try await lock.withLock(timeout: .seconds(5)) { inside.withLock { $0.now } } }
        release.yield()
        // The fourth gets in only after one left: never more than three at once.
        #expect(try await fourth.value <= 2)
        release.yield()
        release.yield()
        for holder in holders { try await holder.value }
        #expect(inside.withLock { $0.most } == 3)
        // Every permit came back: three get in together again (each waits inside until all three are).
        let again = Shared(0)
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await lock.withLock(timeout: .seconds(2)) {
                        again.withLock { $0 += 1 }
                        for _ in 0..<200 where again.withLock({ $0 }) < 3 { try await Task.sleep(for: .milliseconds(10)) }
                        return again.withLock { $0 } == 3
                    }
                }
            }
            for try await together in group { #expect(together) }
        }
    }
}

/// A value tasks share.
private final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<T: Sendable>(_ body: (inout sending Value) -> T) -> T { value.withLock { body(&$0) } }
}

@Suite("Shared work")
struct SharedWorkTests {
    struct Key: SequencedKey {
        let sequence: Int
    }

    @Test("a failure is not kept: the next to ask computes again")
    func failureForgotten() async throws {
        let work = SharedWork<Key, Int>(capacity: 16)
        await #expect(throws: StorageUnavailable.self) {
            try await work.value(Key(sequence: 1)) { throw FaultyStorage.outage }
        }
        #expect(try await work.value(Key(sequence: 1)) { 42 } == 42)
        // A success is kept.
        #expect(try await work.value(Key(sequence: 1)) { 7 } == 42)
    }
}

@Suite("Sessions per client")
struct SessionPerClientTests {
    @Test("each Basic client of a user gets its own session: a logout on one leaves the other signed in")
    func ownSessions() async throws {
        try await TestApp.withRouter { client in
            func session(_ agent: String) async throws -> String {
                var headers = HTTPFields.john
                headers[.userAgent] = agent
                let response = try await client.get("/api/now/table/incident?sysparm_limit=1", headers)
                #expect(response.status == .ok)
                return try #require(WebBrowser.setCookies(response)["JSESSIONID"]?.split(separator: ";").first.map(String.init))
            }
            let laptop = try await session("docket/1.0 (laptop)")
            let phone = try await session("docket/1.0 (phone)")
            #expect(laptop != phone)
            // The same client asking again keeps its session.
            #expect(try await session("docket/1.0 (laptop)") == laptop)
            #expect(try await client.get("/logout.do", [.cookie: laptop]).status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: laptop]).status == .unauthorized)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: phone]).status == .ok)
        }
    }
}
