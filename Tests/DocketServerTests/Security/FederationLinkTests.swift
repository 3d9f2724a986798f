import DocketModel
import DocketTestSupport
import Foundation
import Hummingbird
import HummingbirdTesting
import JWTKit
import Synchronization
import Testing

@testable import DocketServer

/// An OpenID provider on loopback for tests: its discovery document and key set (one ES256 key, `k1`), counting
/// how often the key set is asked for; `failing` makes it answer 500.
final class TestProvider: Sendable {
    let key = ES256PrivateKey()
    let keySetRequests = Mutex(0)
    let failing = Mutex(false)

    struct Token: JWTPayload {
        var iss: String
        var sub: String?
        var aud: String
        var exp: Int
        var preferred_username: String?
        var email: String?
        var email_verified: Bool?
        var client_id: String?
        var roles: [String]? = nil
        func verify(using algorithm: some JWTAlgorithm) throws {}
    }

    func token(
        _ issuer: String, sub: String?, name: String? = nil, email: String? = nil, verified: Bool? = nil, audience: String = "docket-api",
        kid: String = "k1", client: String? = nil, roles: [String]? = nil
    ) async throws -> String {
        let keys = await JWTKeyCollection().add(ecdsa: key, kid: JWKIdentifier(string: kid))
        return try await keys.sign(Token(
            iss: issuer, sub: sub, aud: audience, exp: Int(Date().timeIntervalSince1970) + 300, preferred_username: name, email: email,
            email_verified: verified, client_id: client, roles: roles
        ), kid: JWKIdentifier(string: kid))
    }
}

/// Runs a ``TestProvider`` on a free loopback port for `body`, which gets it and its issuer URL.
func withTestProvider<T: Sendable>(_ body: @Sendable (TestProvider, String) async throws -> T) async throws -> T {
    let provider = TestProvider()
    let port = Mutex<Int?>(nil)
    let router = Router()
    router.get("/.well-known/openid-configuration") { _, _ -> Response in
        let issuer = "http://127.0.0.1:\(port.withLock { $0 } ?? 0)"
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string:
            #"{"issuer":"\#(issuer)","jwks_uri":"\#(issuer)/jwks","authorization_endpoint":"\#(issuer)/authorize","token_endpoint":"\#(issuer)/token"}"#)))
    }
    router.get("/jwks") { _, _ -> Response in
        provider.keySetRequests.withLock { $0 += 1 }
        if provider.failing.withLock({ $0 }) { return Response(status: .internalServerError) }
        let (x, y) = provider.key.parameters!
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string:
            #"{"keys":[{"kty":"EC","crv":"P-256","x":"\#(x)","y":"\#(y)","kid":"k1","use":"sig","alg":"ES256"}]}"#)))
    }
    let app = Application(
        router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
        onServerRunning: { channel in port.withLock { $0 = channel.localAddress?.port } }
    )
    return try await app.test(.live) { _ in
        guard let port = port.withLock({ $0 }) else { throw LiveServerError.noPort }
        return try await body(provider, "http://127.0.0.1:\(port)")
    }
}

/// Outside identities are linked to local accounts by (issuer, subject), by proof only: what a stranger with an
/// account at a trusted provider tries.
@Suite("An attacker's day: federation")
struct FederationLinkTests {
    static func federation(_ store: RecordStore, _ issuer: String, provision: Bool = true) -> Federation {
        Federation(issuers: TrustedIssuers([try! TrustedIssuer.parse(issuer + ",audience=docket-api")]), store: store, provision: provision)
    }

    static func user(_ federation: Federation, _ token: String) async throws -> String? {
        try await federation.userID(token) ?? nil
    }

