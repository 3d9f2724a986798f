import DocketModel
import Foundation
import Synchronization

/// Tokens of trusted OpenID providers (``TrustedIssuers``) as Docket users: the user whose `user_name` equals the
/// token's user claim, made on first sight when `--oidc-provision` says so (no password: they sign in through
/// their provider only; roles from the token's roles claim that exist here). Locked or deactivated users are
/// refused like any other, by ``Authenticator``.
final class Federation: Sendable {
    let issuers: TrustedIssuers
    let store: RecordStore
    let provision: Bool
    /// user name → (user, until when), so that a bearer request costs no directory read.
    private let known = Mutex<[String: (userID: String, expires: Int)]>([:])
    static let memory = 60

    init(issuers: TrustedIssuers, store: RecordStore, provision: Bool) {
        self.issuers = issuers
        self.store = store
        self.provision = provision
    }

    /// The user of a trusted issuer's token; nil when the token does not hold or names nobody here. Nil too when
    /// the token is not a trusted issuer's (the caller then tries its own kinds of token).
    func userID(_ token: String, now: Int = SessionStore.now()) async throws(LoginFailure) -> String?? {
        guard let issuer = issuers.issuer(of: token) else { return .none }
        let verified: TrustedIssuers.Verified?
        do {
            verified = try await issuers.verify(token, issuer: issuer, now: now)
        } catch {
            throw .unavailable
        }
        guard let verified else { return .some(nil) }
        return .some(try await user(verified, now: now))
    }

    /// The user an ID token of a trusted provider names, for a web sign-in that docketd's client started with
    /// `nonce`; nil when the token does not hold or names nobody here.
    func user(idToken: String, issuer: TrustedIssuer, nonce: String, now: Int = SessionStore.now()) async throws(LoginFailure) -> String? {
        let verified: TrustedIssuers.Verified?
        do {
            verified = try await issuers.verify(idToken, issuer: issuer, audience: .some(issuer.clientID), nonce: nonce, now: now)
        } catch {
            throw .unavailable
        }
        guard let verified else { return nil }
        return try await user(verified, now: now)
    }

    /// The user a verified token names (made here when provisioning says so).
    private func user(_ verified: TrustedIssuers.Verified, now: Int) async throws(LoginFailure) -> String? {
        let key = verified.issuer.issuer + "\u{0}" + verified.userName
        if let cached = known.withLock({ $0[key] }), cached.expires > now { return cached.userID }
        do {
            var userID = try await UserDirectory(store: store).account(userName: verified.userName)?.userID
            if userID == nil, provision { userID = try await create(verified) }
            if let userID {
                known.withLock { cache in
                    if cache.count > 50_000 { cache = [:] }
                    cache[key] = (userID, now + Self.memory)
                }
            }
            return userID
        } catch {
            throw .unavailable
        }
    }

    /// Makes the user a token names, with the roles it lists that exist here.
    private func create(_ verified: TrustedIssuers.Verified) async throws -> String {
        struct MadeElsewhere: Error {}
        let userID: String
        do {
            // Two first requests at once (on any instance) make one user: the second insert sees the first's row
            // in its transaction and rolls back.
            userID = try await store.insert(
                into: "sys_user", values: ["user_name": verified.userName, "name": verified.userName], caller: .system,
                within: { db, _ in
                    if try await db.integer("SELECT COUNT(*) FROM sys_user WHERE user_name = " + .bind(verified.userName)) > 1 {
                        throw MadeElsewhere()
                    }
                }
            )
        } catch is MadeElsewhere {
            guard let existing = try await UserDirectory(store: store).account(userName: verified.userName)?.userID else { throw MadeElsewhere() }
            return existing
        }
        for role in Set(verified.roles) {
            let found = try await store.list(
                RecordQuery(
                    table: "sys_user_role", query: EncodedQuery(all: [QueryCondition("name", .equals, role)]), fields: ["sys_id"], limit: 1,
                    count: false
                ),
                caller: .system
            ).records.first
            if let found { try await store.insert(into: "sys_user_has_role", values: ["user": userID, "role": found.sysID], caller: .system) }
        }
        return userID
    }
}
