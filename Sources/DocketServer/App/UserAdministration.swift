import DocketModel
import Foundation
import NIOSSL
import Logging

/// Creating accounts from the command line (`docketd users create`) and from the environment on first start:
/// how a server that was not started with `--demo` gets its first administrator.
public enum UserAdministration {
    /// Why an account could not be created, in words a person can act on.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The built-in roles a new data folder lacks until someone creates them, with the sys_ids an instance uses.
    static let builtInRoles: [(name: String, id: String, description: String)] = [
        ("admin", DemoData.roleID("admin"), "Full access to everything"),
        ("itil", DemoData.roleID("itil"), "Fulfills tasks: incidents, problems, changes"),
    ]

    /// Creates a user in the data folder of `configuration` (which must not be served at the same time by a
    /// docketd that caches logins; a running server picks the new user up on its next login attempt).
    /// Returns the new user's sys_id.
    @discardableResult
    public static func createUser(
        in configuration: Configuration, userName: String, password: String, roles: [String],
        firstName: String = "", lastName: String = "", email: String = ""
    ) async throws -> String {
        try configuration.prepareStorage()
        let storage = try await configuration.storageLocation.open(logger: Logger(label: "docketd.users"))
        let hasher = PasswordHasher(cost: configuration.bcryptCost, threads: 1, queueLimit: 4)
        do {
            let (store, _) = try await RecordStore.open(
                storage: storage, logger: Logger(label: "docketd.users"), hashPassword: hasher.hash
            )
            let id = try await createUser(
                in: store, userName: userName, password: password, roles: roles, firstName: firstName, lastName: lastName,
                email: email
            )
            await hasher.shutdown()
            try await storage.close()
            return id
        } catch {
            await hasher.shutdown()
            try? await storage.close()
            throw error
        }
    }

