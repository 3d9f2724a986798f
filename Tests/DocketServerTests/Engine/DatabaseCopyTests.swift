import DocketModel
import Foundation
import Logging
import NIOCore
import Testing

@testable import DocketServer

/// `docketd migrate`: a whole database copied into an empty one serves exactly what the original served, and
/// goes on from where it stopped (numbers, event sequences). Into SQLite always; into PostgreSQL when
/// `DOCKET_TEST_POSTGRES_URL` names a server.
@Suite("Copying a database")
struct DatabaseCopyTests {
    static var targets: [String] { TestDatabase.postgres == nil ? ["sqlite"] : ["sqlite", "postgres"] }

    @Test("everything arrives: records, journals, attachment bytes, an added table, the event log; numbering goes on", arguments: targets)
    func copy(_ kind: String) async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let source = StorageLocation.sqlite(path: directory.path + "/source.sqlite")
        let target = kind == "sqlite" ? .sqlite(path: directory.path + "/target.sqlite") : try #require(TestDatabase.freshPostgres())
        let hasher = PasswordHasher(cost: 4)
        // A source with the demo data and a bit of everything.
        let original = try await source.open(logger: Logger(label: "test"))
        let (store, _) = try await RecordStore.open(storage: original, logger: Logger(label: "test"), hashPassword: hasher.hash)
        try await DemoData.seed(store)
        _ = try await store.insert(into: "sys_db_object", values: ["name": "u_asset", "label": "Asset"], caller: Callers.admin)
        _ = try await store.insert(
            into: "sys_dictionary", values: ["name": "u_asset", "element": "u_serial", "internal_type": "string", "column_label": "Serial"],
            caller: Callers.admin
        )
        let asset = try await store.insert(into: "u_asset", values: ["u_serial": "SN-1"], caller: Callers.admin)
        let incident = try await store.insert(
            into: "incident", values: ["short_description": "Before the move", "comments": "First comment"], caller: Callers.john
        )
        let bytes = (0..<600).map { UInt8($0 % 256) }
        let attachment = try await store.addAttachment(
            .init(tableName: "incident", recordID: incident, fileName: "a.bin", contentType: "application/octet-stream", content: ByteBuffer(bytes: bytes)),
            caller: Callers.john
        )
        let number = try await store.get(incident, in: "incident", caller: Callers.admin).record["number"]
        let lastSequence = try await store.newestSequence()
        let eventCount = try await store.events(after: 0, limit: 100_000).count
        try await original.close()

        let report = try await DatabaseCopy.copy(from: source, to: target, logger: Logger(label: "test"))
        #expect(report.rows.contains { $0.table == "u_asset" && $0.count == 1 })
        #expect(report.rows.contains { $0.table == "docket_attachment_chunk" && $0.count == 1 })

