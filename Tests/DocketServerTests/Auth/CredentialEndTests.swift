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
}
