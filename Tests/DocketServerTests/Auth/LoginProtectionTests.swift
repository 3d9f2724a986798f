import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import Testing

@testable import DocketServer

@Suite("Password checks are throttled, bounded and honest about failures")
struct LoginProtectionTests {
    @Test("repeated wrong passwords are throttled with Retry-After; other users are not slowed")
    func throttle() async throws {
        // A first wait long enough that a machine busy with other tests cannot outlast it between two requests.
        try await TestApp.withRouter(configure: { $0.loginThrottle.firstDelay = .seconds(30) }) { client throws in
            for _ in 0..<5 {
                #expect(try await client.get("/api/now/table/incident", .basic("john.doe", "wrong")).status == .unauthorized)
            }
            // The sixth failure starts a delay: even the right password waits until it is over.
            #expect(try await client.get("/api/now/table/incident", .basic("john.doe", "wrong")).status == .unauthorized)
            let throttled = try await client.get("/api/now/table/incident", .basic("john.doe", "password"))
            #expect(throttled.status == .tooManyRequests)
            #expect(throttled.headers[.retryAfter].flatMap(Int.init) ?? 0 >= 1)
            // Someone else's login from the same address is not affected.
            #expect(try await client.get("/api/now/table/incident", .beth).status == .ok)
        }
    }

    @Test("the throttle doubles the wait per failure past the allowance, up to the lock")
    func backoff() {
        let throttle = LoginThrottle(policy: .init(userFailures: 2, addressFailures: 100, maximumDelay: .seconds(8)))
        var waits: [Int64] = []
        for _ in 0..<8 {
            throttle.recordFailure(userName: "john", address: "10.0.0.1")
            waits.append(throttle.delay(userName: "john", address: "10.0.0.1").map { $0.components.seconds + 1 } ?? 0)
        }
        #expect(waits == [0, 0, 1, 2, 4, 8, 8, 8])
        #expect(throttle.delay(userName: "john", address: "10.0.0.2") == nil)
        throttle.recordSuccess(userName: "john", address: "10.0.0.1")
        #expect(throttle.delay(userName: "john", address: "10.0.0.1") == nil)
    }

    @Test("with shared counts, failures on one instance throttle the next attempt on another; success clears them")
    func sharedThrottle() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await TestDatabase.open(sqlitePath: directory.path + "/t.sqlite", readers: 2)
        let hasher = PasswordHasher(cost: 4)
        _ = try await RecordStore.open(storage: storage, logger: Logger(label: "t"), hashPassword: hasher.hash)
        let policy = LoginThrottlePolicy(userFailures: 2, addressFailures: 100, maximumDelay: .seconds(8))
        // Two instances: each its own memory, one database.
        let a = LoginThrottle(policy: policy, shared: SharedLoginFailures(storage: storage))
        let b = LoginThrottle(policy: policy, shared: SharedLoginFailures(storage: storage))
        await a.fail(userName: "john", address: "10.0.0.1")
        await b.fail(userName: "john", address: "10.0.0.1")
        #expect(await a.check(userName: "john", address: "10.0.0.1") == nil)
        // The third failure (counted on A) is past the allowance of two: B refuses the next attempt too.
        await a.fail(userName: "john", address: "10.0.0.1")
        let wait = try #require(await b.check(userName: "john", address: "10.0.0.1"))
        #expect(wait > .zero && wait <= .seconds(1))
        #expect(await b.check(userName: "john", address: "10.0.0.2") == nil)
        #expect(await b.check(userName: "beth", address: "10.0.0.1") == nil)
        // Nothing that names the user or the address is stored.
        let stored = try await storage.read { db in try await db.rows("SELECT key_hash FROM docket_login_failure") }
        #expect(stored.count == 2)
        #expect(try stored.allSatisfy { try $0.value(at: "key_hash", kind: .text).text?.count == 64 })
        // A success on B clears the user's count everywhere (A forgets its own memory of it on its next success).
        await b.succeed(userName: "john", address: "10.0.0.1")
        #expect(try await storage.read { db in try await db.rows("SELECT key_hash FROM docket_login_failure") }.count == 1)
        // Pruning removes what is forgotten and no longer blocks.
        try await SharedLoginFailures(storage: storage).prune(forgetBefore: SharedLoginFailures.now() + 1)
        #expect(try await storage.read { db in try await db.rows("SELECT key_hash FROM docket_login_failure") }.isEmpty)
        try await storage.close()
        await hasher.shutdown()
    }

    @Test("a full password queue refuses at once with Busy instead of queueing")
    func busy() async throws {
        let hasher = PasswordHasher(cost: 12, threads: 1, queueLimit: 1)
        let hash = await hasher.hash("secret")
        async let first: Bool? = try? hasher.verify("secret", hash: hash)
        async let second: Bool? = try? hasher.verify("secret", hash: hash)
        let results = await [first, second]
        #expect(results.filter { $0 == nil }.count == 1)
        #expect(results.contains(true))
        await hasher.shutdown()
    }

    @Test("a storage failure during login is 'unavailable', not a wrong password")
    func storageFailure() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let storage = try await TestDatabase.open(sqlitePath: directory.path + "/t.sqlite", readers: 1)
        let hasher = PasswordHasher(cost: 4)
        let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "t"), hashPassword: hasher.hash)
        try await DemoData.seed(store)
        let authenticator = Authenticator(
            users: UserDirectory(store: store), hasher: hasher, credentialTTL: .seconds(60), sessionTimeout: .seconds(60)
        )
        try await storage.write { db in try await db.run("DROP TABLE sys_user") }
        await #expect(throws: LoginFailure.unavailable) {
            try await authenticator.authenticate(userName: "john.doe", password: "password", address: "t")
        }
        try await storage.close()
        #expect(ServiceNowError(LoginFailure.unavailable).status == .serviceUnavailable)
    }

    @Test("a password change, a lock or deactivation ends sessions and tokens at once", arguments: [
        #"{"password":"changed"}"#, #"{"locked_out":"true"}"#, #"{"active":"false"}"#,
    ])
    func credentialChangeEndsSessions(change: String) async throws {
        try await TestApp.withRouter { client throws in
            let login = try await client.get("/api/now/table/incident?sysparm_limit=1", .john)
            let cookie = try #require(login.headers[.setCookie]?.split(separator: ";").first.map(String.init))
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .ok)
            let token = try await client.passwordGrant().string("access_token")
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .ok)

            let patched = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("john.doe"))", json: change, headers: .admin
            )
            #expect(patched.status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: cookie]).status == .unauthorized)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(token)).status == .unauthorized)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .john).status == .unauthorized)
        }
    }
}
