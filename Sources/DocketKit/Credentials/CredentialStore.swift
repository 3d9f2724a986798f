import Foundation

#if canImport(Security)
    import Security
#endif

/// Keeps credentials per instance between runs of an app or the `docket` command.
public protocol CredentialStore: Sendable {
    /// The credentials saved for an instance, if any.
    func credentials(for instance: Instance) throws -> Credentials?
    /// Saves credentials for an instance, replacing earlier ones.
    func save(_ credentials: Credentials, for instance: Instance) throws
    /// Forgets the credentials of an instance.
    func delete(for instance: Instance) throws
}

/// A JSON file readable only by its owner (mode 0600), by default `$XDG_CONFIG_HOME/docket/credentials.json`
/// or `~/.config/docket/credentials.json`. The store used on Linux.
public struct FileCredentialStore: CredentialStore {
    /// The file.
    public let url: URL

    /// A store in the given folder, or the default configuration folder.
    public init(directory: URL? = nil) {
        url = (directory ?? Self.defaultDirectory()).appendingPathComponent("credentials.json")
    }

    /// `$XDG_CONFIG_HOME/docket`, else `~/.config/docket`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("docket")
        }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".config/docket")
    }

    /// Reads the file.
    public func credentials(for instance: Instance) throws -> Credentials? {
        try load()[instance.description]
    }

    /// Writes the file (mode 0600).
    public func save(_ credentials: Credentials, for instance: Instance) throws {
        var all = try load()
        all[instance.description] = credentials
        try write(all)
    }

    /// Removes the instance from the file.
    public func delete(for instance: Instance) throws {
        var all = try load()
        all[instance.description] = nil
        try write(all)
    }

    private func load() throws -> [String: Credentials] {
        guard let data = try? Data(contentsOf: url) else { return [:] }
        return try JSONDecoder().decode([String: Credentials].self, from: data)
    }

    private func write(_ all: [String: Credentials]) throws {
        let manager = FileManager.default
        try manager.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700]
        )
        let data = try JSONEncoder().encode(all)
        // Create the file with 0600 before any secret is written to it.
        if !manager.fileExists(atPath: url.path) {
            _ = manager.createFile(atPath: url.path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        try data.write(to: url)
    }
}

#if canImport(Security)
    /// The Keychain, one generic-password item per instance. The store used on Apple platforms.
    public struct KeychainCredentialStore: CredentialStore {
        /// The Keychain service name of the items.
        public let service: String

        /// Creates a store.
        public init(service: String = "Docket") { self.service = service }

        private func query(_ instance: Instance) -> [String: Any] {
            [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
             kSecAttrAccount as String: instance.description]
        }

        public func credentials(for instance: Instance) throws -> Credentials? {
            var query = query(instance)
            query[kSecReturnData as String] = true
            var item: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &item)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess, let data = item as? Data else {
                throw DocketError(kind: .invalidRequest, message: "Keychain error \(status)")
            }
            return try JSONDecoder().decode(Credentials.self, from: data)
        }

        public func save(_ credentials: Credentials, for instance: Instance) throws {
            try delete(for: instance)
            var query = query(instance)
            query[kSecValueData as String] = try JSONEncoder().encode(credentials)
            let status = SecItemAdd(query as CFDictionary, nil)
            guard status == errSecSuccess else { throw DocketError(kind: .invalidRequest, message: "Keychain error \(status)") }
        }

        public func delete(for instance: Instance) throws {
            let status = SecItemDelete(query(instance) as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw DocketError(kind: .invalidRequest, message: "Keychain error \(status)")
            }
        }
    }
#endif

/// The platform's credential store: the Keychain on Apple platforms, a 0600 file elsewhere.
public func defaultCredentialStore() -> any CredentialStore {
    #if canImport(Security)
        return KeychainCredentialStore()
    #else
        return FileCredentialStore()
    #endif
}