    @Test("a name or an unverified e-mail that a provider lets people choose never reaches an existing account; the administrator's is never linked by itself", .timeLimit(.minutes(1)))
    func chosenNames() async throws {
        try await withTestProvider { provider, issuer in
            try await TestApp.withStore { store in
                let federation = Self.federation(store, issuer)
                for token in [
                    try await provider.token(issuer, sub: "s-1", name: "admin"),
                    try await provider.token(issuer, sub: "s-2", name: "admin", email: "admin@example.com"),
                    try await provider.token(issuer, sub: "s-3", name: "admin", email: "admin@example.com", verified: false),
                    // Verified, but the administrator's: only `docketd users link` links it.
                    try await provider.token(issuer, sub: "s-4", name: "admin", email: "admin@example.com", verified: true),
                    try await provider.token(issuer, sub: "s-5", name: "john.doe"),
                    // No subject, or meant for another application: not a token for docketd at all.
                    try await provider.token(issuer, sub: nil, name: "fresh.person"),
                    try await provider.token(issuer, sub: "s-6", name: "fresh.person", audience: "other-app"),
                ] {
                    #expect(try await Self.user(federation, token) == nil)
                }
                #expect(try await UserDirectory(store: store).account(userName: "fresh.person") == nil)
                #expect(try await IdentityLinks(storage: store.storage).links(of: nil).isEmpty)
                // An administrator's link counts at the next request (a refusal is not remembered).
                try await IdentityLinks(storage: store.storage).set(issuer: issuer, subject: "s-1", to: DemoData.userID("john.doe"))
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "s-1", name: "admin")) == DemoData.userID("john.doe"))
            }
        }
    }

    @Test("a provisioned user gets the roles the provider lists, never a protected one in any spelling, nor a name of another's in another case", .timeLimit(.minutes(1)))
    func provisionedRoles() async throws {
        try await withTestProvider { provider, issuer in
            try await TestApp.withStore { store in
                let federation = Federation(
                    issuers: TrustedIssuers([try TrustedIssuer.parse(issuer + ",audience=docket-api,roles=roles")]), store: store, provision: true
                )
                let made = try #require(try await Self.user(federation, try await provider.token(
                    issuer, sub: "r-1", name: "role.person", roles: ["Admin", "ADMIN", "SECURITY_ADMIN", "itil", "ITIL"]
                )))
                let roles = try await store.storage.read { db in
                    try await db.rows(
                        "SELECT r.name AS name FROM sys_user_has_role AS h JOIN sys_user_role AS r ON r.sys_id = h.role WHERE h."
                            + .identifier("user") + " = " + .bind(made)
                    ).compactMap { try $0.value(at: "name", kind: .text).text }
                }
                #expect(roles == ["itil"])
                // `ADMIN` is admin's name: no second account under it.
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "r-2", name: "ADMIN")) == nil)
            }
        }
    }

    @Test("a verified e-mail links once, by (issuer, sub): later tokens of that subject are that account whatever they say; a new person gets an account of their own", .timeLimit(.minutes(1)))
    func links() async throws {
        try await withTestProvider { provider, issuer in
            try await TestApp.withStore { store in
                let federation = Self.federation(store, issuer)
                let john = DemoData.userID("john.doe")
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", name: "jd", email: "JOHN.DOE@example.com", verified: true)) == john)
                // The link decides: the same subject saying another name or e-mail is still john.
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", name: "admin", email: "admin@example.com", verified: true)) == john)
                // A new person: an account of their own, linked; another subject choosing that name gets nothing.
                let made = try #require(try await Self.user(federation, try await provider.token(issuer, sub: "n", name: "new.hire")))
                #expect(made != john)
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "n2", name: "new.hire")) == nil)
                let links = try await IdentityLinks(storage: store.storage).links(of: nil)
                #expect(Set(links.map { "\($0.subject) \($0.origin)" }) == ["j verified-email", "n provisioned"])
                #expect(try await IdentityLinks(storage: store.storage).links(of: john).map(\.subject) == ["j"])
                // A linked identity needs no user name (many providers' access tokens carry none).
                #expect(try await Self.user(Self.federation(store, issuer), try await provider.token(issuer, sub: "j")) == john)
                // An administrator's unlink sticks: the verified e-mail does not link it again by itself.
                #expect(try await IdentityLinks(storage: store.storage).remove(issuer: issuer, subject: "j"))
                let afresh = Self.federation(store, issuer)
                #expect(try await Self.user(afresh, try await provider.token(issuer, sub: "j", email: "john.doe@example.com", verified: true)) == nil)
                // Without provisioning, a person no account is linked to signs in as nobody.
                let closed = Self.federation(store, issuer, provision: false)
                #expect(try await Self.user(closed, try await provider.token(issuer, sub: "z", name: "zed")) == nil)
            }
        }
    }

    @Test("the administrator's link (docketd users link) is the way to an admin account, and replaces an earlier link", .timeLimit(.minutes(1)))
    func administratorLink() async throws {
        try await withTestProvider { provider, issuer in
            let directory = TemporaryDirectory()
            let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
            let change = try await UserAdministration.link(in: configuration, userName: "admin", issuer: issuer, subject: "boss")
            #expect(change.before == nil)
            let links = try await UserAdministration.links(in: configuration, userName: "admin")
            #expect(links.count == 1 && links.first?.subject == "boss" && links.first?.origin == "administrator")
            await #expect(throws: UserAdministration.Failure.self) {
                try await UserAdministration.link(in: configuration, userName: "nobody.here", issuer: issuer, subject: "x")
            }
            let storage = try await TestDatabase.open(configuration)
            let (store, _) = try await RecordStore.open(storage: storage, logger: .init(label: "test")) { _ in "" }
            let federation = Self.federation(store, issuer)
            #expect(try await Self.user(federation, try await provider.token(issuer, sub: "boss", name: "whoever")) == DemoData.userID("admin"))
            try await storage.close()
            #expect(try await UserAdministration.unlink(in: configuration, issuer: issuer, subject: "boss").before == "admin")
            await #expect(throws: UserAdministration.Failure.self) { try await UserAdministration.unlink(in: configuration, issuer: issuer, subject: "boss") }
        }
    }

    @Test("key fetches: twenty tokens naming unknown keys at once cost one fetch; a failed fetch is remembered (503, the provider not asked again) for the refetch interval", .timeLimit(.minutes(1)))
    func keyFetches() async throws {
        try await withTestProvider { provider, issuer in
            try await TestApp.withStore { store in
                let federation = Self.federation(store, issuer)
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", email: "john.doe@example.com", verified: true)) != nil)
                #expect(provider.keySetRequests.withLock { $0 } == 1)
                // Past the refetch interval, twenty forged kids at once: one fetch between them.
                let later = SessionStore.now() + TrustedIssuers.refetchInterval + 1
                let forged = try await provider.token(issuer, sub: "j", kid: "forged")
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<20 { group.addTask { _ = try? await federation.userID(forged, now: later) } }
                }
                #expect(provider.keySetRequests.withLock { $0 } == 2)
                // The provider fails: the failure is the answer (unavailable, not "invalid"), and it is remembered.
                provider.failing.withLock { $0 = true }
                let evenLater = later + TrustedIssuers.refetchInterval + 1
                for _ in 0..<5 {
                    await #expect(throws: LoginFailure.unavailable) { _ = try await federation.userID(forged, now: evenLater) }
                }
                #expect(provider.keySetRequests.withLock { $0 } == 3)
            }
        }
    }

    @Test("without audience=, a token must have been issued to docketd's client (aud, azp or client_id names it), as RFC 9068 access tokens are")
    func clientAudience() async throws {
        try await withTestProvider { provider, issuer in
            try await TestApp.withStore { store in
                let trusted = try TrustedIssuer.parse(issuer + ",client=docket-web")
                let federation = Federation(issuers: TrustedIssuers([trusted]), store: store, provision: false)
                let email = "john.doe@example.com"
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", email: email, verified: true, audience: "openid", client: "docket-web")) != nil)
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", email: email, verified: true, audience: "docket-web")) != nil)
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", email: email, verified: true, audience: "openid", client: "other-app")) == nil)
                #expect(try await Self.user(federation, try await provider.token(issuer, sub: "j", email: email, verified: true, audience: "openid")) == nil)
            }
        }
    }
}
