import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif
import SQLiteNIO

/// `docketd backup` and `docketd restore` for SQLite databases.
///
/// A backup is SQLite's `VACUUM INTO` on a connection of its own: one read transaction, so the copy is a consistent
/// snapshot of every committed write up to one moment (the event log's sequence included) while docketd goes on
/// serving and writing. It is written to a temporary file beside the target, checked (`PRAGMA integrity_check`, a
/// Docket schema), and only then renamed into place, so a failed or interrupted backup never leaves a half-written
/// file under the target's name. A restore checks the backup the same way, copies it beside the database and
/// renames it into place, removing the old database's `-wal` and `-shm` files first (SQLite would otherwise
/// replay the old log onto the restored file). PostgreSQL has `pg_dump` and `pg_restore` for both.
public enum DatabaseBackup {
    /// A backup or restore that cannot be made, as a sentence to act on.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// What a backup file holds.
    public struct Summary: Sendable, Equatable {
        public let path: String
        public let bytes: Int
        /// The newest sequence of its event log: every write acknowledged up to it is in the file.
        public let eventSequence: Int
        public let schemaVersion: Int
    }

    /// Copies the SQLite database at `location` to the file `target`, consistent while docketd serves it.
    public static func backup(_ location: StorageLocation, to target: String, force: Bool, logger: Logger) async throws -> Summary {
        guard case .sqlite(let source) = location else {
            throw Failure(
                "\(location.redacted) is PostgreSQL: back it up with pg_dump (pg_dump --format=custom DATABASE > FILE, while "
                    + "docketd runs) and restore it with pg_restore; see docs/deployment.md."
            )
        }
        guard FileManager.default.fileExists(atPath: source) else { throw Failure("There is no database at \(source).") }
        let targetURL = URL(fileURLWithPath: target).standardizedFileURL
        guard targetURL.path != URL(fileURLWithPath: source).standardizedFileURL.path else {
            throw Failure("--to names the database itself; give another file.")
        }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: targetURL.path, isDirectory: &isFolder) {
            guard !isFolder.boolValue else { throw Failure("\(targetURL.path) is a folder; give a file name.") }
            guard force else { throw Failure("\(targetURL.path) exists; give --force to replace it.") }
        }
        let folder = targetURL.deletingLastPathComponent().path
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw Failure("There is no folder \(folder) to write the backup in.")
        }
        let partial = folder + "/." + targetURL.lastPathComponent + ".partial-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: partial) }
        // A backup holds what the database holds, signing keys and password hashes included: readable by its owner
        // alone from its first byte, whatever the process's umask.
        try createPrivately(partial)
        try await snapshot(of: source, into: partial, logger: logger)
        let summary = try await inspect(partial, logger: logger)
        guard rename(partial, targetURL.path) == 0 else {
            throw Failure("The backup could not be moved to \(targetURL.path): \(String(cString: strerror(errno))).")
        }
        return Summary(path: targetURL.path, bytes: summary.bytes, eventSequence: summary.eventSequence, schemaVersion: summary.schemaVersion)
    }

    /// Writes one consistent copy of the SQLite database at `source` to the new file `target` (one read
    /// transaction: every write committed before it began, none after); the source is only read.
    static func snapshot(of source: String, into target: String, logger: Logger) async throws {
        try await withConnection(source, logger: logger) { connection in
            _ = try await connection.query("PRAGMA busy_timeout=5000")
            do {
                _ = try await connection.query("VACUUM INTO ?", [.text(target)])
            } catch {
                throw Failure("A copy of \(source) could not be written to \(target): \(error)")
            }
        }
    }

    /// Puts the backup `source` in place of the SQLite database at `location`. Refuses to replace a database that
    /// holds anything unless `force`; docketd must not be serving it meanwhile.
    public static func restore(from source: String, to location: StorageLocation, force: Bool, logger: Logger) async throws -> Summary {
        guard case .sqlite(let target) = location else {
            throw Failure(
                "\(location.redacted) is PostgreSQL: restore a pg_dump file with pg_restore into an empty database; "
                    + "see docs/deployment.md. (docketd migrate --from sqlite:BACKUP --to postgres://… copies a backup file into one.)"
            )
        }
        guard FileManager.default.fileExists(atPath: source) else { throw Failure("There is no backup at \(source).") }
        let summary = try await inspect(source, logger: logger)
        guard summary.schemaVersion <= SchemaStore.schemaVersion else {
            throw Failure(
                "The backup was made by a newer docketd (schema version \(summary.schemaVersion); this docketd knows "
                    + "\(SchemaStore.schemaVersion)). Restore it with that docketd."
            )
        }
        let targetURL = URL(fileURLWithPath: target).standardizedFileURL
        guard targetURL.path != URL(fileURLWithPath: source).standardizedFileURL.path else {
            throw Failure("--from names the database itself.")
        }
        // Held until the backup is in place: a docketd that starts meanwhile waits for it (it refuses to start).
        let folder = targetURL.deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let replacing: DatabaseFileLock
        switch DatabaseFileLock.take(.replacing, database: targetURL.path) {
        case .success(let lock): replacing = lock
        case .failure(.held):
            throw Failure(
                "\(targetURL.path) is open in a running docketd (the server, or a docketd command). Stop it first: a "
                    + "server whose database is replaced under it goes on acknowledging writes that its next start loses."
            )
        case .failure(.failed(let reason)): throw Failure("Whether docketd has \(targetURL.path) open cannot be told: \(reason).")
        }
        // Let go as soon as the restore ends, not whenever the lock object is freed.
        defer { replacing.release() }
        if FileManager.default.fileExists(atPath: targetURL.path), !force, try await holdsData(targetURL.path, logger: logger) {
            throw Failure(
                "\(targetURL.path) already holds a database. Stop docketd, then give --force to replace it with the backup."
            )
        }
        let partial = folder + "/." + targetURL.lastPathComponent + ".restoring-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: partial) }
        do {
            // The database is its owner's alone from its first byte, as the backup was.
            try createPrivately(partial)
            guard let input = FileHandle(forReadingAtPath: source), let output = FileHandle(forWritingAtPath: partial) else {
                throw Failure("\(source) or \(partial) could not be opened")
            }
            defer {
                try? input.close()
                try? output.close()
            }
            while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty { try output.write(contentsOf: chunk) }
            try output.synchronize()
            for suffix in ["-wal", "-shm", "-journal"] where FileManager.default.fileExists(atPath: targetURL.path + suffix) {
                try FileManager.default.removeItem(atPath: targetURL.path + suffix)
            }
            // rename(2) puts the whole file in place at once, over the old one.
            guard rename(partial, targetURL.path) == 0 else { throw Failure(String(cString: strerror(errno))) }
        } catch {
            throw Failure("The backup could not be put in place at \(targetURL.path): \(error.localizedDescription)")
        }
        return Summary(path: targetURL.path, bytes: summary.bytes, eventSequence: summary.eventSequence, schemaVersion: summary.schemaVersion)
    }

    /// Makes the empty file `path` readable and writable by its owner alone (VACUUM INTO writes into an empty file).
    static func createPrivately(_ path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else { throw Failure("\(path) could not be created: \(String(cString: strerror(errno))).") }
        // The mode given to open(2) is masked by the umask; set it outright.
        defer { close(descriptor) }
        guard fchmod(descriptor, 0o600) == 0 else { throw Failure("\(path) could not be made private: \(String(cString: strerror(errno))).") }
    }

    /// Checks that `path` is a sound Docket database and says what it holds.
    static func inspect(_ path: String, logger: Logger) async throws -> Summary {
        try await withConnection(path, logger: logger) { connection in
            let check: [SQLiteRow]
            do {
                check = try await connection.query("PRAGMA integrity_check")
            } catch {
                throw Failure("\(path) is not an SQLite database: \(error)")
            }
            let verdict = check.compactMap { $0.column("integrity_check")?.string }
            guard verdict == ["ok"] else {
                throw Failure("\(path) is damaged (integrity check: \(verdict.prefix(3).joined(separator: "; "))).")
            }
            let tables = try await connection.query(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('docket_meta', 'docket_event_log')"
            )
            guard tables.count == 2 else { throw Failure("\(path) is not a Docket database.") }
            let version = try await connection.query("SELECT value FROM docket_meta WHERE key = 'schema_version'")
                .first?.column("value")?.string.flatMap { Int($0) } ?? 1
            let head = try await connection.query("SELECT COALESCE(MAX(seq), 0) AS head FROM docket_event_log")
                .first?.column("head")?.integer ?? 0
            let bytes = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
            return Summary(path: path, bytes: bytes, eventSequence: head, schemaVersion: version)
        }
    }

    /// Whether the file holds a Docket database or any table at all (an empty or new file does not).
    private static func holdsData(_ path: String, logger: Logger) async throws -> Bool {
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        guard size > 0 else { return false }
        return try await withConnection(path, logger: logger) { connection in
            do {
                return try await !connection.query("SELECT name FROM sqlite_master WHERE type = 'table' LIMIT 1").isEmpty
            } catch {
                return true  // Not a database docketd can read: not replaced without --force either.
            }
        }
    }

    private static func withConnection<T: Sendable>(
        _ path: String, logger: Logger, _ body: (SQLiteConnection) async throws -> T
    ) async throws -> T {
        let connection: SQLiteConnection
        do {
            connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        } catch {
            throw Failure("\(path) cannot be opened: \(error)")
        }
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
