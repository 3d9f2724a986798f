import DocketModel
import Foundation
import Testing

@testable import DocketServer

/// The one way in: each kind of credential gives a caller or one typed refusal, the same for every dialect.
@Suite("Identity")
struct IdentityTests {
    static func withIdentity(_ test: @Sendable (Identity, RecordStore) async throws -> Void) async throws {
        try await TestApp.withStore { store in
            var (identity, hasher) = TestApp.identity(on: store)
            identity.compass = CompassTokens(
                keys: try await TokenKeys.make(secret: Array(repeating: 3, count: 64)), sessions: SessionStore(storage: store.storage)
            )
            try await test(identity, store)
            await hasher.shutdown()
        }
    }

    @Test("passwords, bearer tokens, sessions and Compass tokens: a caller, or the refusal that fits")
    func refusals() async throws {
        try await Self.withIdentity { identity, _ in
            await #expect(throws: Identity.Refusal.rejected) {
                _ = try await identity.login(userName: "john.doe", password: "wrong", address: "10.0.0.1", client: "a")
            }
            await #expect(throws: Identity.Refusal.rejected) {
                _ = try await identity.login(userName: "nobody", password: "password", address: "10.0.0.1", client: "a")
            }
            let (john, session) = try await identity.login(userName: "john.doe", password: "password", address: "10.0.0.1", client: "a")
            #expect(john.userName == "john.doe")
            #expect(try await identity.session(session).userID == john.userID)
            await #expect(throws: Identity.Refusal.sessionEnded) { _ = try await identity.session("no-such-session") }
            await #expect(throws: Identity.Refusal.invalidToken) { _ = try await identity.bearer("no-such-token") }

            let grant = try await identity.grant(
                form: ["grant_type": "password", "username": "john.doe", "password": "password"],
                basicClient: ("docket-demo", "docket-demo-secret"), address: "10.0.0.1"
            )
            let token = try #require(grant?.accessToken)
            let bearer = try await identity.bearer(token)
            #expect(bearer.caller.userID == john.userID && bearer.credential == .bearer(token) && bearer.issuedSession == nil)
            let withSession = try await identity.bearer(token, options: .init(session: (nil, "b")))
            #expect(withSession.issuedSession != nil)

            // A Compass token is a bearer only where Compass tokens are taken.
            let compass = try #require(identity.compass)
            let compassToken = try #require(
                try await compass.issue(userID: john.userID, userName: "john.doe", repo: "SampleRepository", database: "SAMPL"))
            await #expect(throws: Identity.Refusal.invalidToken) { _ = try await identity.bearer(compassToken) }
            let viaCompass = try await identity.bearer(compassToken, options: .init(compassTokens: true))
            #expect(viaCompass.credential == .compass(compassToken) && viaCompass.caller.userID == john.userID)

            // What a live stream checks while it runs: each credential stands for its user until it ends.
            #expect(try await identity.recheck(.session(session), as: john)?.userID == john.userID)
            #expect(try await identity.recheck(.bearer(token), as: john)?.userID == john.userID)
            #expect(try await identity.recheck(.compass(compassToken), as: john)?.userID == john.userID)
            try await identity.authenticator.endSession(session)
            #expect(try await identity.recheck(.session(session), as: john) == nil)
            await #expect(throws: Identity.Refusal.sessionEnded) { _ = try await identity.session(session) }
            // A bearer token stands for one user only.
            #expect(try await identity.recheck(.bearer(token), as: Callers.abel) == nil)
        }
    }

    @Test("a refusal that asks to try again says when; the others do not")
    func retryAfter() {
        #expect(Identity.Refusal.throttled(retryAfter: .milliseconds(1500)).retryAfter == "2")
        #expect(Identity.Refusal.busy.retryAfter == "1")
        #expect(Identity.Refusal.unavailable.retryAfter == StorageUnavailable.retryAfter)
        for refusal: Identity.Refusal in [.missing, .rejected, .invalidToken, .sessionEnded] {
            #expect(refusal.retryAfter == nil)
            #expect(refusal.loginFailure == .rejected)
        }
    }

    @Test("every other credential goes through Identity with a typed refusal: the OAuth grant, ETO's context tokens, push variants and applications, the metrics token; a database that cannot answer is unavailable, never a refusal of the credential")
    func otherCredentials() async throws {
        try await Self.withIdentity { base, store in
            var identity = base
            identity.contexts = ContextSessions(storage: store.storage)
            identity.apps = AppCredentials(store: store, hasher: PasswordHasher(cost: 4), metricsToken: "metrics-token-1234")
            let form = ["grant_type": "password", "username": "john.doe", "password": "password"]
            let client = ("docket-demo", "docket-demo-secret")
            #expect(try await identity.grant(form: form, basicClient: client, address: "10.0.0.9") != nil)
            var wrong = form
            wrong["password"] = "wrong"
            #expect(try await identity.grant(form: wrong, basicClient: client, address: "10.0.0.9") == nil)
            // ETO's tokens: an unknown one is an invalid token; a live one gives its context and caller.
            await #expect(throws: Identity.Refusal.invalidToken) { _ = try await identity.context("no-such-token", kind: .sso) }
            let token = try #require(try await ContextSessions(storage: store.storage).start(
                .init(kind: .sso, userID: Callers.john.userID, enterprise: "", site: 0, program: 0, utcOffset: 0)
            ))
            #expect(try await identity.context(token, kind: .sso).caller.userID == Callers.john.userID)
            await #expect(throws: Identity.Refusal.invalidToken) { _ = try await identity.context(token, kind: .site) }
            // Apps' credentials.
            let (_, variantID, secret) = DemoNotifications.variants[0]
            #expect(try await identity.pushVariant(id: variantID, secret: secret).platform == "ios")
            await #expect(throws: Identity.Refusal.rejected) { _ = try await identity.pushVariant(id: variantID, secret: "guess") }
            await #expect(throws: Identity.Refusal.rejected) { _ = try await identity.pushVariant(id: "", secret: secret) }
            #expect(try await identity.pushApplication(id: DemoNotifications.pushApplicationKey, masterSecret: DemoNotifications.pushMasterSecret) == DemoNotifications.pushApplicationID)
            await #expect(throws: Identity.Refusal.rejected) {
                _ = try await identity.pushApplication(id: DemoNotifications.pushApplicationKey, masterSecret: "guess")
            }
            #expect(throws: Identity.Refusal.missing) { try identity.metrics(nil) }
            #expect(throws: Identity.Refusal.invalidToken) { try identity.metrics("metrics-token-12345") }
            try identity.metrics("metrics-token-1234")
            // The database fails: no answer about the credential.
            store.storage.faults.failNext { $0.contains("docket_context") }
            await #expect(throws: Identity.Refusal.unavailable) { _ = try await identity.context(token, kind: .sso) }
            // (A variant not read before: one that was may be answered from the engine's cache, which the log keeps true.)
            let (_, androidID, androidSecret) = DemoNotifications.variants[1]
            store.storage.faults.failNext { $0.hasPrefix("SELECT") }
            await #expect(throws: Identity.Refusal.unavailable) { _ = try await identity.pushVariant(id: androidID, secret: androidSecret) }
            store.storage.faults.failNext { $0.contains("sys_push_application") }
            await #expect(throws: Identity.Refusal.unavailable) {
                _ = try await identity.pushApplication(id: DemoNotifications.pushApplicationKey, masterSecret: DemoNotifications.pushMasterSecret)
            }
            await identity.apps?.hasher.shutdown()
        }
    }
}
