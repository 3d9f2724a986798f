import Crypto
import DocketModel
import Foundation

/// A write's `Idempotency-Key` (IETF httpapi draft): the key a user sent, and a fingerprint of the request it came
/// with. Recorded by the engine in the same transaction as the write it protects, so that a write is either
/// committed with its key or not at all: the same key again never writes twice, on any instance.
struct IdempotencyClaim: Sendable, Equatable {
    /// The user the key belongs to (keys of different users never meet).
    let userID: String
    let key: String
    /// SHA-256 (hex) of the method, the path and query, and the body.
    let fingerprint: String

    /// The longest key accepted (the draft sets no bound; UUIDs and ULIDs are far shorter).
    static let maximumKeyLength = 255

    /// The key of a header value: a structured-field string (`"…"`) or, as most clients send it, the bare text;
    /// 1–255 visible ASCII characters. Nil when the value is not one.
    static func key(fromHeader value: String) -> String? {
        var text = Substring(value.trimmingCharacters(in: .whitespaces))
        if text.count >= 2, text.hasPrefix("\""), text.hasSuffix("\"") { text = text.dropFirst().dropLast() }
        guard !text.isEmpty, text.utf8.count <= maximumKeyLength,
            text.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        else { return nil }
        return String(text)
    }

    static func fingerprint(method: String, target: String, body: some Sequence<UInt8>) -> String {
        var hash = SHA256()
        hash.update(data: Array(method.utf8) + [0] + Array(target.utf8) + [0])
        hash.update(data: Array(body))
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }
}

/// The recorded keys (`docket_idempotency`): one row per user and key, written with the write it protects, and the
/// answer that write was given, stored just after the commit. Kept 24 hours.
enum IdempotencyRecords {
    /// How long a key is remembered.
    static let retention: Duration = .seconds(24 * 3600)

    /// A key that was used before.
    struct Used: Error, Sendable {
        let record: Stored
    }

    /// What was recorded for a key.
    struct Stored: Sendable, Equatable {
        let fingerprint: String
        let table: String
        let sysID: String
        /// The answer's status, headers and body; nil until the write's answer was stored (or when storing it failed).
        var status: Int?
        var contentType: String?
        var location: String?
        var etag: String?
        /// The answer's body (JSON text; empty for a 204).
        var body: String?
    }

    static func createTable(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_idempotency (user_id TEXT NOT NULL, idempotency_key TEXT NOT NULL,"
                + " fingerprint TEXT NOT NULL, table_name TEXT NOT NULL, record_id TEXT NOT NULL, status " + integer + ","
                + " content_type TEXT, location TEXT, etag TEXT, body TEXT, created "
                + integer + " NOT NULL, PRIMARY KEY (user_id, idempotency_key))"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_idempotency_created ON docket_idempotency (created)")
    }

    /// In a write's transaction: records the key, or throws ``Used`` when it was recorded before, which rolls the
    /// write back. Two writes with one key at once (PostgreSQL runs record writes in parallel): the second's insert
    /// waits for the first's commit and fails on the key, and the write runs again (``PostgresStorage``) and finds
    /// the first's record.
    static func claim(_ claim: IdempotencyClaim, table: String, sysID: String, db: SQLExecutor) async throws {
        if let stored = try await find(userID: claim.userID, key: claim.key, db: db) { throw Used(record: stored) }
        // A record of the key older than the retention that the hourly pruning has not removed yet: the key is free.
        // Only such a record: one another write committed since the lookup above is that write's.
        let oldest = Int(Date().timeIntervalSince1970 * 1000) - Int(retention.components.seconds) * 1000
        try await db.run(
            "DELETE FROM docket_idempotency WHERE user_id = " + .bind(claim.userID) + " AND idempotency_key = " + .bind(claim.key)
                + " AND created < " + .bind(oldest)
        )
        try await db.run(
            "INSERT INTO docket_idempotency (user_id, idempotency_key, fingerprint, table_name, record_id, created) VALUES ("
                + .bind(claim.userID) + ", " + .bind(claim.key) + ", " + .bind(claim.fingerprint) + ", " + .bind(table) + ", "
                + .bind(sysID) + ", " + .bind(Int(Date().timeIntervalSince1970 * 1000)) + ")"
        )
    }

    /// The record of a key still remembered.
    static func find(userID: String, key: String, db: SQLExecutor) async throws -> Stored? {
        let oldest = Int(Date().timeIntervalSince1970 * 1000) - Int(retention.components.seconds) * 1000
        guard let row = try await db.rows(
            "SELECT fingerprint, table_name, record_id, status, content_type, location, etag, body FROM docket_idempotency"
                + " WHERE user_id = " + .bind(userID) + " AND idempotency_key = " + .bind(key) + " AND created >= " + .bind(oldest)
        ).first else { return nil }
        let status = try row.value(at: "status", kind: .integer).intValue
        return Stored(
            fingerprint: try row.value(at: "fingerprint", kind: .text).text ?? "",
            table: try row.value(at: "table_name", kind: .text).text ?? "",
            sysID: try row.value(at: "record_id", kind: .text).text ?? "",
            status: status.map { Int($0) },
            contentType: try row.value(at: "content_type", kind: .text).text,
            location: try row.value(at: "location", kind: .text).text,
            etag: try row.value(at: "etag", kind: .text).text,
            body: status == nil ? nil : try row.value(at: "body", kind: .text).text ?? ""
        )
    }

    /// Stores the answer a write was given (after its commit, outside the write lock).
    static func storeAnswer(
        _ claim: IdempotencyClaim, status: Int, contentType: String?, location: String?, etag: String?, body: String,
        storage: any Storage
    ) async throws {
        try await storage.writeUnordered { db in
            try await db.run(
                "UPDATE docket_idempotency SET status = " + .bind(status) + ", content_type = " + .bind(contentType ?? "")
                    + ", location = " + .bind(location ?? "") + ", etag = " + .bind(etag ?? "") + ", body = " + .bind(body)
                    + " WHERE user_id = " + .bind(claim.userID) + " AND idempotency_key = " + .bind(claim.key)
            )
        }
    }

    /// Forgets keys older than ``retention``.
    static func prune(storage: any Storage) async throws {
        let oldest = Int(Date().timeIntervalSince1970 * 1000) - Int(retention.components.seconds) * 1000
        try await storage.writeUnordered { db in
            try await db.run("DELETE FROM docket_idempotency WHERE created < " + .bind(oldest))
        }
    }
}
