import DocketModel
import Foundation

/// Logins that carry a context (ETO's): an SSO token names only its user; a site token also names the enterprise
/// and site it signed in to, and the program chosen since. Both are sessions of ``SessionStore`` (so that a
/// password change, a lock or deactivation ends them, on every instance), with their context in `docket_context`
/// keyed by the same hash. Tokens are GUIDs; only hashes are stored.
struct ContextSessions: Sendable {
    enum Kind: String, Sendable { case sso, site }

    struct Context: Sendable, Equatable {
        var kind: Kind
        var userID: String
        /// The enterprise's GUID (site tokens).
        var enterprise: String
        /// ETO's SiteID (site tokens).
        var site: Int
        /// ETO's ProgramID; 0 until one is chosen.
        var program: Int
        var utcOffset: Int
    }

    /// How long a token lives.
    static let lifetime = 86_400

    let storage: any Storage
    var sessions: SessionStore { SessionStore(storage: storage) }

    /// Starts a session and returns its token (a lower-case GUID); nil when `proof` (by default: that the user may
    /// still sign in) no longer holds.
    func start(_ context: Context, proof: UserDirectory.CredentialProof? = nil, now: Int = SessionStore.now()) async throws -> String? {
        let token = UUID().uuidString.lowercased()
        guard try await sessions.save(
            token, userID: context.userID, expires: now + Self.lifetime, proof: proof ?? .init(userID: context.userID)
        ) else { return nil }
        try await storage.write { db in
            try await db.run(
                "INSERT INTO docket_context (token_hash, kind, enterprise, site, program, utc_offset) VALUES ("
                    + .bind(SessionStore.hash(token)) + ", " + .bind(context.kind.rawValue) + ", " + .bind(context.enterprise)
                    + ", " + .bind(context.site) + ", " + .bind(context.program) + ", " + .bind(context.utcOffset) + ")"
            )
        }
        return token
    }

    /// The context of a live token of `kind`; nil for anything else (unknown, expired, ended, the other kind).
    func load(_ token: String, kind: Kind, now: Int = SessionStore.now()) async throws -> Context? {
        let token = token.lowercased()
        guard token.utf8.count <= 64 else { return nil }
        // One read: the session (which a password change ends) joined with its context.
        return try await storage.read { db in
            guard let row = try await db.rows(
                "SELECT s.user_id, s.expires_at, c.kind, c.enterprise, c.site, c.program, c.utc_offset FROM docket_context AS c"
                    + " JOIN docket_session AS s ON s.token_hash = c.token_hash WHERE c.token_hash = " + .bind(SessionStore.hash(token))
            ).first, try row.value(at: "kind", kind: .text).text == kind.rawValue,
                let userID = try row.value(at: "user_id", kind: .text).text,
                let expires = try row.value(at: "expires_at", kind: .integer).intValue, expires > now
            else { return nil }
            return Context(
                kind: kind, userID: userID, enterprise: try row.value(at: "enterprise", kind: .text).text ?? "",
                site: try row.value(at: "site", kind: .integer).intValue ?? 0,
                program: try row.value(at: "program", kind: .integer).intValue ?? 0,
                utcOffset: try row.value(at: "utc_offset", kind: .integer).intValue ?? 0
            )
        }
    }

    /// Chooses the session's current program.
    func setProgram(_ token: String, program: Int) async throws {
        try await storage.write { db in
            try await db.run(
                "UPDATE docket_context SET program = " + .bind(program) + " WHERE token_hash = "
                    + .bind(SessionStore.hash(token.lowercased()))
            )
        }
    }

    /// Removes the contexts whose sessions ended.
    func prune() async throws {
        try await storage.writeUnordered { db in
            try await db.run("DELETE FROM docket_context WHERE token_hash NOT IN (SELECT token_hash FROM docket_session)")
        }
    }
}
