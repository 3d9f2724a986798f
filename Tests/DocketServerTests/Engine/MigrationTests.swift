import DocketModel
import Foundation
import Logging
import Testing

@testable import DocketServer

/// Schema migrations are named, applied once in order and recorded; a database written by a newer docketd is
/// refused before anything changes.
@Suite("Schema migrations")
struct MigrationTests {
    /// Runs `test` with a storage in a fresh folder (closed afterwards).
    static func withStorage(_ test: @Sendable (any Storage, String) async throws -> Void) async throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        let path = directory.path + "/m.sqlite"
        let storage = try await TestDatabase.open(sqlitePath: path, readers: 1)
        do {
            try await test(storage, path)
            try await storage.close()
        } catch {
            try? await storage.close()
            throw error
        }
    }

    static func state(_ storage: any Storage) async throws -> (version: Int, applied: Set<String>) {
        try await storage.write { db in (try await Migrations.version(db), try await Migrations.applied(db)) }
    }

    static var named: Set<String> { Set(SchemaStore.steps.filter(\.once).map(\.name)) }

    @Test("a new database records every migration and the current version")
    func newDatabase() async throws {
        try await Self.withStorage { storage, _ in
            #expect(try await SchemaStore.prepare(storage))
            let (version, applied) = try await Self.state(storage)
            #expect(version == SchemaStore.schemaVersion)
            #expect(applied == Self.named)
            // Opening it again changes nothing and runs no migration twice.
            #expect(try await !SchemaStore.prepare(storage))
            #expect(try await Self.state(storage).applied == Self.named)
        }
    }

    @Test("a database from before migrations were recorded is brought up to date, its data kept")
    func olderDatabase() async throws {
        try await Self.withStorage { storage, _ in
            _ = try await SchemaStore.prepare(storage)
            try await storage.write { db in
                try await db.run("DROP TABLE docket_migration")
                try await db.run("UPDATE docket_meta SET value = '1' WHERE key = 'schema_version'")
                try await db.run("DROP INDEX IF EXISTS ix_sys_attachment_creator")
            }
            #expect(try await !SchemaStore.prepare(storage))
            let (version, applied) = try await Self.state(storage)
            #expect(version == SchemaStore.schemaVersion)
            #expect(applied == Self.named)
            let index = try await storage.read { db in
                try await db.rows(db.dialect.indexExists("ix_sys_attachment_creator"))
            }
            #expect(index.count == 1)
            let tables = try await storage.read { db in try await db.integer("SELECT COUNT(*) FROM sys_db_object") }
            #expect(tables > 10)
        }
    }

    @Test("a department head stored as head (an older docketd) becomes dept_head, its value kept")
    func departmentHead() async throws {
        try await Self.withStorage { storage, _ in
            _ = try await SchemaStore.prepare(storage)
            try await storage.write { db in
                try await db.run("ALTER TABLE cmn_department RENAME COLUMN dept_head TO head")
                try await db.run(
                    "UPDATE sys_dictionary SET element = 'head', sys_id = " + .bind(SysID.stable("sys_dictionary:cmn_department.head"))
                        + " WHERE name = 'cmn_department' AND element = 'dept_head'"
                )
                try await db.run("DELETE FROM docket_migration WHERE name = '2026-11-25-department-head'")
                try await db.run(
                    "INSERT INTO cmn_department (sys_id, name, head, sys_created_on, sys_created_by, sys_updated_on, sys_updated_by, sys_mod_count)"
                        + " VALUES ('d1', 'Finance', 'u1', '', '', '', '', 0)"
                )
            }
            #expect(try await !SchemaStore.prepare(storage))
            let (head, elements) = try await storage.read { db in
                (
                    try await db.rows("SELECT dept_head FROM cmn_department WHERE sys_id = 'd1'").first?
                        .value(at: "dept_head", kind: .text).text,
                    try await db.rows("SELECT element FROM sys_dictionary WHERE name = 'cmn_department'")
                        .compactMap { try $0.value(at: "element", kind: .text).text }
                )
            }
            #expect(head == "u1")
            #expect(elements.contains("dept_head"))
            #expect(!elements.contains("head"))
            #expect(try await Self.state(storage).applied == Self.named)
        }
    }

    @Test("a database a newer docketd wrote is refused, and left as it was", arguments: ["version", "migration"])
    func newerDatabase(_ kind: String) async throws {
        try await Self.withStorage { storage, _ in
            _ = try await SchemaStore.prepare(storage)
            try await storage.write { db in
                if kind == "version" {
                    try await db.run("UPDATE docket_meta SET value = '99' WHERE key = 'schema_version'")
                } else {
                    try await db.run("INSERT INTO docket_migration (name, applied_on) VALUES ('2099-01-01-from-the-future', '')")
                }
            }
            let before = try await Self.state(storage)
            do {
                _ = try await SchemaStore.prepare(storage)
                Issue.record("a newer database should be refused")
            } catch let refusal as Migrations.Refusal {
                #expect(refusal.description.contains("newer docketd"))
                #expect(refusal.description.contains(kind == "version" ? "schema version 99" : "2099-01-01-from-the-future"))
            }
            let after = try await Self.state(storage)
            #expect(after.version == before.version)
            #expect(after.applied == before.applied)
        }
    }

    @Test("migration names are unique")
    func uniqueNames() {
        let names = SchemaStore.steps.map(\.name)
        #expect(Set(names).count == names.count)
    }
}
