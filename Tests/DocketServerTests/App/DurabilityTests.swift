import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing
import NIOCore
import NIOPosix

@testable import DocketServer

@Suite("Durability and the live server")
struct DurabilityTests {
    @Test("a record written before a restart is read back after it, and demo data is not seeded twice")
    func restart() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        let id = try await buildApplication(configuration).test(.router) { client throws in
            let response = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"Survives restarts"}"#)
            #expect(response.status == .created)
            return try response.result.string("sys_id")
        }
        try await buildApplication(configuration).test(.router) { client throws in
            let record = try await client.get("/api/now/table/incident/\(id)").result
            #expect(record.string("short_description") == "Survives restarts")
            #expect(record.string("number") == "INC0010023")
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.xTotalCount] == "23")
        }
    }

    /// As a database from before migrations were recorded: schema version 1, no record of any migration.
    static func forgetMigrations(_ db: SQLExecutor) async throws {
        try await db.run("DROP TABLE docket_migration")
        try await db.run("UPDATE docket_meta SET value = '1' WHERE key = 'schema_version'")
    }

    @Test("an older database's password, department and location fields are upgraded on start")
    func upgradeUserFields() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { _ in }
        // Make sys_user look as an older docketd left it: the hash in `password`, departments and locations as text.
        let storage = try await TestDatabase.open(configuration)
        try await storage.write { db in
            try await Self.forgetMigrations(db)
            try await db.run("ALTER TABLE sys_user ADD COLUMN password TEXT")
            try await db.run("UPDATE sys_user SET password = user_password, user_password = NULL")
            try await db.run(
                "UPDATE sys_dictionary SET element = 'password', sys_id = " + .bind(SysID.stable("sys_dictionary:sys_user.password"))
                    + " WHERE name = 'sys_user' AND element = 'user_password'"
            )
            for (field, table) in [("department", "cmn_department"), ("location", "cmn_location")] {
                try await db.run(SQLFragment("UPDATE sys_user SET \(field) = (SELECT name FROM \(table) WHERE sys_id = sys_user.\(field))"))
                try await db.run(
                    SQLFragment("UPDATE sys_dictionary SET internal_type = 'string', reference = NULL WHERE name = 'sys_user' AND element = '\(field)'")
                )
            }
            try await db.run("UPDATE sys_user SET department = 'Legal' WHERE user_name = 'abel.tuter'")
        }
        try await storage.close()
        try await buildApplication(configuration).test(.router) { client throws in
            // Passwords still work, under their new name; the old column no longer holds the hash.
            let abel = try await client.get(
                "/api/now/table/sys_user?user_name=abel.tuter&sysparm_display_value=all&sysparm_fields=user_password,department,location",
                .abel
            )
            #expect(abel.status == .ok)
            let record = try abel.results.first ?? .null
            #expect(record["user_password"]?.string("value") == "********")
            // Text became references, to existing records where the name matches and to new ones where not.
            #expect(record["department"]?.string("display_value") == "Legal")
            #expect(record["department"]?.string("value").count == 32)
            #expect(record["location"]?.string("value") == DemoData.id("location", 4))
            let john = try await client.get("/api/now/table/sys_user/\(DemoData.userID("john.doe"))?sysparm_fields=department", .admin).result
            #expect(john["department"]?.string("value") == DemoData.departmentID("IT"))
            let dictionary = try await client.get(
                "/api/now/table/sys_dictionary?sysparm_query=name=sys_user^elementINdepartment,location,password,user_password^ORDERBYelement&sysparm_fields=element,internal_type,reference",
                .admin
            ).results
            #expect(dictionary.map { $0.string("element") } == ["department", "location", "user_password"])
            #expect(dictionary.map { $0.string("internal_type") } == ["reference", "reference", "password2"])
        }
        let check = try await TestDatabase.open(configuration)
        let leftovers = try await check.read { db in try await db.rows("SELECT sys_id FROM sys_user WHERE password IS NOT NULL").count }
        try await check.close()
        #expect(leftovers == 0)
    }

    @Test("a database made before a base table (or the event log's values) existed gets it on the next start")
    func upgrade() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { _ in }
        // Make the database look as an older docketd left it: no sys_attachment and no attachment content.
        let storage = try await TestDatabase.open(configuration)
        try await storage.write { db in
            try await Self.forgetMigrations(db)
            try await db.run("DROP TABLE sys_attachment")
            try await db.run("DROP TABLE docket_attachment_chunk")
            try await db.run("DELETE FROM sys_dictionary WHERE name = 'sys_attachment'")
            try await db.run("DELETE FROM sys_db_object WHERE name = 'sys_attachment'")
            try await db.run("DELETE FROM sys_dictionary WHERE name = 'task' AND element = 'comments_and_work_notes'")
            // An event log without the row values (every write appends to it: the upload below needs them back).
            for column in ["root_table", "values_after", "values_before"] {
                try await db.run("ALTER TABLE docket_event_log DROP COLUMN " + .identifier(column))
            }
        }
        try await storage.close()
        try await buildApplication(configuration).test(.router) { client throws in
            var headers = HTTPFields.john
            headers[.contentType] = "text/plain"
            let upload = try await client.execute(
                uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=a.txt",
                method: .post, headers: headers, body: .init(string: "after upgrade")
            )
            #expect(upload.status == .created)
            let tables = try await client.get("/api/now/table/sys_db_object?name=sys_attachment", .admin)
            #expect(try tables.results.count == 1)
            let field = try await client.get("/api/now/table/sys_dictionary?name=task&element=comments_and_work_notes", .admin)
            #expect(try field.results.count == 1)
            let record = try await client.get("/api/now/table/incident/\(Demo.incident1)?sysparm_display_value=true&sysparm_fields=comments_and_work_notes")
            #expect(try record.result.string("comments_and_work_notes").contains("(Work notes)"))
        }
    }

    @Test("attachment content stored whole by an older docketd is served after the upgrade, and its old table is gone")
    func upgradeAttachmentContent() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        let id = try await buildApplication(configuration).test(.router) { client in
            var headers = HTTPFields.john
            headers[.contentType] = "text/plain"
            let upload = try await client.execute(
                uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=a.txt",
                method: .post, headers: headers, body: .init(string: "stored whole")
            )
            return try upload.result.string("sys_id")
        }
        // As docketd left it before 2026-11-26: one row of content per attachment.
        let storage = try await TestDatabase.open(configuration)
        try await storage.write { db in
            try await db.run("DELETE FROM docket_migration WHERE name = '2026-11-26-attachment-chunks'")
            try await db.run("DROP TABLE docket_attachment_chunk")
            try await db.run(
                "CREATE TABLE docket_attachment_data (sys_id TEXT PRIMARY KEY NOT NULL, data " + SQLFragment(db.dialect.blobType)
                    + " NOT NULL)"
            )
            try await db.run(
                "INSERT INTO docket_attachment_data (sys_id, data) VALUES (" + .bind(id) + ", "
                    + .bind(SQLBlob(ByteBuffer(string: "stored whole"))) + ")"
            )
        }
        try await storage.close()
        try await buildApplication(configuration).test(.router) { client throws in
            let file = try await client.get("/api/now/attachment/\(id)/file")
            #expect(file.status == .ok)
            #expect(String(buffer: file.body) == "stored whole")
        }
        let check = try await TestDatabase.open(configuration)
        let old = try await check.read { db in try await db.rows(db.dialect.tableExists("docket_attachment_data")).count }
        try await check.close()
        #expect(old == 0)
    }

    @Test("the live server reports its real port and serves over TCP")
    func live() async throws {
        let directory = TemporaryDirectory()
        let port = Mutex<Int?>(nil)
        let app = try await buildApplication(TestApp.configuration(dataDirectory: directory.path)) { channel in
            port.withLock { $0 = channel.localAddress?.port }
        }
        try await app.test(.live) { client throws in
            #expect(port.withLock { $0 } ?? 0 > 0)
            let response = try await client.get("/api/now/table/incident?sysparm_limit=2")
            #expect(response.status == .ok)
            #expect(try response.results.count == 2)
        }
    }
}

