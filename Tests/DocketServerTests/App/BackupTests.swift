import DocketModel
import Foundation
import Logging
import SQLiteNIO
import Synchronization
import Testing

@testable import DocketServer

@Suite("docketd backup and restore", .enabled(if: TestDatabase.postgres == nil, "SQLite's backup; PostgreSQL has pg_dump"))
struct BackupTests {
    static let logger = Logger(label: "test")

    /// The sys_ids of the writes acknowledged so far.
    final class Acknowledged: Sendable {
        private let ids = Mutex<Set<String>>([])
        func withLock<T>(_ body: (inout Set<String>) -> T) -> T { ids.withLock { body(&$0) } }
    }

    /// The sys_ids of one query's rows in an SQLite file.
    static func ids(_ path: String, _ sql: String, _ binds: [SQLiteData] = []) async throws -> Set<String> {
        let connection = try await SQLiteConnection.open(storage: .file(path: path), logger: logger)
        do {
            let ids = Set(try await connection.query(sql, binds).compactMap { $0.column("id")?.string })
            try await connection.close()
            return ids
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// 200 inserts by 8 concurrent writers, and a backup once 40 of them are acknowledged; checks the backup against
    /// the log. (Eight, not 200 at once: a write gives up after waiting 4 s for its turn, and on a loaded two-core
    /// machine 200 queued debug-build writes took longer than that, which is the bound working, not the backup.)
    static func writeWhileBackingUp(
        store: RecordStore, path: String, to backupPath: String, acknowledged: Acknowledged
    ) async throws -> (DatabaseBackup.Summary, Set<String>) {
        let summary = try await withThrowingTaskGroup(of: DatabaseBackup.Summary?.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for index in stride(from: writer, to: 200, by: 8) {
                        let id = try await store.insert(
                            into: "incident", values: ["short_description": "backup write \(index)"], caller: Callers.admin
                        )
                        acknowledged.withLock { _ = $0.insert(id) }
                    }
                    return nil
                }
            }
            group.addTask {
                // Once some writes are in, while the others go on.
                while acknowledged.withLock({ $0.count }) < 40 { try await Task.sleep(for: .milliseconds(5)) }
                return try await DatabaseBackup.backup(.sqlite(path: path), to: backupPath, force: false, logger: Self.logger)
            }
            var summary: DatabaseBackup.Summary?
            for try await result in group { if let result { summary = result } }
            return try #require(summary)
        }
        #expect(acknowledged.withLock { $0.count } == 200)
        // The writes the log had committed up to the backup's sequence, from the source after all 200 finished.
        let upToBackup = try await Self.ids(
            path, "SELECT record_id AS id FROM docket_event_log WHERE table_name = 'incident' AND operation = 'insert' AND seq <= ?",
            [.integer(summary.eventSequence)]
        )
        let inBackup = try await Self.ids(backupPath, "SELECT sys_id AS id FROM task WHERE short_description LIKE 'backup write %'")
        #expect(!inBackup.isEmpty)
        #expect(inBackup == upToBackup.intersection(acknowledged.withLock { $0 }))
        #expect(inBackup.isSubset(of: acknowledged.withLock { $0 }))
        let backupHead = try await Self.ids(backupPath, "SELECT CAST(MAX(seq) AS TEXT) AS id FROM docket_event_log")
        #expect(backupHead == [String(summary.eventSequence)])
        return (summary, inBackup)
    }

    @Test("a backup taken during 200 writes by 8 concurrent writers holds every write up to its sequence and nothing after; it restores and serves them")
    func backupDuringWrites() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/data/docket.sqlite"
        try await TestDatabase.demoSQLite(at: path)
        let storage = try await SQLiteStorage.open(path: path, readers: 2, logger: Self.logger)
        let hasher = PasswordHasher(cost: 4)
        let (store, _) = try await RecordStore.open(storage: storage, logger: Self.logger, hashPassword: hasher.hash)
        let acknowledged = Acknowledged()
        let backupPath = directory.path + "/backup.sqlite"
        let summary: DatabaseBackup.Summary
        let inBackup: Set<String>
        do {
            (summary, inBackup) = try await Self.writeWhileBackingUp(store: store, path: path, to: backupPath, acknowledged: acknowledged)
            try await storage.close()
            await hasher.shutdown()
        } catch {
            try? await storage.close()
            await hasher.shutdown()
            throw error
        }

