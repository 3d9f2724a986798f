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

    /// Fields of `sys_user` whose change ends the user's sessions, cached credentials and OAuth tokens.
    static let credentialFields: Set<String> = ["password", "user_password", "locked_out", "active", "user_name"]

    let store: RecordStore

    func account(userName: String) async throws -> Account? {
        try await account(where: "user_name", is: userName)
    }

    func account(userID: String) async throws -> Account? {
        try await account(where: "sys_id", is: userID)
    }

    private func account(where column: String, is value: String) async throws -> Account? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT sys_id, user_password, active, locked_out FROM sys_user WHERE " + .identifier(column) + " = " + .bind(value)
            ).first else { return nil }
            return Account(
                userID: try row.value(at: "sys_id", kind: .text).text ?? "",
                passwordHash: try row.value(at: "user_password", kind: .text).text ?? "",
                active: try row.value(at: "active", kind: .integer).intValue != 0,
                lockedOut: try row.value(at: "locked_out", kind: .integer).intValue == 1
            )
        }
    }

    /// What a credential about to be issued rests on: the user, and for a password just checked, the stored hash and
    /// user name it was checked against. A write that issues a token or a session checks it in its own transaction
    /// (``holds(_:_:)``), after any change to the user that committed first: a new password, a lock, a deactivation or
    /// a rename committed while the password was checked deletes the user's tokens and sessions, and the issuing
    /// write, which comes after it, must not add one back.
    struct CredentialProof: Sendable {
        var userID: String
        /// The password hash the password was checked against; nil when no password was checked (a bearer token,
        /// a trusted provider's sign-in): then only that the user may still sign in.
        var passwordHash: String? = nil
        var userName: String? = nil
        /// The credential this one is issued on the strength of (a session cookie, a bearer token), which must
        /// still exist: a change that ended it ends what it would have begun.
        var parent: Parent? = nil

        enum Parent: Sendable, Equatable {
            /// A session of ``SessionStore`` (by its token's hash).
            case session(hash: String)
            /// An OAuth access token of `oauth_credential` (by its hash).
            case oauthToken(hash: String)
            /// An OAuth refresh token of `oauth_credential` (by its hash).
            case refreshToken(hash: String)
            /// A sign-in of docketd's OpenID provider (`docket_oidc_session`).
            case openIDSession(sid: String)
            /// A device sign-in the user allowed and its device collected (`docket_device_code` in state `used`).
            case deviceCode(hash: String)
        }
    }

    /// A credential was not issued: what it rested on ended while it was checked (``holds(_:_:)``).
    struct CredentialEnded: Error {}

    /// Whether a proof still holds inside a write transaction: the user exists, is active and not locked out, and
    /// still has the password hash and user name the proof names. Credential writes are exclusive
    /// (``WriteScope/exclusive``), as are writes of users, so nothing changes the user between this read and the
    /// commit.
    static func holds(_ proof: CredentialProof, _ db: SQLExecutor) async throws -> Bool {
        guard let row = try await db.rows(
            "SELECT user_name, user_password, active, locked_out FROM sys_user WHERE sys_id = " + .bind(proof.userID)
        ).first else { return false }
        guard try row.value(at: "active", kind: .integer).intValue != 0,
            try row.value(at: "locked_out", kind: .integer).intValue != 1
        else { return false }
        if let hash = proof.passwordHash, try row.value(at: "user_password", kind: .text).text != hash { return false }
        if let name = proof.userName, try row.value(at: "user_name", kind: .text).text != name { return false }
        let parent: SQLFragment
        switch proof.parent {
        case nil: return true
        case .session(let hash): parent = "SELECT 1 FROM docket_session WHERE token_hash = " + .bind(hash)
        case .oauthToken(let hash): parent = "SELECT 1 FROM oauth_credential WHERE token = " + .bind(hash) + " AND type = 'access_token'"
        case .refreshToken(let hash): parent = "SELECT 1 FROM oauth_credential WHERE token = " + .bind(hash) + " AND type = 'refresh_token'"
        case .openIDSession(let sid): parent = "SELECT 1 FROM docket_oidc_session WHERE sid = " + .bind(sid)
        case .deviceCode(let hash): parent = "SELECT 1 FROM docket_device_code WHERE state = 'used' AND device_hash = " + .bind(hash)
        }
        return try await !db.rows(parent).isEmpty
    }

    /// What OpenID Connect's profile and email claims say of a user (nil for what is empty).
    struct Profile: Sendable, Equatable {
        var name: String?
        var givenName: String?
        var familyName: String?
        var email: String?
    }

    func profile(userID: String) async throws -> Profile {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT name, first_name, last_name, email FROM sys_user WHERE sys_id = " + .bind(userID)
            ).first else { return Profile() }
            func text(_ column: String) throws -> String? {
                guard let value = try row.value(at: column, kind: .text).text, !value.isEmpty else { return nil }
                return value
            }
            return Profile(name: try text("name"), givenName: try text("first_name"), familyName: try text("last_name"), email: try text("email"))
        }
    }

    /// How many users could log in (active, not locked out, with a password).
    func activeUserCount() async throws -> Int {
        try await store.storage.read { db in
            try await db.rows(
                "SELECT COUNT(*) AS n FROM sys_user WHERE active = 1 AND (locked_out IS NULL OR locked_out = 0)"
                    + " AND user_password IS NOT NULL AND user_password <> ''"
            ).first?.value(at: "n", kind: .integer).intValue ?? 0
        }
    }

    /// The caller with roles for a user sys_id; nil when the user no longer exists, is inactive or locked out.
    func caller(userID: String) async throws -> Caller? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT user_name, name, active, locked_out, time_zone FROM sys_user WHERE sys_id = " + .bind(userID)
            ).first, try row.value(at: "active", kind: .integer).intValue != 0,
                try row.value(at: "locked_out", kind: .integer).intValue != 1
            else { return nil }
            let roles = try await db.rows(
                "SELECT r.name FROM sys_user_has_role AS h JOIN sys_user_role AS r ON r.sys_id = h.role WHERE h."
                    + .identifier("user") + " = " + .bind(userID)
            ).compactMap { try $0.value(at: "name", kind: .text).text }
            // The enterprises of the active sites where the user is staff.
            let domains = try await db.rows(
                "SELECT s.enterprise FROM sys_site_member AS m JOIN sys_site AS s ON s.sys_id = m.site WHERE m."
                    + .identifier("user") + " = " + .bind(userID) + " AND s.active = 1"
            ).compactMap { try $0.value(at: "enterprise", kind: .text).text }
            var timeZone = try row.value(at: "time_zone", kind: .text).text ?? ""
            if timeZone.isEmpty {
                // A user without a time zone of their own gets the instance's default, as on an instance.
                timeZone = try await db.rows(
                    "SELECT value FROM sys_properties WHERE name = 'glide.sys.default.tz' ORDER BY sys_id LIMIT 1"
                ).first?.value(at: "value", kind: .text).text ?? ""
            }
            return Caller(
                userID: userID, userName: try row.value(at: "user_name", kind: .text).text ?? "",
                displayName: try row.value(at: "name", kind: .text).text ?? "", roles: Set(roles),
                timeZoneName: timeZone, domains: Set(domains)
            )
        }
    }
}

