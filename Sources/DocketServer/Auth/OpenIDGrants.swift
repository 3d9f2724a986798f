import DocketModel
import Foundation

/// What the OpenID provider keeps where every instance sharing the database sees it: sessions (a sign-in of one
/// user to one client, named in tokens by `sid`), authorization codes and refresh tokens. Codes and refresh tokens
/// are stored as SHA-256 hashes only. Every token issued for a session dies with it: ending the session (logout,
/// revocation, a replayed refresh token or code, a new password, a lock) stops its access tokens on every instance
/// at their next use, and its refresh tokens at once.
enum OpenIDGrants {
    struct Session: Sendable, Equatable {
        var sid: String
        var userID: String
        var clientID: String
        var authTime: Int
        var expires: Int
        /// The issuer the session's tokens are minted with (the address it began at, or `--public-url`'s), and the
        /// only one its access tokens are accepted with; nil for a session begun before docketd kept it.
        var issuer: String? = nil
    }

    struct Code: Sendable, Equatable {
        var sid: String
        var clientID: String
        var redirectURI: String
        var scope: String
        var nonce: String
        var challenge: String
        var expires: Int
    }

    struct Refresh: Sendable, Equatable {
        var sid: String
        var clientID: String
        var scope: String
        var nonce: String
        var expires: Int
    }

    /// The outcome of using a single-use credential (a code, a refresh token).
    enum Redemption<Value: Sendable>: Sendable {
        case redeemed(Value, Session)
        /// Not known, expired, of another client, or its session ended.
        case unknown
        /// Used before: its session was ended (RFC 9700 §4.14, RFC 6749 §4.1.2), nothing issued from it works now.
        case replayed
    }

    /// Sessions keep the issuer their tokens are minted with.
    static func addSessionIssuer(_ db: SQLExecutor) async throws {
        let columns = try await db.rows(db.dialect.columnNames(of: "docket_oidc_session")).compactMap { try $0.value(at: "name", kind: .text).text }
        guard !columns.contains("issuer") else { return }
        try await db.run("ALTER TABLE docket_oidc_session ADD COLUMN issuer TEXT")
    }

