import DocketModel
import Foundation

/// Session cookies kept in the database, so that a session started on one docketd works on every other one
/// sharing the database, and survives a restart. Only a SHA-256 of each token is stored: a copy of the database
/// does not hand out live sessions. Expiry is wall-clock seconds since 1970.
struct SessionStore: Sendable {
    let storage: any Storage

    struct Stored: Sendable, Equatable {
        var userID: String
        var expires: Int
    }

    /// Whether other processes may create or end sessions (then the database, not memory, decides).
    var isShared: Bool { storage.isShared }

    static func hash(_ token: String) -> String { Digest.sha256Hex(token.utf8) }

    static func now() -> Int { Int(Date().timeIntervalSince1970) }

    /// Stores a new session if `proof` still holds (``UserDirectory/holds(_:_:)``: a new password, a lock or a
    /// deactivation committed while the login was checked ends it before it begins); false, storing nothing, if not.
    func save(_ token: String, userID: String, expires: Int, proof: UserDirectory.CredentialProof) async throws -> Bool {
        let hash = Self.hash(token)
        return try await storage.write { db in
            guard try await UserDirectory.holds(proof, db) else { return false }
            try await db.run(
                "INSERT INTO docket_session (token_hash, user_id, expires_at) VALUES (" + .bind(hash) + ", " + .bind(userID)
                    + ", " + .bind(expires) + ")"
            )
            return true
        }
    }

    /// Moves a session's expiry; a session that was ended meanwhile stays ended.
    func extend(_ token: String, to expires: Int) async throws {
        let hash = Self.hash(token)
        try await storage.write { db in
            try await db.run(
                "UPDATE docket_session SET expires_at = " + .bind(expires) + " WHERE token_hash = " + .bind(hash)
            )
        }
    }

    func load(_ token: String) async throws -> Stored? {
        let hash = Self.hash(token)
        return try await storage.read { db in
            guard let row = try await db.rows(
                "SELECT user_id, expires_at FROM docket_session WHERE token_hash = " + .bind(hash)
            ).first else { return nil }
            guard let userID = try row.value(at: "user_id", kind: .text).text,
                let expires = try row.value(at: "expires_at", kind: .integer).intValue
            else { return nil }
            return Stored(userID: userID, expires: expires)
        }
    }

    /// Ends a session: whether there was one to end.
    @discardableResult
    func delete(_ token: String) async throws -> Bool {
        let hash = Self.hash(token)
        return try await storage.write { db in
            try await !db.rows("DELETE FROM docket_session WHERE token_hash = " + .bind(hash) + " RETURNING user_id").isEmpty
        }
    }

    /// Removes sessions that ended; returns how many.
    @discardableResult
    func prune(now: Int = SessionStore.now()) async throws -> Int {
        try await storage.write { db in
            let count = try await db.integer("SELECT COUNT(*) FROM docket_session WHERE expires_at < " + .bind(now))
            if count > 0 { try await db.run("DELETE FROM docket_session WHERE expires_at < " + .bind(now)) }
            return count
        }
    }
}