/// OAuth clients and issued tokens: the one place that reads client secret hashes and token rows. Tokens
/// are kept as SHA-256 hashes in `oauth_credential` (written here directly: they are credentials, not
/// records anybody subscribes to, so they stay out of the event log).
struct OAuthDirectory: Sendable {
    /// The client the `docket` command logs in with, so that it keeps a refresh token instead of a password.
    /// Like any app's built-in client id its secret is not secret (it ships in the app); what it protects is the
    /// user's password, which never reaches the disk. Created once per database (an admin may delete or
    /// deactivate it, and it stays so).
    static let commandLineClientID = "docket-cli"
    static let commandLineClientSecret = "docket-cli"

    /// What the command-line client may do: log in with a password (`docket login`), sign in through the browser
    /// of any device (`docket login --sso`, the device grant) or of this machine (`--sso --browser`, a loopback
    /// redirect on any port), and refresh.
    static let commandLineGrants = "password,refresh_token,urn:ietf:params:oauth:grant-type:device_code,authorization_code"
    static let commandLineRedirect = "http://127.0.0.1/callback"

    /// Lets a command-line client offered before these sign-ins existed use them (unless an admin changed it).
    static func allowDeviceGrant(_ db: SQLExecutor) async throws {
        try await db.run(
            "UPDATE oauth_entity SET grant_types = " + .bind(commandLineGrants) + " WHERE client_id = " + .bind(commandLineClientID)
                + " AND (grant_types IS NULL OR grant_types = '')"
        )
        try await db.run(
            "UPDATE oauth_entity SET redirect_url = " + .bind(commandLineRedirect) + " WHERE client_id = " + .bind(commandLineClientID)
                + " AND (redirect_url IS NULL OR redirect_url = '')"
        )
    }

