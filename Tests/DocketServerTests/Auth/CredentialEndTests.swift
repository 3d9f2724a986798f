import DocketModel
import Foundation
import Testing

@testable import DocketServer

/// A credential that ends stays ended: the counts that open WebSockets and event streams follow move only once the
/// end has taken effect, and a lookup that was under way when it ended does not remember what it read.
@Suite("Credential ends", .timeLimit(.minutes(1)))
struct CredentialEndTests {
    @Test("whoever sees a revocation's count move and looks the token up again finds it revoked")
    func revocationCountMovesAfterTheRevocation() async throws {
        try await IdentityTests.withIdentity { identity, _ in
            let client = (id: "docket-demo", secret: "docket-demo-secret")
            let form = ["grant_type": "password", "username": "john.doe", "password": "password"]
            for _ in 0..<10 {
                let token = try #require(try await identity.grant(form: form, basicClient: client, address: "10.0.0.1")?.accessToken)
                let john = try await identity.bearer(token).caller  // remembered from here on
                let before = identity.oauth.revocationGeneration
                // What a socket's clock does: on a new count, look again, once.
                let watcher = Task { () -> Caller? in
                    while identity.oauth.revocationGeneration == before {
                        try Task.checkCancellation()
                        await Task.yield()
                    }
                    return try await identity.recheck(.bearer(token), as: john)
                }
                defer { watcher.cancel() }
                try await identity.oauth.revoke(token: token)
                #expect(try await watcher.value == nil)
                await #expect(throws: Identity.Refusal.invalidToken) { _ = try await identity.bearer(token) }
            }
        }
    }

    @Test("a logout while the session is being read from the database is not undone by that read")
    func logoutDuringSessionRead() async throws {
        try await IdentityTests.withIdentity { identity, store in
            let hasher = PasswordHasher(cost: 4)
            // Another authenticator on the same database (as after a restart) knows no session yet: it reads it.
            let other = Authenticator(
                users: UserDirectory(store: store), hasher: hasher, credentialTTL: .seconds(60), sessionTimeout: .seconds(600))
            let (_, session) = try await identity.login(userName: "john.doe", password: "password", address: "10.0.0.1", client: "a")
            let (reached, reachedGate) = AsyncStream<Void>.makeStream()
            let (released, releaseGate) = AsyncStream<Void>.makeStream()
            // The session's row has been read, and the answer is on its way back while the logout happens.
            store.storage.faults.holdAnswerOfNext({ $0.hasPrefix("SELECT user_id, expires_at FROM docket_session") }) {
                reachedGate.yield()
                for await _ in released { break }
            }
            let read = Task { try await other.caller(sessionToken: session) }
            for await _ in reached { break }
            try await other.endSession(session)
            releaseGate.yield()
            // What was read before the logout may answer that request (it came first), but is not remembered.
            #expect(try await read.value?.userName == "john.doe")
            #expect(try await other.caller(sessionToken: session) == nil)
            await hasher.shutdown()
        }
    }

    /// Holds the answer of the next statement that `matches` while `meanwhile` runs, then lets it go.
    private static func whileAnswerHeld<T: Sendable>(
        of matches: @escaping @Sendable (String) -> Bool, in store: RecordStore,
        _ request: @escaping @Sendable () async throws -> T, meanwhile: () async throws -> Void
    ) async throws -> T {
        let (reached, reachedGate) = AsyncStream<Void>.makeStream()
        let (released, releaseGate) = AsyncStream<Void>.makeStream()
        store.storage.faults.holdAnswerOfNext(matches) {
            reachedGate.yield()
            for await _ in released { break }
        }
        let task = Task { try await request() }
        for await _ in reached { break }
        try await meanwhile()
        releaseGate.yield()
        return try await task.value
    }

    private static func count(_ table: String, ofUser userID: String, column: String = "user", in store: RecordStore) async throws -> Int {
        try await store.storage.read { db in
            try await db.integer("SELECT COUNT(*) FROM " + .identifier(table) + " WHERE " + .identifier(column) + " = " + .bind(userID))
        }
    }

    private static let accountRead: @Sendable (String) -> Bool = {
        $0.hasPrefix("SELECT sys_id, user_password, active, locked_out FROM sys_user")
    }

