import DocketModel
import Foundation
import Logging
import Testing

@testable import DocketServer

/// A database made by an older docketd opens in this one: migrated on start to the very layout a new database
/// gets, its records kept. `Fixtures/docket-schema-1.sqlite.bin` was made by the docketd before migrations were
/// recorded (schema version 1, commit 9efd200, `docketd --demo`): the oldest database this docketd upgrades.
@Suite("Upgrades from the oldest supported database", .enabled(if: TestDatabase.postgres == nil, "the fixture is an SQLite file"))
struct UpgradeTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/docket-schema-1.sqlite.bin").path

    /// The layout of an SQLite database, one line per table column, index and catalog entry, sorted: what a
    /// migration may change, and nothing that differs by when or in which order it was made (column order,
    /// rows' content other than the catalog's).
    static func layout(_ storage: any Storage) async throws -> [String] {
        try await storage.read { db in
            var lines: [String] = []
            let tables = try await db.rows(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).compactMap { try $0.value(at: "name", kind: .text).text }
            for table in tables {
                for column in try await db.rows(SQLFragment("PRAGMA table_info(\"\(table)\")")) {
                    let name = try column.value(at: "name", kind: .text).text ?? ""
                    let type = try column.value(at: "type", kind: .text).text ?? ""
                    let notNull = try column.value(at: "notnull", kind: .integer).intValue ?? 0
                    let key = try column.value(at: "pk", kind: .integer).intValue ?? 0
                    lines.append("column \(table).\(name) \(type.uppercased()) notnull=\(notNull) pk=\(key)")
                }
                for index in try await db.rows(SQLFragment("PRAGMA index_list(\"\(table)\")")) {
                    let name = try index.value(at: "name", kind: .text).text ?? ""
                    let unique = try index.value(at: "unique", kind: .integer).intValue ?? 0
                    let origin = try index.value(at: "origin", kind: .text).text ?? ""
                    let columns = try await db.rows(SQLFragment("PRAGMA index_info(\"\(name)\")"))
                        .compactMap { try $0.value(at: "name", kind: .text).text }
                    // Automatic indexes of keys are named by SQLite; the columns say what they are.
                    let label = origin == "c" ? name : origin
                    lines.append("index \(table) \(label) unique=\(unique) (\(columns.joined(separator: ",")))")
                }
            }
            for row in try await db.rows(
                "SELECT name, element, internal_type, reference FROM sys_dictionary WHERE active = 1"
            ) {
                let parts = try ["name", "element", "internal_type", "reference"].map { try row.value(at: $0, kind: .text).text ?? "" }
                lines.append("field " + parts.joined(separator: " "))
            }
            for row in try await db.rows("SELECT name, super_class FROM sys_db_object") {
                lines.append("table " + (try row.value(at: "name", kind: .text).text ?? ""))
            }
            return lines.sorted()
        }
    }

    @Test("a schema-1 database upgrades on start to the layout of a new database, its records and users kept")
    func upgradeFromOldest() async throws {
        try #require(FileManager.default.fileExists(atPath: Self.fixture), "the fixture is missing")
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let oldPath = directory.path + "/old.sqlite"
        try FileManager.default.copyItem(atPath: Self.fixture, toPath: oldPath)
        let old = try await SQLiteStorage.open(path: oldPath, readers: 1, logger: Logger(label: "test"))
        let fresh = try await SQLiteStorage.open(path: directory.path + "/new.sqlite", readers: 1, logger: Logger(label: "test"))
        let hasher = PasswordHasher(cost: 4)
        do {
            #expect(try await old.read { db in try await Migrations.version(db) } == 1)
            let (upgraded, wasNew) = try await RecordStore.open(storage: old, logger: Logger(label: "test"), hashPassword: hasher.hash)
            #expect(!wasNew)
            #expect(try await old.read { db in try await Migrations.version(db) } == SchemaStore.schemaVersion)
            #expect(try await old.read { db in try await Migrations.applied(db) } == Set(SchemaStore.steps.filter(\.once).map(\.name)))
            let (_, freshIsNew) = try await RecordStore.open(storage: fresh, logger: Logger(label: "test"), hashPassword: hasher.hash)
            #expect(freshIsNew)
            let upgradedLayout = try await Self.layout(old)
            let freshLayout = try await Self.layout(fresh)
            let missing = Set(freshLayout).subtracting(upgradedLayout).sorted()
            let extra = Set(upgradedLayout).subtracting(freshLayout).sorted()
            #expect(missing.isEmpty, "a new database has what the upgraded one lacks: \(missing.prefix(20))")
            #expect(extra.isEmpty, "the upgraded database has what a new one lacks: \(extra.prefix(20))")
            // The old records are served, and the old users sign in with their passwords.
            let incident = try await upgraded.list(
                RecordQuery(table: "incident", query: try EncodedQuery("number=INC0010001"), limit: 1), caller: Callers.admin
            )
            #expect(incident.records.count == 1)
            #expect(try await UserDirectory(store: upgraded).activeUserCount() > 3)
            _ = try await upgraded.insert(into: "incident", values: ["short_description": "after the upgrade"], caller: Callers.admin)
        } catch {
            try? await old.close()
            try? await fresh.close()
            await hasher.shutdown()
            throw error
        }
        try await old.close()
        try await fresh.close()
        await hasher.shutdown()
    }
}