    static func offerCommandLineClient(in store: RecordStore) async throws {
        func offered() async throws -> Bool {
            try await store.storage.read { db in
                try await !db.rows("SELECT value FROM docket_meta WHERE key = 'cli_client'").isEmpty
            }
        }
        guard try await !offered() else { return }
        do {
            // The client and the note that it was offered commit together, so instances starting at once on one
            // database offer it once: the others find the record (their insert is refused) and the note.
            try await store.insert(
                into: "oauth_entity",
                values: [
                    "sys_id": SysID.stable("oauth_entity.docket-cli"), "name": "Docket command-line app",
                    "client_id": commandLineClientID, "client_secret": commandLineClientSecret,
                    "grant_types": commandLineGrants, "redirect_url": commandLineRedirect,
                ],
                caller: .system,
                within: { db, _ in try await db.run("INSERT INTO docket_meta (key, value) VALUES ('cli_client', 'created')") }
            )
        } catch {
            guard try await offered() else { throw error }
        }
    }

    struct Client: Sendable {
        var sysID: String
        var secretHash: String
        var accessLifespan: Int
        var refreshLifespan: Int
        var active: Bool
        var clientID: String = ""
        var name: String = ""
        /// A client that keeps no secret (a phone or command-line app): it proves itself with PKCE instead.
        var isPublic: Bool = false
        /// The grants it may use (`password`, `refresh_token`, `authorization_code`, `client_credentials`,
        /// `urn:ietf:params:oauth:grant-type:device_code`).
        var grantTypes: Set<String> = Self.defaultGrants
        /// Where authorization responses may go: exact URLs, or a prefix ending in `*` (Keycloak's wildcard).
        var redirectURIs: [String] = []
        /// Where RP-initiated logout may return to.
        var postLogoutRedirectURIs: [String] = []
        /// The user a client_credentials grant acts as (ServiceNow's "OAuth Application User"); empty: none, and
        /// the grant is refused.
        var applicationUser: String = ""

        /// What a client registered without grant types may use: ServiceNow's password and refresh grants.
        static let defaultGrants: Set<String> = ["password", "refresh_token"]

