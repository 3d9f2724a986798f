import DocketModel
import Foundation

/// Records being edited between an Edit and its Commit or Revert (Compass's edit model), kept in the database so
/// that every docketd sharing it sees them. One row per record: an edit locks the record against edits of other
/// sessions until it is committed, reverted, or left idle past ``EditSessions/idleLimit``. Nothing of an edit
/// reaches the record before Commit, which writes through the engine's one write path; Revert deletes the row
/// and leaves no trace.
struct EditSessions: Sendable {
    struct Edit: Sendable {
        /// The record's sys_id (for a new record, the sys_id it will have).
        var recordID: String
        var table: String
        var isNew: Bool
        /// The display id clients address it by (provisional for a new record).
        var displayID: String
        /// Who holds it: a session (hashed) and its user.
        var session: String
        var userID: String
        var action: String
        /// Values set so far, by the dialect's field names, in the order given.
        var values: [(String, String)]
        var expires: Int

    }

    /// An edit left alone this long no longer locks its record.
    static let idleLimit = 3_600

    let storage: any Storage

    static func hash(_ session: String) -> String { Digest.sha256Hex(session.utf8) }

    /// The live edit of a record (by sys_id or display id), whoever holds it.
    func edit(recordID: String? = nil, displayID: String? = nil, now: Int = SessionStore.now()) async throws -> Edit? {
        let condition: SQLFragment
        if let recordID { condition = "record_id = " + .bind(recordID) } else { condition = "display_id = " + .bind(displayID ?? "") }
        return try await storage.read { db in
            try await db.rows(
                "SELECT record_id, table_name, is_new, display_id, session, user_id, action, field_values, expires_at FROM docket_edit WHERE "
                    + condition + " AND expires_at > " + .bind(now)
            ).first.map(Self.edit)
        }
    }

    /// Starts an edit for `session`, or fails with a conflict naming the holder when another live session holds the
    /// record; an expired edit of anyone is replaced.
    func begin(_ edit: Edit, now: Int = SessionStore.now()) async throws {
        try await storage.write { db in
            if let row = try await db.rows(
                "SELECT session, user_id, expires_at FROM docket_edit WHERE record_id = " + .bind(edit.recordID)
            ).first {
                let holder = try row.value(at: "session", kind: .text).text ?? ""
                let expires = try row.value(at: "expires_at", kind: .integer).intValue ?? 0
                if holder != edit.session, expires > now {
                    var error = EngineError(.conflict, "The record is being edited by someone else", detail: "Locked by another session")
                    error.sysID = edit.recordID
                    error.table = edit.table
                    throw error
                }
                try await db.run("DELETE FROM docket_edit WHERE record_id = " + .bind(edit.recordID))
            }
            try await db.run(
                "INSERT INTO docket_edit (record_id, table_name, is_new, display_id, session, user_id, action, field_values, expires_at) VALUES ("
                    + .bind(edit.recordID) + ", " + .bind(edit.table) + ", " + .bind(edit.isNew ? 1 : 0) + ", "
                    + .bind(edit.displayID) + ", " + .bind(edit.session) + ", " + .bind(edit.userID) + ", " + .bind(edit.action)
                    + ", " + .bind(Self.encode(edit.values)) + ", " + .bind(now + Self.idleLimit) + ")"
            )
        }
    }

    /// Replaces the values of an edit the session holds; false when it holds none.
    func update(recordID: String, session: String, values: [(String, String)], now: Int = SessionStore.now()) async throws -> Bool {
        try await storage.write { db in
            let held = try await db.integer(
                "SELECT COUNT(*) FROM docket_edit WHERE record_id = " + .bind(recordID) + " AND session = " + .bind(session)
                    + " AND expires_at > " + .bind(now)
            )
            guard held > 0 else { return false }
            try await db.run(
                "UPDATE docket_edit SET field_values = " + .bind(Self.encode(values)) + ", expires_at = "
                    + .bind(now + Self.idleLimit) + " WHERE record_id = " + .bind(recordID)
            )
            return true
        }
    }

    /// Ends the session's edit of a record (after Commit, or on Revert).
    func end(recordID: String, session: String) async throws {
        try await storage.write { db in
            try await db.run(
                "DELETE FROM docket_edit WHERE record_id = " + .bind(recordID) + " AND session = " + .bind(session)
            )
        }
    }

    /// Removes edits left idle past their limit; returns how many.
    @discardableResult
    func prune(now: Int = SessionStore.now()) async throws -> Int {
        try await storage.write { db in
            let count = try await db.integer("SELECT COUNT(*) FROM docket_edit WHERE expires_at <= " + .bind(now))
            if count > 0 { try await db.run("DELETE FROM docket_edit WHERE expires_at <= " + .bind(now)) }
            return count
        }
    }

    private static func encode(_ values: [(String, String)]) -> String {
        String(decoding: JSONValue.array(values.map { .array([.string($0.0), .string($0.1)]) }).serialized(), as: UTF8.self)
    }

    private static func edit(_ row: ResultRow) throws -> Edit {
        let text = try row.value(at: "field_values", kind: .text).text ?? "[]"
        let pairs = (try? JSONValue.parse(Array(text.utf8)))?.arrayValue ?? []
        return Edit(
            recordID: try row.value(at: "record_id", kind: .text).text ?? "",
            table: try row.value(at: "table_name", kind: .text).text ?? "",
            isNew: try row.value(at: "is_new", kind: .integer).intValue == 1,
            displayID: try row.value(at: "display_id", kind: .text).text ?? "",
            session: try row.value(at: "session", kind: .text).text ?? "",
            userID: try row.value(at: "user_id", kind: .text).text ?? "",
            action: try row.value(at: "action", kind: .text).text ?? "",
            values: pairs.compactMap { pair in
                guard let items = pair.arrayValue, items.count == 2, let name = items[0].stringValue, let value = items[1].stringValue
                else { return nil }
                return (name, value)
            },
            expires: try row.value(at: "expires_at", kind: .integer).intValue ?? 0
        )
    }
}