    static func createTables(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_oidc_session (sid TEXT PRIMARY KEY NOT NULL, user_id TEXT NOT NULL, client_id TEXT NOT NULL, auth_time "
                + integer + " NOT NULL, expires_at " + integer + " NOT NULL)"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_oidc_session_user ON docket_oidc_session (user_id)")
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_oidc_code (code_hash TEXT PRIMARY KEY NOT NULL, sid TEXT NOT NULL, client_id TEXT NOT NULL,"
                + " redirect_uri TEXT NOT NULL, scope TEXT NOT NULL, nonce TEXT NOT NULL, challenge TEXT NOT NULL, expires_at " + integer
                + " NOT NULL, used " + integer + " NOT NULL)"
        )
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_refresh_token (token_hash TEXT PRIMARY KEY NOT NULL, sid TEXT NOT NULL, client_id TEXT NOT NULL,"
                + " scope TEXT NOT NULL, nonce TEXT NOT NULL, expires_at " + integer + " NOT NULL, used " + integer + " NOT NULL)"
        )
        try await db.run("CREATE INDEX IF NOT EXISTS ix_docket_refresh_token_sid ON docket_refresh_token (sid)")
    }

    /// Device authorizations (RFC 8628): the device code (hashed), the code a person types, and what they decided.
    static func createDeviceTable(_ db: SQLExecutor) async throws {
        let integer = SQLFragment(db.dialect.integerType)
        try await db.run(
            "CREATE TABLE IF NOT EXISTS docket_device_code (device_hash TEXT PRIMARY KEY NOT NULL, user_code TEXT NOT NULL UNIQUE,"
                + " client_id TEXT NOT NULL, scope TEXT NOT NULL, expires_at " + integer + " NOT NULL, poll_interval " + integer
                + " NOT NULL, last_poll " + integer + " NOT NULL, state TEXT NOT NULL, user_id TEXT NOT NULL)"
        )
    }

    struct Device: Sendable, Equatable {
        var userCode: String
        var clientID: String
        var scope: String
        var expires: Int
        var interval: Int
    }

    /// What polling a device code found.
    enum Poll: Sendable, Equatable {
        /// Nobody has decided yet (`authorization_pending`).
        case pending
        /// Polled sooner than the interval allows (`slow_down`): the interval is now longer.
        case slowDown
        case denied
        case expired
        /// Unknown, another client's, or already exchanged.
        case unknown
        /// Approved by this user: the code is now spent.
        case approved(userID: String, scope: String)
    }

    static func addDevice(_ hash: String, _ device: Device, storage: any Storage) async throws {
        try await storage.write { db in
            try await db.run("DELETE FROM docket_device_code WHERE expires_at < " + .bind(device.expires - 3600))
            try await db.run(
                "INSERT INTO docket_device_code (device_hash, user_code, client_id, scope, expires_at, poll_interval, last_poll, state, user_id) VALUES ("
                    + .bind(hash) + ", " + .bind(device.userCode) + ", " + .bind(device.clientID) + ", " + .bind(device.scope) + ", "
                    + .bind(device.expires) + ", " + .bind(device.interval) + ", 0, 'pending', '')"
            )
        }
    }

    /// Polls a device code for its client (RFC 8628 §3.4–3.5).
    static func poll(device hash: String, clientID: String, now: Int, storage: any Storage) async throws -> Poll {
        try await storage.write { db in
            guard let row = try await db.rows(
                "SELECT client_id, scope, expires_at, poll_interval, last_poll, state, user_id FROM docket_device_code WHERE device_hash = " + .bind(hash)
            ).first, try row.value(at: "client_id", kind: .text).text == clientID else { return .unknown }
            let state = try row.value(at: "state", kind: .text).text ?? ""
            if (try row.value(at: "expires_at", kind: .integer).intValue ?? 0) <= now { return state == "used" ? .unknown : .expired }
            switch state {
            case "approved":
                try await db.run("UPDATE docket_device_code SET state = 'used' WHERE device_hash = " + .bind(hash))
                return .approved(userID: try row.value(at: "user_id", kind: .text).text ?? "", scope: try row.value(at: "scope", kind: .text).text ?? "")
            case "denied": return .denied
            case "pending":
                let interval = try row.value(at: "poll_interval", kind: .integer).intValue ?? 5
                let last = try row.value(at: "last_poll", kind: .integer).intValue ?? 0
                if now.subtractingReportingOverflow(last).partialValue < interval {
                    try await db.run(
                        "UPDATE docket_device_code SET poll_interval = " + .bind(min(interval + 5, 60)) + ", last_poll = " + .bind(now)
                            + " WHERE device_hash = " + .bind(hash)
                    )
                    return .slowDown
                }
                try await db.run("UPDATE docket_device_code SET last_poll = " + .bind(now) + " WHERE device_hash = " + .bind(hash))
                return .pending
            default: return .unknown
            }
        }
    }

    /// The client of a pending, unexpired user code; nil when there is none.
    static func pendingDevice(userCode: String, now: Int, storage: any Storage) async throws -> String? {
        try await storage.read { db in
            try await db.rows(
                "SELECT client_id FROM docket_device_code WHERE state = 'pending' AND user_code = " + .bind(userCode) + " AND expires_at > " + .bind(now)
            ).first.flatMap { try $0.value(at: "client_id", kind: .text).text }
        }
    }

    /// Records a person's decision on a pending user code; false when there is no such code (any more).
    /// An approval is recorded only while `proof` (the web session it was made in) holds; else
    /// ``UserDirectory/CredentialEnded``.
    static func decide(
        userCode: String, userID: String, approve: Bool, proof: UserDirectory.CredentialProof? = nil, now: Int, storage: any Storage
    ) async throws -> Bool {
        try await storage.write { db in
            if approve, let proof, try await !UserDirectory.holds(proof, db) { throw UserDirectory.CredentialEnded() }
            guard try await !db.rows(
                "SELECT device_hash FROM docket_device_code WHERE state = 'pending' AND user_code = " + .bind(userCode) + " AND expires_at > " + .bind(now)
            ).isEmpty else { return false }
            try await db.run(
                "UPDATE docket_device_code SET state = " + .bind(approve ? "approved" : "denied") + ", user_id = " + .bind(userID)
                    + " WHERE user_code = " + .bind(userCode)
            )
            return true
        }
    }

    static func hash(_ token: String) -> String { Digest.sha256Hex(token.utf8) }

    /// Starts a session and stores its first credential (a code, or a refresh token) in one transaction.
    /// With a `proof` (a password just checked), the session starts only if it still holds
    /// (``UserDirectory/holds(_:_:)``); else ``UserDirectory/CredentialEnded`` is thrown and nothing is stored.
    static func start(
        _ session: Session, code: (hash: String, code: Code)? = nil, refresh: (hash: String, token: Refresh)? = nil,
        proof: UserDirectory.CredentialProof? = nil, storage: any Storage
    ) async throws {
        try await storage.write { db in
            if let proof, try await !UserDirectory.holds(proof, db) { throw UserDirectory.CredentialEnded() }
            try await db.run(
                "INSERT INTO docket_oidc_session (sid, user_id, client_id, auth_time, expires_at, issuer) VALUES (" + .bind(session.sid) + ", "
                    + .bind(session.userID) + ", " + .bind(session.clientID) + ", " + .bind(session.authTime) + ", " + .bind(session.expires) + ", "
                    + (session.issuer.map { SQLFragment.bind($0) } ?? "NULL") + ")"
            )
            if let code { try await insert(code.hash, code.code, db) }
            if let refresh { try await insert(refresh.hash, refresh.token, db) }
        }
    }

    /// Stores a refresh token of a session that exists.
    static func add(_ hash: String, _ refresh: Refresh, storage: any Storage) async throws {
        try await storage.write { db in try await insert(hash, refresh, db) }
    }

    /// A session that has not ended at `now`; nil otherwise.
    static func session(_ sid: String, now: Int, storage: any Storage) async throws -> Session? {
        try await storage.read { db in try await session(sid, now: now, db) }
    }

    /// Ends a session and everything issued for it; unknown sessions are ignored.
    static func end(_ sid: String, storage: any Storage) async throws {
        try await storage.write { db in try await end(sid, db) }
    }

    /// Ends every session of a user (in the transaction that changed their credentials).
    static func endSessions(ofUser userID: String, _ db: SQLExecutor) async throws {
        // A device sign-in the user allowed ends too, whether or not its device is collecting it right now.
        try await db.run(
            "UPDATE docket_device_code SET state = 'denied' WHERE state IN ('approved', 'used') AND user_id = " + .bind(userID)
        )
        for row in try await db.rows("SELECT sid FROM docket_oidc_session WHERE user_id = " + .bind(userID)) {
            if let sid = try row.value(at: "sid", kind: .text).text { try await end(sid, db) }
        }
    }

    /// Ends every session of a client (it was deleted).
    static func endSessions(ofClient clientID: String, storage: any Storage) async throws {
        try await storage.write { db in
            for row in try await db.rows("SELECT sid FROM docket_oidc_session WHERE client_id = " + .bind(clientID)) {
                if let sid = try row.value(at: "sid", kind: .text).text { try await end(sid, db) }
            }
        }
    }

    /// Uses an authorization code once. A second use ends the session it started.
    static func redeem(code hash: String, clientID: String, now: Int, storage: any Storage) async throws -> Redemption<Code> {
        try await storage.write { db in
            guard let row = try await db.rows(
                "SELECT sid, client_id, redirect_uri, scope, nonce, challenge, expires_at, used FROM docket_oidc_code WHERE code_hash = " + .bind(hash)
            ).first else { return .unknown }
            let code = Code(
                sid: try row.value(at: "sid", kind: .text).text ?? "", clientID: try row.value(at: "client_id", kind: .text).text ?? "",
                redirectURI: try row.value(at: "redirect_uri", kind: .text).text ?? "", scope: try row.value(at: "scope", kind: .text).text ?? "",
                nonce: try row.value(at: "nonce", kind: .text).text ?? "", challenge: try row.value(at: "challenge", kind: .text).text ?? "",
                expires: try row.value(at: "expires_at", kind: .integer).intValue ?? 0
            )
            guard code.clientID == clientID else { return .unknown }
            if try row.value(at: "used", kind: .integer).intValue != 0 {
                try await end(code.sid, db)
                return .replayed
            }
            try await db.run("UPDATE docket_oidc_code SET used = 1 WHERE code_hash = " + .bind(hash))
            guard code.expires > now, let session = try await session(code.sid, now: now, db) else { return .unknown }
            return .redeemed(code, session)
        }
    }

    /// Uses a refresh token once, storing its successor in the same transaction. A second use ends its session:
    /// a stolen token and its rightful holder cannot both go on.
    static func rotate(refresh hash: String, to next: String, clientID: String, now: Int, storage: any Storage) async throws
        -> Redemption<Refresh>
    {
        try await storage.write { db in
            guard let row = try await db.rows(
                "SELECT sid, client_id, scope, nonce, expires_at, used FROM docket_refresh_token WHERE token_hash = " + .bind(hash)
            ).first else { return .unknown }
            let refresh = Refresh(
                sid: try row.value(at: "sid", kind: .text).text ?? "", clientID: try row.value(at: "client_id", kind: .text).text ?? "",
                scope: try row.value(at: "scope", kind: .text).text ?? "", nonce: try row.value(at: "nonce", kind: .text).text ?? "",
                expires: try row.value(at: "expires_at", kind: .integer).intValue ?? 0
            )
            // Another client's token is not this client's to use, nor to burn.
            guard refresh.clientID == clientID else { return .unknown }
            if try row.value(at: "used", kind: .integer).intValue != 0 {
                try await end(refresh.sid, db)
                return .replayed
            }
            guard refresh.expires > now, let session = try await session(refresh.sid, now: now, db) else { return .unknown }
            try await db.run("UPDATE docket_refresh_token SET used = 1 WHERE token_hash = " + .bind(hash))
            try await insert(next, refresh, db)
            return .redeemed(refresh, session)
        }
    }

    /// A refresh token that is live at `now` (unused, its session live); nil otherwise.
    static func refresh(_ hash: String, now: Int, storage: any Storage) async throws -> (Refresh, Session)? {
        try await storage.read { db in
            guard let row = try await db.rows(
                "SELECT sid, client_id, scope, nonce, expires_at FROM docket_refresh_token WHERE used = 0 AND token_hash = " + .bind(hash)
            ).first else { return nil }
            let refresh = Refresh(
                sid: try row.value(at: "sid", kind: .text).text ?? "", clientID: try row.value(at: "client_id", kind: .text).text ?? "",
                scope: try row.value(at: "scope", kind: .text).text ?? "", nonce: try row.value(at: "nonce", kind: .text).text ?? "",
                expires: try row.value(at: "expires_at", kind: .integer).intValue ?? 0
            )
            guard refresh.expires > now, let session = try await session(refresh.sid, now: now, db) else { return nil }
            return (refresh, session)
        }
    }

    /// Removes what ended before `now`; returns how many sessions went.
    @discardableResult
    static func prune(now: Int, storage: any Storage) async throws -> Int {
        try await storage.write { db in
            let count = try await db.integer("SELECT COUNT(*) FROM docket_oidc_session WHERE expires_at < " + .bind(now))
            try await db.run("DELETE FROM docket_oidc_code WHERE expires_at < " + .bind(now))
            try await db.run("DELETE FROM docket_refresh_token WHERE expires_at < " + .bind(now))
            if count > 0 {
                try await db.run("DELETE FROM docket_refresh_token WHERE sid IN (SELECT sid FROM docket_oidc_session WHERE expires_at < " + .bind(now) + ")")
                try await db.run("DELETE FROM docket_oidc_session WHERE expires_at < " + .bind(now))
            }
            return count
        }
    }

    private static func session(_ sid: String, now: Int, _ db: SQLExecutor) async throws -> Session? {
        guard let row = try await db.rows(
            "SELECT user_id, client_id, auth_time, expires_at, issuer FROM docket_oidc_session WHERE sid = " + .bind(sid)
        ).first else { return nil }
        let session = Session(
            sid: sid, userID: try row.value(at: "user_id", kind: .text).text ?? "", clientID: try row.value(at: "client_id", kind: .text).text ?? "",
            authTime: try row.value(at: "auth_time", kind: .integer).intValue ?? 0, expires: try row.value(at: "expires_at", kind: .integer).intValue ?? 0,
            issuer: try row.value(at: "issuer", kind: .text).text.flatMap { $0.isEmpty ? nil : $0 }
        )
        return session.expires > now ? session : nil
    }

    private static func end(_ sid: String, _ db: SQLExecutor) async throws {
        try await db.run("DELETE FROM docket_refresh_token WHERE sid = " + .bind(sid))
        try await db.run("DELETE FROM docket_oidc_code WHERE sid = " + .bind(sid))
        try await db.run("DELETE FROM docket_oidc_session WHERE sid = " + .bind(sid))
    }

    private static func insert(_ hash: String, _ code: Code, _ db: SQLExecutor) async throws {
        try await db.run(
            "INSERT INTO docket_oidc_code (code_hash, sid, client_id, redirect_uri, scope, nonce, challenge, expires_at, used) VALUES ("
                + .bind(hash) + ", " + .bind(code.sid) + ", " + .bind(code.clientID) + ", " + .bind(code.redirectURI) + ", " + .bind(code.scope)
                + ", " + .bind(code.nonce) + ", " + .bind(code.challenge) + ", " + .bind(code.expires) + ", 0)"
        )
    }

    private static func insert(_ hash: String, _ refresh: Refresh, _ db: SQLExecutor) async throws {
        try await db.run(
            "INSERT INTO docket_refresh_token (token_hash, sid, client_id, scope, nonce, expires_at, used) VALUES (" + .bind(hash) + ", "
                + .bind(refresh.sid) + ", " + .bind(refresh.clientID) + ", " + .bind(refresh.scope) + ", " + .bind(refresh.nonce) + ", "
                + .bind(refresh.expires) + ", 0)"
        )
    }
}