        // Restored into a new data folder, docketd serves exactly those records and follows on from its log.
        let restoredPath = directory.path + "/restored/docket.sqlite"
        let restored = try await DatabaseBackup.restore(from: backupPath, to: .sqlite(path: restoredPath), force: false, logger: Self.logger)
        #expect(restored.eventSequence == summary.eventSequence)
        // Both hold signing keys and password hashes: their owner's alone (the process's umask, 022 here, would give 0644).
        for file in [backupPath, restoredPath] {
            let mode = (try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue
            #expect(mode == 0o600, "\(file) has mode \(String(mode ?? 0, radix: 8))")
        }
        var configuration = TestApp.configuration(dataDirectory: directory.path + "/restored")
        configuration.database = nil
        let app = try await buildApplication(configuration)
        try await app.test(.router) { client throws in
            let listed = try await client.get(
                "/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHbackup%20write&sysparm_fields=sys_id&sysparm_limit=500", .admin
            )
            #expect(Set(try listed.results.map { $0.string("sys_id") }) == inBackup)
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"after the restore"}"#, headers: .admin)
            #expect(created.status == .created)
        }
        let next = try await Self.ids(restoredPath, "SELECT CAST(MAX(seq) AS TEXT) AS id FROM docket_event_log")
        // The log goes on after the backup's sequence: no number is given twice.
        #expect((next.first.flatMap { Int($0) } ?? 0) > summary.eventSequence)
    }

    /// What a backup or restore refused with: its ``DatabaseBackup/Failure``'s text, "no refusal", or the other error.
    static func refusal(_ body: () async throws -> Void) async -> String {
        do {
            try await body()
            return "no refusal"
        } catch let failure as DatabaseBackup.Failure {
            return failure.description
        } catch {
            return "another error: \(error)"
        }
    }

    @Test("refusals: an existing file, a folder, PostgreSQL, a damaged or foreign file, a newer schema, a database that holds data")
    func refusals() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/data/docket.sqlite"
        try await TestDatabase.demoSQLite(at: path)
        let backupPath = directory.path + "/backup.sqlite"
        let refusal = Self.refusal
        _ = try await DatabaseBackup.backup(.sqlite(path: path), to: backupPath, force: false, logger: Self.logger)
        #expect(await refusal { _ = try await DatabaseBackup.backup(.sqlite(path: path), to: backupPath, force: false, logger: Self.logger) }
            .contains("exists; give --force"))
        let again = try await DatabaseBackup.backup(.sqlite(path: path), to: backupPath, force: true, logger: Self.logger)
        #expect(again.path == URL(fileURLWithPath: backupPath).standardizedFileURL.path)
        #expect(await refusal { _ = try await DatabaseBackup.backup(.sqlite(path: path), to: directory.path, force: true, logger: Self.logger) }
            .contains("is a folder"))
        #expect(await refusal { _ = try await DatabaseBackup.backup(.sqlite(path: path), to: directory.path + "/none/x.sqlite", force: false, logger: Self.logger) }
            .contains("no folder"))
        #expect(await refusal { _ = try await DatabaseBackup.backup(.sqlite(path: directory.path + "/missing.sqlite"), to: backupPath, force: true, logger: Self.logger) }
            .contains("no database"))
        #expect(await refusal { _ = try await DatabaseBackup.backup(.sqlite(path: path), to: path, force: true, logger: Self.logger) }
            .contains("the database itself"))
        let postgres = try StorageLocation(parsing: "postgres://docket:secret@db.internal:5432/docket")
        let pgRefusal = await refusal { _ = try await DatabaseBackup.backup(postgres, to: backupPath, force: true, logger: Self.logger) }
        #expect(pgRefusal.contains("pg_dump") && !pgRefusal.contains("secret"))
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: backupPath, to: postgres, force: true, logger: Self.logger) }
            .contains("pg_restore"))

        // Restoring over a database that holds data needs --force; a damaged, foreign or newer file never restores.
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: backupPath, to: .sqlite(path: path), force: false, logger: Self.logger) }
            .contains("already holds a database"))
        let garbage = directory.path + "/garbage.sqlite"
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: garbage))
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: garbage, to: .sqlite(path: path), force: true, logger: Self.logger) }
            .contains("not an SQLite database"))
        let foreign = directory.path + "/foreign.sqlite"
        let connection = try await SQLiteConnection.open(storage: .file(path: foreign), logger: Self.logger)
        _ = try await connection.query("CREATE TABLE notes (text TEXT)")
        try await connection.close()
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: foreign, to: .sqlite(path: path), force: true, logger: Self.logger) }
            .contains("not a Docket database"))
        let newer = try await SQLiteConnection.open(storage: .file(path: backupPath), logger: Self.logger)
        _ = try await newer.query("UPDATE docket_meta SET value = '99' WHERE key = 'schema_version'")
        try await newer.close()
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: backupPath, to: .sqlite(path: path), force: true, logger: Self.logger) }
            .contains("newer docketd"))
        #expect(await refusal { _ = try await DatabaseBackup.restore(from: directory.path + "/none.sqlite", to: .sqlite(path: path), force: true, logger: Self.logger) }
            .contains("no backup"))
        // The database is untouched by every refusal.
        #expect(try await DatabaseBackup.inspect(path, logger: Self.logger).schemaVersion == SchemaStore.schemaVersion)
        // No partial files are left behind.
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".partial-") || $0.contains(".restoring-") }
        #expect(left.isEmpty)
    }

    @Test("restore refuses a database a docketd has open, even with --force, and a docketd does not open one being restored")
    func restoreUnderARunningServer() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/data/docket.sqlite"
        try await TestDatabase.demoSQLite(at: path)
        let backupPath = directory.path + "/backup.sqlite"
        _ = try await DatabaseBackup.backup(.sqlite(path: path), to: backupPath, force: false, logger: Self.logger)
        let storage = try await SQLiteStorage.open(path: path, readers: 1, logger: Self.logger)
        let hasher = PasswordHasher(cost: 4)
        let (store, _) = try await RecordStore.open(storage: storage, logger: Self.logger, hashPassword: hasher.hash)
        let written = try await store.insert(into: "incident", values: ["short_description": "acknowledged while serving"], caller: Callers.admin)
        let refused = await Self.refusal {
            _ = try await DatabaseBackup.restore(from: backupPath, to: .sqlite(path: path), force: true, logger: Self.logger)
        }
        #expect(refused.contains("is open in a running docketd") && refused.contains("Stop it first"), "\(refused)")
        // Still the served database, with what it acknowledged.
        #expect(try await store.get(written, in: "incident", caller: Callers.admin).record["short_description"] == "acknowledged while serving")
        try await storage.close()
        await hasher.shutdown()

        // Stopped, it restores; meanwhile a docketd that starts is refused, with the reason.
        do {
            let lock = try DatabaseFileLock.take(.replacing, database: URL(fileURLWithPath: path).standardizedFileURL.path).get()
            do {
                _ = try await SQLiteStorage.open(path: path, readers: 1, logger: Self.logger)
                Issue.record("a database being restored should not open")
            } catch let error as SQLiteStorageError {
                #expect(error.description.contains("docketd restore is replacing"))
            }
            withExtendedLifetime(lock) {}
        }
        let restored = try await DatabaseBackup.restore(from: backupPath, to: .sqlite(path: path), force: true, logger: Self.logger)
        #expect(restored.path == URL(fileURLWithPath: path).standardizedFileURL.path)
    }
}