    /// Creates a user with roles, creating the built-in roles it names when they do not exist yet.
    @discardableResult
    static func createUser(
        in store: RecordStore, userName: String, password: String, roles: [String], firstName: String = "",
        lastName: String = "", email: String = ""
    ) async throws -> String {
        let name = userName.trimmingCharacters(in: .whitespaces)
        guard !name.isEmpty, name.count <= 40, !name.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw Failure("A user name is 1 to 40 characters without spaces.")
        }
        guard password.count >= 8 else { throw Failure("The password must have at least 8 characters.") }
        func ids(_ table: String, _ field: String, _ value: String) async throws -> [String] {
            try await store.list(
                RecordQuery(
                    table: table, query: EncodedQuery(all: [QueryCondition(field, .equals, value)]), fields: ["sys_id"],
                    limit: 1, count: false
                ),
                caller: .system
            ).records.map(\.sysID)
        }
        guard try await ids("sys_user", "user_name", name).isEmpty else { throw Failure("A user named '\(name)' already exists.") }
        let roleIDs = try await roleIDs(roles, in: store)
        let first = firstName.isEmpty ? name : firstName
        let userID = try await store.insert(
            into: "sys_user",
            values: [
                "user_name": name, "first_name": first, "last_name": lastName,
                "name": lastName.isEmpty ? first : "\(first) \(lastName)", "email": email, "user_password": password,
                "active": "true",
            ],
            caller: .system
        )
        for roleID in roleIDs {
            try await store.insert(into: "sys_user_has_role", values: ["user": userID, "role": roleID], caller: .system)
        }
        return userID
    }

    /// The sys_ids of roles by name, creating the built-in ones a new data folder lacks.
    static func roleIDs(_ roles: [String], in store: RecordStore) async throws -> [String] {
        var found: [String] = []
        for role in roles {
            let existing = try await store.list(
                RecordQuery(
                    table: "sys_user_role", query: EncodedQuery(all: [QueryCondition("name", .equals, role)]), fields: ["sys_id"],
                    limit: 1, count: false
                ),
                caller: .system
            ).records.first?.sysID
            if let existing {
                found.append(existing)
            } else if let builtIn = builtInRoles.first(where: { $0.name == role }) {
                found.append(try await store.insert(
                    into: "sys_user_role", values: ["sys_id": builtIn.id, "name": role, "description": builtIn.description],
                    caller: .system
                ))
            } else {
                throw Failure("There is no role named '\(role)'.")
            }
        }
        return found
    }

    /// The most accounts one `docketd users seed` makes.
    public static let seedLimit = 100_000

    /// Creates `count` accounts named `prefix` followed by a number (`load.0001` …), all with `password` and
    /// `roles`, for load tests and demonstrations: the password is hashed once, at bcrypt cost `cost` (the
    /// server's own unless given; 4 makes signing thousands of accounts in cheap), and every account stores that
    /// hash. Refused when any account with the prefix exists. Returns the names.
    @discardableResult
    public static func seedUsers(
        in configuration: Configuration, prefix: String, count: Int, password: String, roles: [String], cost: UInt8? = nil
    ) async throws -> [String] {
        let width = String(count).count
        guard (1...seedLimit).contains(count) else { throw Failure("The number of accounts is 1 to \(seedLimit).") }
        guard !prefix.isEmpty, prefix.count + width <= 40, !prefix.contains(where: { $0.isWhitespace || $0.isNewline }) else {
            throw Failure("The prefix is 1 to \(40 - width) characters without spaces (a user name is at most 40).")
        }
        guard password.count >= 8 else { throw Failure("The password must have at least 8 characters.") }
        let cost = cost ?? configuration.bcryptCost
        guard (4...31).contains(cost) else { throw Failure("A bcrypt cost is 4 to 31.") }
        try configuration.prepareStorage()
        let logger = Logger(label: "docketd.users")
        let storage = try await configuration.storageLocation.open(logger: logger)
        let hasher = PasswordHasher(cost: cost, threads: 1, queueLimit: 4)
        do {
            let hash = await hasher.hash(password)
            await hasher.shutdown()
            // Every account gets the one hash; another password (there is none here) would still be hashed.
            let (store, _) = try await RecordStore.open(storage: storage, logger: logger) { given in
                given == password ? hash : await PasswordHasher.hashOnce(given, cost: cost)
            }
            let taken = try await store.list(
                RecordQuery(
                    table: "sys_user", query: EncodedQuery(all: [QueryCondition("user_name", .startsWith, prefix)]),
                    fields: ["user_name"], limit: 1, count: false
                ),
                caller: .system
            ).records
            if let name = taken.first?["user_name"] { throw Failure("An account with the prefix exists already: '\(name)'.") }
            let roleIDs = try await roleIDs(roles, in: store)
            var names: [String] = []
            for index in 1...count {
                let number = String(index)
                let name = prefix + String(repeating: "0", count: width - number.count) + number
                let userID = try await store.insert(
                    into: "sys_user",
                    values: ["user_name": name, "first_name": name, "name": name, "user_password": password, "active": "true"],
                    caller: .system
                )
                for roleID in roleIDs {
                    try await store.insert(into: "sys_user_has_role", values: ["user": userID, "role": roleID], caller: .system)
                }
                names.append(name)
            }
            try await storage.close()
            return names
        } catch {
            await hasher.shutdown()
            try? await storage.close()
            throw error
        }
    }

    /// What `docketd users link` and `unlink` did.
    public struct LinkChange: Sendable, Equatable {
        /// The user name the identity was linked to before (nil for none).
        public let before: String?
    }

    /// Links an outside identity (a trusted provider's issuer and `sub`) to the account `userName`, replacing any
    /// earlier link of it: from then on that identity signs in as this account, whatever its tokens' names say.
    /// The one way to link an administrator's account.
    public static func link(in configuration: Configuration, userName: String, issuer: String, subject: String) async throws -> LinkChange {
        guard !issuer.isEmpty, issuer.utf8.count <= 1000, !subject.isEmpty, subject.utf8.count <= 255 else {
            throw Failure("Give the issuer exactly as its tokens' iss says it, and the subject as their sub says it.")
        }
        return try await withAccounts(configuration) { storage, store in
            guard let account = try await UserDirectory(store: store).account(userName: userName) else {
                throw Failure("There is no account '\(userName)'.")
            }
            let before = try await IdentityLinks(storage: storage).set(issuer: issuer, subject: subject, to: account.userID)
            guard let before else { return LinkChange(before: nil) }
            return LinkChange(before: try await name(ofUser: before, in: storage) ?? before)
        }
    }

    /// Unlinks an outside identity: it signs in as nobody, and docketd does not link it again by itself (not even
    /// by a verified e-mail), until an administrator links it with `link`.
    public static func unlink(in configuration: Configuration, issuer: String, subject: String) async throws -> LinkChange {
        try await withAccounts(configuration) { storage, _ in
            let before = try await IdentityLinks(storage: storage).user(issuer: issuer, subject: subject)
            guard try await IdentityLinks(storage: storage).remove(issuer: issuer, subject: subject) else {
                throw Failure("That identity is linked to no account.")
            }
            guard let before else { return LinkChange(before: nil) }
            return LinkChange(before: try await name(ofUser: before, in: storage) ?? before)
        }
    }

    /// Makes a REST API key for `userName` (sent as `x-sn-apikey`, it stands for that user); returns the key, which is
    /// shown this once (only its SHA-256 is kept). `expires` nil: it lasts until deactivated.
    public static func createAPIKey(in configuration: Configuration, userName: String, name: String, expires: Date?) async throws -> String {
        guard !name.isEmpty, name.utf8.count <= 100 else { throw Failure("Give the key a name of 1 to 100 characters (--name).") }
        return try await withAccounts(configuration) { _, store in
            guard let account = try await UserDirectory(store: store).account(userName: userName) else {
                throw Failure("There is no account '\(userName)'.")
            }
            let key = APIKeys.newKey()
            var values = ["name": name, "user": account.userID, "active": "true", "token_hash": APIKeys.hash(key)]
            if let expires { values["expires"] = GlideDateTime.format(expires) }
            try await store.insert(into: "api_key", values: values, caller: .system, options: WriteOptions(suppressAutoSysFields: true))
            return key
        }
    }

    /// Registers a client certificate (a PEM file) to `userName`: with `--tls-client-ca`, a client presenting it (and
    /// verified against those authorities) signs in as that user. Returns its SHA-256 fingerprint.
    public static func registerCertificate(in configuration: Configuration, userName: String, certificatePath: String) async throws -> String {
        let certificate: NIOSSLCertificate
        do {
            guard let first = try NIOSSLCertificate.fromPEMFile(certificatePath).first else {
                throw Failure("'\(certificatePath)' holds no certificate.")
            }
            certificate = first
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure("'\(certificatePath)' is not a readable PEM certificate (\(error)).")
        }
        let fingerprint = try ClientCertificates.fingerprint(certificate)
        let expires = Date(timeIntervalSince1970: TimeInterval(certificate.notValidAfter))
        return try await withAccounts(configuration) { _, store in
            guard let account = try await UserDirectory(store: store).account(userName: userName) else {
                throw Failure("There is no account '\(userName)'.")
            }
            let existing = try await store.list(
                RecordQuery(table: "sys_user_certificate", query: EncodedQuery(all: [QueryCondition("fingerprint", .equals, fingerprint)]),
                            fields: ["sys_id"], limit: 1, count: false),
                caller: .system
            ).records
            guard existing.isEmpty else { throw Failure("That certificate is registered already.") }
            try await store.insert(into: "sys_user_certificate", values: [
                "user": account.userID, "subject": String(describing: certificate.description.prefix(1000)), "active": "true",
                "fingerprint": fingerprint, "expires": GlideDateTime.format(expires),
            ], caller: .system, options: WriteOptions(suppressAutoSysFields: true))
            return fingerprint
        }
    }

    /// An account as `docketd users list` shows it.
    public struct Account: Sendable, Equatable {
        public let userName: String
        public let name: String
        public let roles: [String]
        /// The account is active (an inactive one cannot sign in at all).
        public let active: Bool
        public let lockedOut: Bool
        public let hasPassword: Bool
    }

    /// Every account (at most `limit`, by user name), with its roles: who can sign in, and as what.
    public static func list(in configuration: Configuration, limit: Int = 10_000) async throws -> [Account] {
        try await withAccounts(configuration) { storage, _ in
            try await storage.read { db in
                let users = try await db.rows(
                    "SELECT sys_id, user_name, name, active, locked_out, CASE WHEN user_password IS NULL OR user_password = '' THEN 0 ELSE 1 END AS has_password"
                        + " FROM sys_user ORDER BY user_name LIMIT " + .bind(max(0, min(limit, 100_000)))
                )
                let grants = try await db.rows(
                    "SELECT h." + .identifier("user") + " AS id, r.name AS role FROM sys_user_has_role AS h JOIN sys_user_role AS r"
                        + " ON r.sys_id = h.role ORDER BY r.name"
                )
                var roles: [String: [String]] = [:]
                for grant in grants {
                    guard let id = try grant.value(at: "id", kind: .text).text, let role = try grant.value(at: "role", kind: .text).text else { continue }
                    if roles[id]?.contains(role) != true { roles[id, default: []].append(role) }
                }
                return try users.map { row in
                    let id = try row.value(at: "sys_id", kind: .text).text ?? ""
                    return Account(
                        userName: try row.value(at: "user_name", kind: .text).text ?? "", name: try row.value(at: "name", kind: .text).text ?? "",
                        roles: roles[id] ?? [], active: try row.value(at: "active", kind: .integer).intValue != 0,
                        lockedOut: try row.value(at: "locked_out", kind: .integer).intValue == 1,
                        hasPassword: try row.value(at: "has_password", kind: .integer).intValue == 1
                    )
                }
            }
        }
    }

    /// The links of `userName` (everyone's when nil): issuer, subject, user name and how each was made.
    public static func links(in configuration: Configuration, userName: String?) async throws -> [(issuer: String, subject: String, userName: String, origin: String)] {
        try await withAccounts(configuration) { storage, store in
            var userID: String? = nil
            if let userName {
                guard let account = try await UserDirectory(store: store).account(userName: userName) else {
                    throw Failure("There is no account '\(userName)'.")
                }
                userID = account.userID
            }
            var found: [(issuer: String, subject: String, userName: String, origin: String)] = []
            for link in try await IdentityLinks(storage: storage).links(of: userID) {
                let name = link.userID.isEmpty ? "(nobody)" : try await Self.name(ofUser: link.userID, in: storage) ?? link.userID
                found.append((link.issuer, link.subject, name, link.origin))
            }
            return found
        }
    }

    private static func name(ofUser userID: String, in storage: any Storage) async throws -> String? {
        try await storage.read { db in
            try await db.rows("SELECT user_name FROM sys_user WHERE sys_id = " + .bind(userID)).first?.value(at: "user_name", kind: .text).text
        }
    }

    /// Opens the data folder's database (which must exist) and its engine for `body`, and closes it after.
    private static func withAccounts<T: Sendable>(
        _ configuration: Configuration, _ body: (any Storage, RecordStore) async throws -> T
    ) async throws -> T {
        let logger = Logger(label: "docketd.users")
        let storage = try await configuration.storageLocation.open(logger: logger)
        do {
            let (store, _) = try await RecordStore.open(storage: storage, logger: logger) { _ in "" }
            let result = try await body(storage, store)
            try await storage.close()
            return result
        } catch {
            try? await storage.close()
            throw error
        }
    }
}
