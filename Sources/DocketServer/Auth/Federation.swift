import DocketModel
import Foundation
import Synchronization

/// Tokens of trusted OpenID providers (``TrustedIssuers``) as Docket users. An outside identity is its issuer and
/// subject (`sub`), and signs in as the local account it is linked to (``IdentityLinks``). The first time, a link is
/// made only by proof: one local account has the e-mail address the provider says it verified, and that account
/// is not an administrator's; else, with `--oidc-provision`, a new account is made for the identity (under the
/// token's user name, when no account has it: a name anyone may choose never reaches an existing account). An
/// administrator links anyone else with `docketd users link`. Locked or deactivated users are refused like any
/// other, by ``Authenticator``.
final class Federation: Sendable {
    let issuers: TrustedIssuers
    let store: RecordStore
    let provision: Bool
    let links: IdentityLinks
    /// issuer and subject → (user, until when), so that a bearer request of a linked identity costs no directory
    /// read. One linked to nobody is looked up at each request (an administrator's link then counts at once), but
    /// said in the log at most once a minute (``noticed``).
    private let known = Mutex<[String: (userID: String, expires: Int)]>([:])
    private let noticed = Mutex<[String: Int]>([:])
    static let memory = 60
    /// Roles never given to an outside identity by a link docketd makes itself.
    static let protectedRoles: Set<String> = ["admin", "security_admin"]

    init(issuers: TrustedIssuers, store: RecordStore, provision: Bool) {
        self.issuers = issuers
        self.store = store
        self.provision = provision
        links = IdentityLinks(storage: store.storage)
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
        guard let clientID = issuer.clientID else { return nil }
        let verified: TrustedIssuers.Verified?
        do {
            verified = try await issuers.verify(idToken, issuer: issuer, audience: .some(clientID), nonce: nonce, now: now)
        } catch {
            throw .unavailable
        }
        guard let verified else { return nil }
        return try await user(verified, now: now)
    }

    /// The user a verified identity is linked to, linked now when it can be proven (or made, when provisioning).
    private func user(_ verified: TrustedIssuers.Verified, now: Int) async throws(LoginFailure) -> String? {
        let key = verified.issuer.issuer + "\u{0}" + verified.subject
        if let cached = known.withLock({ $0[key] }), cached.expires > now { return cached.userID }
        do {
            // A link to "" is an administrator's unlink: nobody, and no first link made again by itself.
            var userID = try await links.user(issuer: verified.issuer.issuer, subject: verified.subject)
            if userID == nil { userID = try await firstLink(verified, now: now) }
            guard let userID, !userID.isEmpty else { return nil }
            known.withLock { cache in
                if cache.count > 50_000 { cache = [:] }
                cache[key] = (userID, now + Self.memory)
            }
            return userID
        } catch {
            throw .unavailable
        }
    }

    /// An identity seen for the first time: linked to the one account with its verified e-mail (never an
    /// administrator's), else given an account of its own when provisioning and its user name is free; else nobody.
    private func firstLink(_ verified: TrustedIssuers.Verified, now: Int) async throws -> String? {
        let (issuer, subject) = (verified.issuer.issuer, verified.subject)
        if verified.emailVerified, let email = verified.email {
            let holders = try await store.storage.read { db in
                try await db.rows("SELECT sys_id FROM sys_user WHERE LOWER(email) = LOWER(" + .bind(email) + ") LIMIT 2")
                    .compactMap { try $0.value(at: "sys_id", kind: .text).text }
            }
            if holders.count == 1, let holder = holders.first {
                guard try await !isProtected(holder) else {
                    if firstNotice(issuer, subject, now: now) { store.logger.notice("An outside identity's verified e-mail is an administrator's: not linked; an administrator links it with docketd users link", metadata: [
                        "issuer": "\(issuer)", "subject": "\(subject)",
                    ]) }
                    return nil
                }
                return try await store.storage.write { db in
                    try await IdentityLinks.link(issuer: issuer, subject: subject, to: holder, origin: .verifiedEmail, db: db)
                }
            }
            if holders.count > 1 { return nil }
        }
        guard provision, let userName = verified.userName else { return nil }
        guard try await UserDirectory(store: store).account(userName: userName) == nil else {
            if firstNotice(issuer, subject, now: now) { store.logger.notice("An outside identity's user name is a local account's it is not linked to: not signed in", metadata: [
                "issuer": "\(issuer)", "subject": "\(subject)", "userName": "\(userName)",
            ]) }
            return nil
        }
        return try await create(verified, userName: userName)
    }

    /// Whether an identity that signs in as nobody was not said in the log in the last minute (anyone with an account
    /// at the provider could otherwise fill the log).
    private func firstNotice(_ issuer: String, _ subject: String, now: Int) -> Bool {
        noticed.withLock { noticed in
            let key = issuer + "\u{0}" + subject
            if let until = noticed[key], until > now { return false }
            if noticed.count > 50_000 { noticed = noticed.filter { $0.value > now } }
            if noticed.count > 50_000 { noticed = [:] }
            noticed[key] = now + Self.memory
            return true
        }
    }

    /// Whether a user has a role no automatic link may reach.
    private func isProtected(_ userID: String) async throws -> Bool {
        try await store.storage.read { db in
            try await !db.rows(
                "SELECT r.name FROM sys_user_has_role AS h JOIN sys_user_role AS r ON r.sys_id = h.role WHERE h." + .identifier("user")
                    + " = " + .bind(userID) + " AND r.name IN (" + .bindList(Self.protectedRoles.sorted()) + ")"
            ).isEmpty
        }
    }

    /// Makes a user for an identity, linked to it in the same transaction, with the roles it lists that exist here
    /// (never a protected one); nil when its user name was taken meanwhile by anyone else.
    private func create(_ verified: TrustedIssuers.Verified, userName: String) async throws -> String? {
        struct MadeElsewhere: Error {}
        let userID: String
        var values = ["user_name": userName, "name": userName]
        if verified.emailVerified, let email = verified.email { values["email"] = email }
        do {
            // Two first requests at once (on any instance) make one user: the second insert sees the first's row
            // in its transaction and rolls back.
            userID = try await store.insert(
                into: "sys_user", values: values, caller: .system,
                within: { db, id in
                    // Names compare without regard to case (as lookups of user_name do): `ADMIN` is admin's name.
                    if try await db.integer("SELECT COUNT(*) FROM sys_user WHERE LOWER(user_name) = LOWER(" + .bind(userName) + ")") > 1 {
                        throw MadeElsewhere()
                    }
                    _ = try await IdentityLinks.link(issuer: verified.issuer.issuer, subject: verified.subject, to: id, origin: .provisioned, db: db)
                }
            )
        } catch is MadeElsewhere {
            // The same identity's other request made it (and linked it); anyone else's account is not this one's.
            return try await links.user(issuer: verified.issuer.issuer, subject: verified.subject)
        }
        // A role is named exactly; a protected one is refused in any spelling (`Admin` is admin).
        for role in Set(verified.roles) where !Self.protectedRoles.contains(role.lowercased()) {
            let found = try await store.list(
                RecordQuery(
                    table: "sys_user_role", query: EncodedQuery(all: [QueryCondition("name", .equals, role)]),
                    fields: ["sys_id", "name"], limit: 20, count: false
                ),
                caller: .system
            ).records.first { $0.values["name"] == role }
            if let found { try await store.insert(into: "sys_user_has_role", values: ["user": userID, "role": found.sysID], caller: .system) }
        }
        return userID
    }
}
