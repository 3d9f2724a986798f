import DocketModel
import Foundation

/// Failed-login counts kept in the database (`docket_login_failure`), so that several docketd sharing it throttle
/// one password guesser together: failures counted on one instance delay attempts on every other. Keys are hashed
/// (no user name or address is stored). Times are milliseconds since 1970.
struct SharedLoginFailures: Sendable {
    let storage: any Storage

    static func now() -> Int { Int(Date().timeIntervalSince1970 * 1000) }

    /// Counts a failure of `key` (one atomic upsert); a count whose last failure is older than `forgetBefore` starts
    /// again. Returns the new count.
    func count(_ key: String, now: Int, forgetBefore: Int) async throws -> Int {
        try await storage.writeUnordered { db in
            try await db.rows(
                "INSERT INTO docket_login_failure (key_hash, failures, last_failure, blocked_until) VALUES (" + .bind(key)
                    + ", 1, " + .bind(now) + ", 0) ON CONFLICT (key_hash) DO UPDATE SET failures = CASE WHEN"
                    + " docket_login_failure.last_failure < " + .bind(forgetBefore) + " THEN 1 WHEN docket_login_failure.failures >= 1000"
                    + " THEN 1000 ELSE docket_login_failure.failures + 1 END, last_failure = " + .bind(now) + " RETURNING failures"
            ).first?.first.intValue ?? 1
        }
    }

    /// Blocks `key` until `until`, unless it is blocked longer already.
    func block(_ key: String, until: Int) async throws {
        try await storage.writeUnordered { db in
            try await db.run(
                "UPDATE docket_login_failure SET blocked_until = " + .bind(until) + " WHERE key_hash = " + .bind(key)
                    + " AND blocked_until < " + .bind(until)
            )
        }
    }

    /// The keys among `keys` blocked after `now`, with when their blocks end.
    func blocks(_ keys: [String], now: Int) async throws -> [String: Int] {
        guard !keys.isEmpty else { return [:] }
        let list = keys.map { SQLFragment.bind($0) }.joined(", ")
        return try await storage.read { db in
            var blocks: [String: Int] = [:]
            for row in try await db.rows(
                "SELECT key_hash, blocked_until FROM docket_login_failure WHERE key_hash IN (" + list + ") AND blocked_until > "
                    + .bind(now)
            ) {
                if let key = try row.value(at: "key_hash", kind: .text).text,
                    let until = try row.value(at: "blocked_until", kind: .integer).intValue
                {
                    blocks[key] = until
                }
            }
            return blocks
        }
    }

    /// Forgets `key` (after a successful login).
    func clear(_ key: String) async throws {
        try await storage.writeUnordered { db in
            try await db.run("DELETE FROM docket_login_failure WHERE key_hash = " + .bind(key))
        }
    }

    /// Removes counts forgotten and no longer blocking.
    func prune(forgetBefore: Int, now: Int = now()) async throws {
        try await storage.writeUnordered { db in
            try await db.run(
                "DELETE FROM docket_login_failure WHERE last_failure < " + .bind(forgetBefore) + " AND blocked_until < " + .bind(now)
            )
        }
    }
}
