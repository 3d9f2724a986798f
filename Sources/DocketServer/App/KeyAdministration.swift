import Foundation
import Logging

/// The token signing keys from the command line (`docketd keys list`, `docketd keys rotate`), on the database a
/// server uses; running servers sharing it take a new key within ``SigningKeyStore/publishLead`` seconds.
public enum KeyAdministration {
    /// One key as `docketd keys list` shows it.
    public struct KeyInfo: Sendable, Equatable {
        public let id: String
        public let algorithm: String
        /// When it signs (or signed) from.
        public let signsFrom: Date
        /// When a newer key took (or takes) over; nil for the newest.
        public let replacedAt: Date?
        /// Until when it verifies tokens: `replacedAt` plus the retention; nil while it signs.
        public let verifiesUntil: Date?

        /// `current`, `next` (published, not signing yet) or `retired` (verifies, no longer signs), at `now`.
        public func state(at now: Date = Date()) -> String {
            if signsFrom > now { return "next" }
            if let replacedAt, replacedAt <= now { return "retired" }
            return "current"
        }
    }

    /// The keys of the database `configuration` names, oldest first.
    public static func list(in configuration: Configuration) async throws -> [KeyInfo] {
        try await withStorage(configuration) { storage, secret in
            info(try await SigningKeyStore.load(storage, secret: secret))
        }
    }

    /// Adds a key that signs from `lead` seconds from now (every running server loads it before then); the key it
    /// replaces keeps verifying the tokens it signed until they expire. Returns the keys after the rotation.
    public static func rotate(in configuration: Configuration, lead: Int = 60) async throws -> [KeyInfo] {
        try await withStorage(configuration) { storage, secret in
            try await SigningKeyStore.rotate(storage, secret: secret, lead: lead)
            return info(try await SigningKeyStore.load(storage, secret: secret))
        }
    }

    static func info(_ keys: [SigningKeyStore.Key]) -> [KeyInfo] {
        keys.map { key in
            // Replaced by the next key of its own family (each family rotates on its own).
            let replaced = keys.first { $0.algorithm == key.algorithm && ($0.signsFrom, $0.id) > (key.signsFrom, key.id) }?.signsFrom
            return KeyInfo(
                id: key.id, algorithm: key.algorithm, signsFrom: Date(timeIntervalSince1970: TimeInterval(key.signsFrom)),
                replacedAt: replaced.map { Date(timeIntervalSince1970: TimeInterval($0)) },
                verifiesUntil: replaced.map { Date(timeIntervalSince1970: TimeInterval($0 + SigningKeyStore.retention)) }
            )
        }
    }

    private static func withStorage<T: Sendable>(
        _ configuration: Configuration, _ body: (any Storage, [UInt8]) async throws -> T
    ) async throws -> T {
        try configuration.prepareStorage()
        let logger = Logger(label: "docketd.keys")
        let storage = try await configuration.storageLocation.open(logger: logger)
        do {
            _ = try await SchemaStore.prepare(storage)
            let result = try await body(storage, try await SigningKey.load(storage))
            try await storage.close()
            return result
        } catch {
            try? await storage.close()
            throw error
        }
    }
}
