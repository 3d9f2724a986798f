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

            let grant = try await identity.oauth.grant(
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
            let compassToken = try await compass.issue(userID: john.userID, userName: "john.doe", repo: "SampleRepository", database: "SAMPL")
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
}