        /// A list field of `oauth_entity`: entries separated by commas, spaces or new lines.
        static func list(_ text: String?) -> [String] {
            (text ?? "").split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }).map(String.init)
        }
    }

    struct Token: Sendable {
        var type: String
        var userID: String
        var clientID: String
        var expires: String
        var refresh: String
    }

    let store: RecordStore

    /// The longest token lifespan honoured (ten years): an admin may store any integer, and expiry arithmetic
    /// must stay in range.
    static let maximumLifespan = 315_360_000

    /// A stored lifespan in seconds, clamped to 0 … ``maximumLifespan`` (0: tokens expire at once); the default
    /// when missing.
    static func lifespan(_ stored: Int?, _ defaultValue: Int) -> Int {
        min(max(stored ?? defaultValue, 0), maximumLifespan)
    }

    func client(clientID: String) async throws -> Client? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT sys_id, name, client_secret, access_token_lifespan, refresh_token_lifespan, active, public_client,"
                    + " grant_types, redirect_url, post_logout_redirect_url, " + .identifier("user") + " FROM oauth_entity"
                    + " WHERE client_id = " + .bind(clientID) + " ORDER BY sys_id LIMIT 1"
            ).first else { return nil }
            let grants = Client.list(try row.value(at: "grant_types", kind: .text).text)
            return Client(
                sysID: try row.value(at: "sys_id", kind: .text).text ?? "",
                secretHash: try row.value(at: "client_secret", kind: .text).text ?? "",
                accessLifespan: Self.lifespan(try row.value(at: "access_token_lifespan", kind: .integer).intValue, 1800),
                refreshLifespan: Self.lifespan(
                    try row.value(at: "refresh_token_lifespan", kind: .integer).intValue, 8_640_000
                ),
                active: try row.value(at: "active", kind: .integer).intValue != 0,
                clientID: clientID, name: try row.value(at: "name", kind: .text).text ?? "",
                isPublic: try row.value(at: "public_client", kind: .integer).intValue == 1,
                grantTypes: grants.isEmpty ? Client.defaultGrants : Set(grants),
                redirectURIs: Client.list(try row.value(at: "redirect_url", kind: .text).text),
                postLogoutRedirectURIs: Client.list(try row.value(at: "post_logout_redirect_url", kind: .text).text),
                applicationUser: try row.value(at: "user", kind: .text).text ?? ""
            )
        }
    }

    /// The token row for a token hash, whatever its expiry.
    func token(hash: String) async throws -> Token? {
        try await store.storage.read { db in
            guard let row = try await db.rows(
                "SELECT type, " + .identifier("user") + ", client, expires, refresh FROM oauth_credential WHERE token = "
                    + .bind(hash) + " LIMIT 1"
            ).first else { return nil }
            return Token(
                type: try row.value(at: "type", kind: .text).text ?? "",
                userID: try row.value(at: "user", kind: .text).text ?? "",
                clientID: try row.value(at: "client", kind: .text).text ?? "",
                expires: try row.value(at: "expires", kind: .text).text ?? "",
                refresh: try row.value(at: "refresh", kind: .text).text ?? ""
            )
        }
    }

    /// Stores issued tokens and drops the user's expired ones, in one transaction, if `proof` (for a refresh grant:
    /// its refresh token) still holds; false, storing nothing, when it ended while the grant was checked.
    func save(_ tokens: [(hash: String, token: Token)], now: String, proof: UserDirectory.CredentialProof) async throws -> Bool {
        guard let userID = tokens.first?.token.userID else { return false }
        return try await store.storage.write { db in
            guard try await UserDirectory.holds(proof, db) else { return false }
            try await db.run(
                "DELETE FROM oauth_credential WHERE " + .identifier("user") + " = " + .bind(userID) + " AND expires < "
                    + .bind(now)
            )
            for (hash, token) in tokens {
                let values: [(String, String)] = [
                    ("sys_id", SysID.generate()), ("token", hash), ("type", token.type), ("user", token.userID),
                    ("client", token.clientID), ("expires", token.expires), ("refresh", token.refresh),
                    ("sys_created_on", now), ("sys_created_by", "system"), ("sys_updated_on", now),
                    ("sys_updated_by", "system"),
                ]
                try await db.run(
                    "INSERT INTO oauth_credential (" + values.map { SQLFragment.identifier($0.0) }.joined(", ")
                        + ", sys_mod_count) VALUES (" + values.map { SQLFragment.bind($0.1) }.joined(", ") + ", 0)"
                )
            }
            return true
        }
    }

    /// Revokes a token; revoking a refresh token also revokes the access tokens issued with it.
    func revoke(hash: String) async throws {
        try await store.storage.write { db in
            try await db.run("DELETE FROM oauth_credential WHERE token = " + .bind(hash) + " OR refresh = " + .bind(hash))
        }
    }
}
