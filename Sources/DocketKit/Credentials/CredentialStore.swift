import Foundation

#if canImport(Security)
    import Security
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
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

    /// Writes the file (mode 0600), in place at once: a reader sees the old file or the new one, never part of one.
    /// Two programs saving at once (two `docket login`s) each keep the other's instance: the read and the write
    /// happen under a lock.
    public func save(_ credentials: Credentials, for instance: Instance) throws {
        try locked {
            var all = try load()
            all[instance.description] = credentials
            try write(all)
        }
    }

    /// Removes the instance from the file.
    public func delete(for instance: Instance) throws {
        try locked {
            var all = try load()
            guard all[instance.description] != nil else { return }
            all[instance.description] = nil
            try write(all)
        }
    }

    /// The file's credentials; none when there is no file. A file that cannot be read or understood is an error,
    /// never "no credentials": a save after it would wipe every other instance's.
    private func load() throws -> [String: Credentials] {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch let error as CocoaError where error.code == .fileReadNoSuchFile {
            return [:]
        } catch {
            guard FileManager.default.fileExists(atPath: url.path) else { return [:] }
            throw DocketError(kind: .invalidRequest, message: "\(url.path) could not be read: \(error.localizedDescription)")
        }
        do {
            return try JSONDecoder().decode([String: Credentials].self, from: data)
        } catch {
            throw DocketError(
                kind: .invalidRequest, message: "\(url.path) is not a credentials file docket understands; move it away to log in again"
            )
        }
    }

    private func createDirectory() throws {
        try FileManager.default.createDirectory(
            at: url.deletingLastPathComponent(), withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]
        )
    }

    /// Runs `body` holding an exclusive lock on the file's companion `credentials.json.lock`.
    private func locked(_ body: () throws -> Void) throws {
        try createDirectory()
        let lockPath = url.path + ".lock"
        let descriptor = open(lockPath, O_RDWR | O_CREAT, 0o600)
        guard descriptor >= 0 else {
            throw DocketError(kind: .invalidRequest, message: "\(lockPath) could not be opened: \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX) == 0 else {
            throw DocketError(kind: .invalidRequest, message: "\(lockPath) could not be locked: \(String(cString: strerror(errno)))")
        }
        defer { flock(descriptor, LOCK_UN) }
        try body()
    }

    /// Writes a new file beside the old one, private from its first byte, and renames it over the old one.
    private func write(_ all: [String: Credentials]) throws {
        try createDirectory()
        let data = try JSONEncoder().encode(all)
        let partial = url.path + ".new-" + UUID().uuidString
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw DocketError(kind: .invalidRequest, message: "\(partial) could not be created: \(String(cString: strerror(errno)))")
        }
        var written = false
        defer { if !written { unlink(partial) } }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        try handle.write(contentsOf: data)
        try handle.synchronize()
        try handle.close()
        guard rename(partial, url.path) == 0 else {
            throw DocketError(kind: .invalidRequest, message: "\(url.path) could not be replaced: \(String(cString: strerror(errno)))")
        }
        written = true
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