@Suite("Starting without the demo")
struct FirstAdministratorTests {
    @Test("docketd users create makes an administrator who can log in; duplicates and short passwords are refused")
    func createUser() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path, demo: false)
        try await UserAdministration.createUser(in: configuration, userName: "alice", password: "correct horse", roles: ["admin"])
        await #expect(throws: UserAdministration.Failure.self) {
            try await UserAdministration.createUser(in: configuration, userName: "alice", password: "correct horse", roles: [])
        }
        await #expect(throws: UserAdministration.Failure.self) {
            try await UserAdministration.createUser(in: configuration, userName: "bob", password: "short", roles: [])
        }
        await #expect(throws: UserAdministration.Failure.self) {
            try await UserAdministration.createUser(in: configuration, userName: "bob", password: "long enough", roles: ["nope"])
        }
        try await UserAdministration.createUser(in: configuration, userName: "bob", password: "long enough", roles: ["itil"])
        // docketd users list: who there is, with roles, and who can sign in with a password.
        let accounts = try await UserAdministration.list(in: configuration)
        #expect(accounts.map(\.userName) == ["alice", "bob"], "\(accounts)")
        #expect(accounts.first?.roles.contains("admin") == true)
        #expect(accounts.last?.roles == ["itil"])
        #expect(accounts.allSatisfy { $0.active && !$0.lockedOut && $0.hasPassword })
        try await buildApplication(configuration).test(.router) { client throws in
            let users = try await client.get("/api/now/table/sys_user?sysparm_fields=user_name&sysparm_query=ORDERBYuser_name", .basic("alice", "correct horse"))
            #expect(users.status == .ok)
            #expect(try users.results.map { $0.string("user_name") } == ["alice", "bob"])
            let incident = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"first"}"#, headers: .basic("bob", "long enough"))
            #expect(incident.status == .created)
        }
    }

    @Test("docketd users seed makes many accounts with one hash that sign in with the password and have the roles; bad counts, prefixes, costs and a taken prefix are refused")
    func seedUsers() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path, demo: false)
        try await UserAdministration.createUser(in: configuration, userName: "alice", password: "correct horse", roles: ["admin"])
        let names = try await UserAdministration.seedUsers(
            in: configuration, prefix: "load.", count: 120, password: "seeded password", roles: ["itil"], cost: 4
        )
        #expect(names.count == 120 && names.first == "load.001" && names.last == "load.120")
        for (count, prefix, password, cost) in [
            (0, "x.", "seeded password", UInt8(4)), (UserAdministration.seedLimit + 1, "x.", "seeded password", 4),
            (3, "", "seeded password", 4), (3, "has space", "seeded password", 4), (3, String(repeating: "p", count: 40), "seeded password", 4),
            (3, "x.", "short", 4), (3, "x.", "seeded password", 3), (3, "x.", "seeded password", 32), (3, "load.", "seeded password", 4),
        ] {
            await #expect(throws: UserAdministration.Failure.self, "\(count) \(prefix) \(cost)") {
                try await UserAdministration.seedUsers(in: configuration, prefix: prefix, count: count, password: password, roles: [], cost: cost)
            }
        }
        await #expect(throws: UserAdministration.Failure.self) {
            try await UserAdministration.seedUsers(in: configuration, prefix: "y.", count: 2, password: "seeded password", roles: ["nope"], cost: 4)
        }
        try await buildApplication(configuration).test(.router) { client throws in
            let users = try await client.get(
                "/api/now/table/sys_user?sysparm_fields=user_name,user_password&sysparm_query=user_nameSTARTSWITHload.&sysparm_limit=500",
                .basic("alice", "correct horse")
            )
            #expect(try users.results.count == 120)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .basic("load.007", "seeded password")).status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .basic("load.120", "wrong password")).status == .unauthorized)
            let roles = try await client.get(
                "/api/now/table/sys_user_has_role?sysparm_query=user.user_name=load.042&sysparm_fields=role.name&sysparm_display_value=true",
                .basic("alice", "correct horse")
            )
            #expect(try roles.results.map { $0.string("role.name") } == ["itil"])
        }
    }

    @Test("DOCKET_ADMIN_USER creates the first administrator only while nobody can log in")
    func initialAdmin() async throws {
        let directory = TemporaryDirectory()
        var configuration = TestApp.configuration(dataDirectory: directory.path, demo: false)
        configuration.initialAdmin = ("root", "first-password")
        try await buildApplication(configuration).test(.router) { client throws in
            #expect(try await client.get("/api/now/table/sys_user", .basic("root", "first-password")).status == .ok)
        }
        configuration.initialAdmin = ("other", "second-password")
        try await buildApplication(configuration).test(.router) { client throws in
            #expect(try await client.get("/api/now/table/sys_user", .basic("other", "second-password")).status == .unauthorized)
        }
    }

    @Test("an unusable data folder or a port in use is a sentence naming it, and nothing is written")
    func startupErrors() async throws {
        let directory = TemporaryDirectory()
        let file = directory.path + "/plain-file"
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect(throws: StartupFailure.self) { try DataFolder.prepare(file) }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress?.port ?? 0
        do {
            try await ListenAddress.check(host: "127.0.0.1", port: port)
            Issue.record("a bound port was reported free")
        } catch let failure as StartupFailure {
            #expect(failure.description.contains("Port \(port)"))
            #expect(failure.description.contains("--port 0"))
        }
        try await channel.close()
    }
}