        // Copying again into the same (now filled) target is refused.
        await #expect(throws: DatabaseCopy.Failure.self) {
            try await DatabaseCopy.copy(from: source, to: target, logger: Logger(label: "test"))
        }

        let copied = try await target.open(logger: Logger(label: "test"))
        let (moved, isNew) = try await RecordStore.open(storage: copied, logger: Logger(label: "test"), hashPassword: hasher.hash)
        #expect(!isNew)
        #expect(try await moved.get(asset, in: "u_asset", caller: Callers.admin).record["u_serial"] == "SN-1")
        let record = try await moved.get(incident, in: "incident", caller: Callers.john).record
        #expect(record["short_description"] == "Before the move")
        #expect(record["number"] == number)
        #expect(try await moved.journalEntries(for: [incident], elements: ["comments"])[incident]?.first?.value == "First comment")
        #expect(try await moved.attachmentContent(attachment, caller: Callers.john).content == [ByteBuffer(bytes: bytes)])
        // The newest number, not the settled mark (latestSequence): on PostgreSQL that stays below it while any
        // transaction of the database, another test's in another schema too, began before the copy and is in flight.
        #expect(try await moved.newestSequence() == lastSequence)
        #expect(try await moved.events(after: 0, limit: 100_000).count == eventCount)
        // The copy goes on from where the original stopped.
        let next = try await moved.insert(into: "incident", values: ["short_description": "After the move"], caller: Callers.john)
        let nextNumber = try await moved.get(next, in: "incident", caller: Callers.admin).record["number"]
        #expect(nextNumber > number)
        // The log's newest number, not its settled mark: on PostgreSQL that waits for every transaction of the
        // database in flight, other suites' (in other schemas) included.
        #expect(try await moved.newestSequence() == lastSequence + 1)
        // Users log in with the passwords they had.
        let account = try await UserDirectory(store: moved).account(userName: "john.doe")
        #expect(try await hasher.verify("password", hash: try #require(account).passwordHash))
        try await copied.close()
        await hasher.shutdown()
    }

    @Test("a source that is no Docket database, or the same database as the target, is refused")
    func refused() async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let empty = StorageLocation.sqlite(path: directory.path + "/empty.sqlite")
        await #expect(throws: DatabaseCopy.Failure.self) {
            try await DatabaseCopy.copy(from: empty, to: .sqlite(path: directory.path + "/t.sqlite"), logger: Logger(label: "test"))
        }
        await #expect(throws: DatabaseCopy.Failure.self) {
            try await DatabaseCopy.copy(from: empty, to: empty, logger: Logger(label: "test"))
        }
    }

    static func digest(_ path: String) throws -> String {
        Digest.sha256Hex(try Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test("the source is never written: a schema-1 file is upgraded only in a temporary copy, and keeps its bytes")
    func sourceUntouched() async throws {
        try #require(FileManager.default.fileExists(atPath: UpgradeTests.fixture), "the fixture is missing")
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let source = directory.path + "/old.sqlite"
        try FileManager.default.copyItem(atPath: UpgradeTests.fixture, toPath: source)
        let before = try Self.digest(source)
        let target = directory.path + "/new.sqlite"
        let report = try await DatabaseCopy.copy(from: .sqlite(path: source), to: .sqlite(path: target), logger: Logger(label: "test"))
        #expect(report.totalRows > 100)
        #expect(try Self.digest(source) == before)
        #expect(!FileManager.default.fileExists(atPath: source + "-wal"))
        let copied = try await SQLiteStorage.open(path: target, readers: 1, logger: Logger(label: "test"))
        let version = try await copied.read { db in try await Migrations.version(db) }
        let incidents = try await copied.read { db in try await db.integer("SELECT COUNT(*) FROM task WHERE sys_class_name = 'incident'") }
        try await copied.close()
        #expect(version == SchemaStore.schemaVersion)
        #expect(incidents > 0)
    }

    @Test("a copy made while the source takes writes is one snapshot: its records and its event log agree", .timeLimit(.minutes(3)))
    func oneSnapshot() async throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/data/docket.sqlite"
        try await TestDatabase.demoSQLite(at: path)
        let storage = try await SQLiteStorage.open(path: path, readers: 2, logger: Logger(label: "test"))
        let hasher = PasswordHasher(cost: 4)
        let (store, _) = try await RecordStore.open(storage: storage, logger: Logger(label: "test"), hashPassword: hasher.hash)
        let target = directory.path + "/copy.sqlite"
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        // A write that waited its bounded time behind the others (on a loaded machine, while the copy
                        // reads) is refused before it begins, as a 503 would say; it is tried again, as a client would.
                        while true {
                            do {
                                _ = try await store.insert(into: "incident", values: ["short_description": "copy write \(index)"], caller: Callers.admin)
                                return
                            } catch is StorageUnavailable {
                                try await Task.sleep(for: .milliseconds(50))
                            }
                        }
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(20))
                    _ = try await DatabaseCopy.copy(from: .sqlite(path: path), to: .sqlite(path: target), logger: Logger(label: "test"))
                }
                try await group.waitForAll()
            }
            try await storage.close()
            await hasher.shutdown()
        } catch {
            try? await storage.close()
            await hasher.shutdown()
            throw error
        }
        let records = try await BackupTests.ids(target, "SELECT sys_id AS id FROM task WHERE short_description LIKE 'copy write %'")
        let logged = try await BackupTests.ids(
            target, "SELECT record_id AS id FROM docket_event_log WHERE table_name = 'incident' AND operation = 'insert'"
        )
        let before = try await BackupTests.ids(path, "SELECT sys_id AS id FROM task WHERE short_description LIKE 'copy write %'")
        #expect(before.count == 100)
        #expect(records == logged.intersection(before))
    }
}
