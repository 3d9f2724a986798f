import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

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

    @Test("a database made before a base table existed gets that table on the next start")
    func upgrade() async throws {
        let directory = TemporaryDirectory()
        let configuration = TestApp.configuration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { _ in }
        // Make the database look as an older docketd left it: no sys_attachment and no attachment content.
        let storage = try await SQLiteStorage.open(path: configuration.databasePath, readers: 1, logger: .init(label: "test"))
        try await storage.write { db in
            try await db.run("DROP TABLE sys_attachment")
            try await db.run("DROP TABLE docket_attachment_data")
            try await db.run("DELETE FROM sys_dictionary WHERE name = 'sys_attachment'")
            try await db.run("DELETE FROM sys_db_object WHERE name = 'sys_attachment'")
            try await db.run("DELETE FROM sys_dictionary WHERE name = 'task' AND element = 'comments_and_work_notes'")
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
