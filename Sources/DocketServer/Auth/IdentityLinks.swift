import DocketModel
import Foundation

/// Which local account an outside identity signs in as: a trusted provider's issuer and subject (`sub`, the
/// provider's own stable name for the person) → a user, in `docket_identity_link`. Made once, by proof (a verified
/// e-mail that matches, an administrator's `docketd users link`, or the account made for the identity on first
/// sight), and then the only thing that decides: a user name or e-mail a provider lets people choose never does.
struct IdentityLinks: Sendable {
    let storage: any Storage

    /// How a link came to be.
    enum Origin: String, Sendable {
        /// The provider verified an e-mail address that one local account has.
        case verifiedEmail = "verified-email"
        /// An administrator linked them (`docketd users link`).
        case administrator
        /// The account was made for this identity on first sight (`--oidc-provision`).
        case provisioned
        /// An administrator unlinked it (`docketd users unlink`): it signs in as nobody, and is not linked again by
        /// itself, until an administrator links it.
        case unlinked
    }

    struct Link: Sendable, Equatable {
        var issuer: String
        var subject: String
        var userID: String
        var origin: String
    }

    static func createTable(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_identity_link (issuer TEXT NOT NULL, subject TEXT NOT NULL, user_id TEXT NOT NULL,"
                + " origin TEXT NOT NULL, created " + integer + " NOT NULL, PRIMARY KEY (issuer, subject))"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_identity_link_user ON docket_identity_link (user_id)")
    }

    /// The user an identity is linked to; nil when it is not linked, "" when an administrator unlinked it.
    func user(issuer: String, subject: String) async throws -> String? {
        try await storage.read { db in try await Self.user(issuer: issuer, subject: subject, db: db) }
    }

    static func user(issuer: String, subject: String, db: SQLExecutor) async throws -> String? {
        try await db.rows(
            "SELECT user_id FROM docket_identity_link WHERE issuer = " + .bind(issuer) + " AND subject = " + .bind(subject)
        ).first?.value(at: "user_id", kind: .text).text
    }

    /// Links an identity to a user in the caller's write transaction; returns the user it is linked to (another,
    /// when it was linked meanwhile: a link is never replaced here).
    static func link(issuer: String, subject: String, to userID: String, origin: Origin, db: SQLExecutor) async throws -> String {
        if let existing = try await user(issuer: issuer, subject: subject, db: db) { return existing }
        try await db.run(
            "INSERT INTO docket_identity_link (issuer, subject, user_id, origin, created) VALUES (" + .bind(issuer) + ", "
                + .bind(subject) + ", " + .bind(userID) + ", " + .bind(origin.rawValue) + ", " + .bind(SessionStore.now()) + ")"
        )
        return userID
    }

    /// An administrator's link: replaces any earlier link of the identity. Returns the user it was linked to before.
    @discardableResult
    func set(issuer: String, subject: String, to userID: String) async throws -> String? {
        try await storage.write { db in
            let before = try await Self.user(issuer: issuer, subject: subject, db: db)
            try await db.run("DELETE FROM docket_identity_link WHERE issuer = " + .bind(issuer) + " AND subject = " + .bind(subject))
            _ = try await Self.link(issuer: issuer, subject: subject, to: userID, origin: .administrator, db: db)
            return before
        }
    }

    /// Unlinks an identity for good (it signs in as nobody until an administrator links it); false when it was
    /// linked to nobody.
    func remove(issuer: String, subject: String) async throws -> Bool {
        try await storage.write { db in
            let before = try await Self.user(issuer: issuer, subject: subject, db: db)
            try await db.run("DELETE FROM docket_identity_link WHERE issuer = " + .bind(issuer) + " AND subject = " + .bind(subject))
            try await db.run(
                "INSERT INTO docket_identity_link (issuer, subject, user_id, origin, created) VALUES (" + .bind(issuer) + ", "
                    + .bind(subject) + ", '', " + .bind(Origin.unlinked.rawValue) + ", " + .bind(SessionStore.now()) + ")"
            )
            return !(before ?? "").isEmpty
        }
    }

    /// The links of a user (all links, unlinked ones too, when nil), at most 1,000.
    func links(of userID: String?) async throws -> [Link] {
        try await storage.read { db in
            let filter: SQLFragment = userID.map { " WHERE user_id = " + .bind($0) } ?? ""
            return try await db.rows(
                "SELECT issuer, subject, user_id, origin FROM docket_identity_link" + filter + " ORDER BY issuer, subject LIMIT 1000"
            ).map { row in
                Link(
                    issuer: try row.value(at: "issuer", kind: .text).text ?? "", subject: try row.value(at: "subject", kind: .text).text ?? "",
                    userID: try row.value(at: "user_id", kind: .text).text ?? "", origin: try row.value(at: "origin", kind: .text).text ?? ""
                )
            }
        }
    }
}