    @Test("a password changed while a login's password was checked issues no token and no session")
    func passwordChangedDuringTheCheck() async throws {
        try await IdentityTests.withIdentity { identity, store in
            let john = DemoData.userID("john.doe")
            let client = (id: "docket-demo", secret: "docket-demo-secret")
            let form = ["grant_type": "password", "username": "john.doe", "password": "password"]
            _ = try await identity.oauth.verifyClient(id: client.id, secret: client.secret)  // its bcrypt check done first
            func changePassword(to password: String) async throws {
                try await store.update(john, in: "sys_user", values: ["user_password": password], caller: .system)
            }
            // The stored hash was read, the old password matched it, and the new one commits before the token is
            // stored: the grant is refused, as it would be a moment later.
            let grant = try await Self.whileAnswerHeld(of: Self.accountRead, in: store, {
                try await identity.grant(form: form, basicClient: client, address: "10.0.0.1")
            }, meanwhile: { try await changePassword(to: "second-Secret1") })
            #expect(grant == nil)
            #expect(try await Self.count("oauth_credential", ofUser: john, in: store) == 0)

            await #expect(throws: Identity.Refusal.rejected) {
                _ = try await Self.whileAnswerHeld(of: Self.accountRead, in: store, {
                    try await identity.login(userName: "john.doe", password: "second-Secret1", address: "10.0.0.2", client: "a")
                }, meanwhile: { try await changePassword(to: "third-Secret1") })
            }
            #expect(try await Self.count("docket_session", ofUser: john, column: "user_id", in: store) == 0)

            // Without a change meanwhile, both work with the password of the moment.
            let form2 = ["grant_type": "password", "username": "john.doe", "password": "third-Secret1"]
            #expect(try await identity.grant(form: form2, basicClient: client, address: "10.0.0.1") != nil)
            _ = try await identity.login(userName: "john.doe", password: "third-Secret1", address: "10.0.0.2", client: "a")
        }
    }

    @Test("a refresh token revoked while its grant was checked issues no access token")
    func refreshRevokedDuringTheGrant() async throws {
        try await IdentityTests.withIdentity { identity, store in
            let john = DemoData.userID("john.doe")
            let client = (id: "docket-demo", secret: "docket-demo-secret")
            let first = try #require(try await identity.grant(
                form: ["grant_type": "password", "username": "john.doe", "password": "password"], basicClient: client, address: "10.0.0.1"))
            let refresh = try #require(first.refreshToken)
            let refreshRead: @Sendable (String) -> Bool = { $0.hasPrefix("SELECT type, ") && $0.contains("FROM oauth_credential WHERE token") }
            let grant = try await Self.whileAnswerHeld(of: refreshRead, in: store, {
                try await identity.grant(
                    form: ["grant_type": "refresh_token", "refresh_token": refresh], basicClient: client, address: "10.0.0.1")
            }, meanwhile: { try await identity.oauth.revoke(token: refresh) })
            #expect(grant == nil)
            #expect(try await Self.count("oauth_credential", ofUser: john, in: store) == 0)
        }
    }

    @Test("only a logout that ended a session moves the count that open sockets follow")
    func unknownCookiesMoveNothing() async throws {
        try await IdentityTests.withIdentity { identity, _ in
            let before = identity.authenticator.credentialGeneration
            for index in 0..<20 { try await identity.authenticator.endSession("made-up-\(index)") }
            #expect(identity.authenticator.credentialGeneration == before)
            let (_, session) = try await identity.login(userName: "john.doe", password: "password", address: "10.0.0.1", client: "a")
            try await identity.authenticator.endSession(session)
            #expect(identity.authenticator.credentialGeneration == before + 1)
        }
    }

    @Test("a credential issued on another one (a session on a bearer token or a session, a site token on an SSO token) only while that one exists")
    func parentsMustExist() async throws {
        try await IdentityTests.withIdentity { identity, store in
            let john = DemoData.userID("john.doe")
            func holds(_ parent: UserDirectory.CredentialProof.Parent) async throws -> Bool {
                try await store.storage.write { db in try await UserDirectory.holds(.init(userID: john, parent: parent), db) }
            }
            // An OAuth access token.
            let grant = try #require(try await identity.grant(
                form: ["grant_type": "password", "username": "john.doe", "password": "password"],
                basicClient: ("docket-demo", "docket-demo-secret"), address: "10.0.0.1"))
            let access = UserDirectory.CredentialProof.Parent.oauthToken(hash: OAuthService.hash(grant.accessToken))
            #expect(try await holds(access))
            // The refresh token is no access token, and the other way round.
            let refresh = OAuthService.hash(try #require(grant.refreshToken))
            #expect(try await !holds(.oauthToken(hash: refresh)))
            #expect(try await holds(.refreshToken(hash: refresh)))
            #expect(try await !holds(.refreshToken(hash: OAuthService.hash(grant.accessToken))))
            try await identity.oauth.revoke(token: grant.accessToken)
            #expect(try await !holds(access))
            // A session on the revoked token is refused (as if the token had been checked a moment later).
            await #expect(throws: LoginFailure.rejected) {
                _ = try await identity.authenticator.bearerLogin(userID: john, presentedSession: nil, client: "b", parent: access)
            }
            #expect(try await Self.count("docket_session", ofUser: john, column: "user_id", in: store) == 0)
            // A session.
            let (_, session) = try await identity.login(userName: "john.doe", password: "password", address: "10.0.0.1", client: "a")
            #expect(try await holds(.session(hash: SessionStore.hash(session))))
            try await identity.authenticator.endSession(session)
            #expect(try await !holds(.session(hash: SessionStore.hash(session))))
            // An OpenID sign-in.
            let sid = "sid-of-john"
            try await OpenIDGrants.start(
                .init(sid: sid, userID: john, clientID: "c", authTime: 0, expires: SessionStore.now() + 60, issuer: nil), storage: store.storage)
            #expect(try await holds(.openIDSession(sid: sid)))
            try await OpenIDGrants.end(sid, storage: store.storage)
            #expect(try await !holds(.openIDSession(sid: sid)))
            // An ETO site token on an SSO token that ended.
            let contexts = ContextSessions(storage: store.storage)
            let sso = try #require(try await contexts.start(.init(kind: .sso, userID: john, enterprise: "", site: 0, program: 0, utcOffset: 0)))
            try await contexts.sessions.delete(sso)
            #expect(try await contexts.start(
                .init(kind: .site, userID: john, enterprise: "e", site: 1, program: 0, utcOffset: 0),
                proof: .init(userID: john, parent: .session(hash: SessionStore.hash(sso)))) == nil)
        }
    }

    @Test("a device sign-in allowed but not collected ends with a new password")
    func deviceApprovalEndsWithThePassword() async throws {
        try await IdentityTests.withIdentity { _, store in
            let john = DemoData.userID("john.doe")
            let now = SessionStore.now()
            let device = OpenIDGrants.hash("device-code")
            try await OpenIDGrants.addDevice(
                device, .init(userCode: "ABCD-EFGH", clientID: "docket-cli", scope: "openid", expires: now + 600, interval: 0),
                storage: store.storage)
            // An approval made in a web session that has ended is not recorded.
            await #expect(throws: UserDirectory.CredentialEnded.self) {
                _ = try await OpenIDGrants.decide(
                    userCode: "ABCD-EFGH", userID: john, approve: true, proof: .init(userID: john, parent: .session(hash: "ended")),
                    now: now, storage: store.storage)
            }
            #expect(try await OpenIDGrants.decide(userCode: "ABCD-EFGH", userID: john, approve: true, now: now, storage: store.storage))
            try await store.update(john, in: "sys_user", values: ["user_password": "another-Secret1"], caller: .system)
            #expect(try await OpenIDGrants.poll(device: device, clientID: "docket-cli", now: now + 10, storage: store.storage) == .denied)

            // Collected by its device (used) just before the change: the sign-in it was starting is refused.
            let second = OpenIDGrants.hash("second-device-code")
            try await OpenIDGrants.addDevice(
                second, .init(userCode: "WXYZ-WXYZ", clientID: "docket-cli", scope: "openid", expires: now + 600, interval: 0),
                storage: store.storage)
            #expect(try await OpenIDGrants.decide(userCode: "WXYZ-WXYZ", userID: john, approve: true, now: now, storage: store.storage))
            guard case .approved = try await OpenIDGrants.poll(device: second, clientID: "docket-cli", now: now + 10, storage: store.storage) else {
                Issue.record("the second device code was not approved")
                return
            }
            try await store.update(john, in: "sys_user", values: ["user_password": "third-Secret1"], caller: .system)
            await #expect(throws: UserDirectory.CredentialEnded.self) {
                try await OpenIDGrants.start(
                    .init(sid: "device-sid", userID: john, clientID: "docket-cli", authTime: now, expires: now + 60),
                    proof: .init(userID: john, parent: .deviceCode(hash: second)), storage: store.storage)
            }
        }
    }
}
