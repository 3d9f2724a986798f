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
