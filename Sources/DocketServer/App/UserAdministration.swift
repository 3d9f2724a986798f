import DocketModel
import Foundation
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
        var roleIDs: [String] = []
        for role in roles {
            if let id = try await ids("sys_user_role", "name", role).first {
                roleIDs.append(id)
            } else if let builtIn = builtInRoles.first(where: { $0.name == role }) {
                roleIDs.append(try await store.insert(
                    into: "sys_user_role", values: ["sys_id": builtIn.id, "name": role, "description": builtIn.description],
                    caller: .system
                ))
            } else {
                throw Failure("There is no role named '\(role)'.")
            }
        }
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
}
