import DocketModel
import Foundation
import SQLKit

/// REST API keys, as ServiceNow's inbound `x-sn-apikey` header presents them: each key stands for its user while it
/// is active and unexpired. Only the SHA-256 of a key is stored (`api_key.token_hash`); a key is 256 random bits,
/// so no slow hash is needed to keep a copy of the database from handing keys out.
struct APIKeys: Sendable {
    let storage: any Storage

    /// The hash a key is stored under.
    static func hash(_ key: String) -> String { Digest.sha256Hex(Array(key.utf8)) }

    /// A new key: 64 hexadecimal digits.
    static func newKey() -> String { SysID.generate() + SysID.generate() }

    /// The user a key stands for now; nil when it is unknown, inactive or expired. Throws when it could not be
    /// looked up (that is no answer about the key).
    func userID(key: String, now: Date = Date()) async throws -> String? {
        guard !key.isEmpty, key.utf8.count <= 256 else { return nil }
        return try await RegisteredCredentials.owner(in: "api_key", column: "token_hash", is: Self.hash(key), storage: storage, now: now)
    }
}

/// Credentials registered to a user in a table of their own (API keys, client certificates): a row with the
/// credential's digest, its `user`, `active` and `expires`.
enum RegisteredCredentials {
    /// The fields that bind a credential to its user: written by docketd's command line (as the system) only.
    static let boundFields: [String: Set<String>] = [
        "api_key": ["token_hash", "user"], "sys_user_certificate": ["fingerprint", "user"],
    ]

    /// The user of the row whose `column` is `value`, while it is active and unexpired; nil otherwise. Throws when it
    /// could not be looked up.
    static func owner(in table: String, column: String, is value: String, storage: any Storage, now: Date) async throws -> String? {
        let row = try await storage.read { db in
            try await db.rows(
                "SELECT " + .identifier("user") + " AS owner, active, expires FROM " + .identifier(table) + " WHERE "
                    + .identifier(column) + " = " + .bind(value) + " LIMIT 2"
            )
        }
        // One digest names one registration: two (which docketd never writes) stand for nobody.
        guard row.count == 1, let row = row.first, try row.value(at: "active", kind: .integer).intValue == 1,
            let owner = try row.value(at: "owner", kind: .text).text, !owner.isEmpty
        else { return nil }
        if let expires = try row.value(at: "expires", kind: .text).text, !expires.isEmpty {
            guard let date = GlideDateTime.parse(expires), date > now else { return nil }
        }
        return owner
    }
}
