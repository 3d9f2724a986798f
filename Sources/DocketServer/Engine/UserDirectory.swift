import DocketModel

/// Looks up accounts for authentication: the one place that reads password hashes.
struct UserDirectory: Sendable {
    struct Account: Sendable {
        var userID: String
        var passwordHash: String
        var active: Bool
        var lockedOut: Bool

        var canLogIn: Bool { active && !lockedOut && !passwordHash.isEmpty }
    }

    let store: RecordStore

    func account(userName: String) async throws -> Account? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT sys_id, password, active, locked_out FROM sys_user WHERE user_name = " + .bind(userName)
            ).first else { return nil }
            return Account(
                userID: try row.value(at: "sys_id", kind: .text).text ?? "",
                passwordHash: try row.value(at: "password", kind: .text).text ?? "",
                active: try row.value(at: "active", kind: .integer).intValue != 0,
                lockedOut: try row.value(at: "locked_out", kind: .integer).intValue == 1
            )
        }
    }

    /// The caller with roles for a user sys_id; nil when the user no longer exists or is inactive.
    func caller(userID: String) async throws -> Caller? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT user_name, name, active FROM sys_user WHERE sys_id = " + .bind(userID)
            ).first, try row.value(at: "active", kind: .integer).intValue != 0 else { return nil }
            let roles = try await db.rows(
                "SELECT r.name FROM sys_user_has_role AS h JOIN sys_user_role AS r ON r.sys_id = h.role WHERE h."
                    + .identifier("user") + " = " + .bind(userID)
            ).compactMap { try $0.value(at: "name", kind: .text).text }
            return Caller(
                userID: userID, userName: try row.value(at: "user_name", kind: .text).text ?? "",
                displayName: try row.value(at: "name", kind: .text).text ?? "", roles: Set(roles)
            )
        }
    }
}
