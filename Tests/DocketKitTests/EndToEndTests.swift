import DocketKit
import DocketModel
import DocketTestSupport
import Foundation
import Testing

/// The SDK against a live docketd over real HTTP.
@Suite("DocketKit against docketd")
struct EndToEndTests {
    func client(_ base: String, user: String = "john.doe", password: String = "password") throws -> DocketClient {
        try DocketClient(instance: base, credentials: .basic(userName: user, password: password))
    }

    @Test("log in, list my tasks grouped by type, comment and read the comment back")
    func myWorkFlow() async throws {
        try await withLiveServer { base throws in
            let client = try client(base)
            let groups = try await client.myWork.myTasks()
            #expect(groups.map(\.label) == ["Incident", "Defect", "Problem", "Change Request"])
            let first = try #require(groups.first?.tasks.first)
            #expect(first.number == "INC0010001")
            #expect(first.table == "incident")
            #expect(await client.session.hasSessionCookies)
            let detail = try await client.myWork.task(first.sysID)
            #expect(detail.displayValue("state") == "In Progress")
            try await client.myWork.addComment("Rebooted the access point", to: first.sysID)
            let comments = try await client.myWork.comments(for: first.sysID)
            #expect(comments.first?.value == "Rebooted the access point")
            #expect(comments.first?.element == "work_notes")
            #expect(comments.first?.createdBy == "john.doe")
            let dates = comments.map(\.createdOn)
            #expect(dates == dates.sorted(by: >))
        }
    }

    @Test("OAuth: the SDK's password grant against docketd's /oauth_token.do, then bearer requests")
    func oauth() async throws {
        try await withLiveServer { base throws in
            let client = try DocketClient(
                instance: base,
                credentials: .oauth(
                    clientID: "docket-demo", clientSecret: "docket-demo-secret", userName: "john.doe", password: "password"
                )
            )
            let record = try await client.table.record(Demo.incident1, in: "incident", fields: ["number"])
            #expect(record["number"] == "INC0010001")
            let wrong = try DocketClient(
                instance: base,
                credentials: .oauth(clientID: "docket-demo", clientSecret: "wrong", userName: "john.doe", password: "password")
            )
            await #expect(throws: DocketError.self) { try await wrong.table.record(Demo.incident1, in: "incident") }
        }
    }

    @Test("the paginator follows Link headers across pages without gaps or repeats")
    func paginator() async throws {
        try await withLiveServer { base throws in
            let client = try client(base)
            var numbers: [String] = []
            var pages = 0
            for try await page in client.table.paginator(in: "incident", fields: ["number"], pageSize: 5) {
                pages += 1
                #expect(page.totalCount == 22)
                numbers += page.records.compactMap { $0["number"] }
            }
            #expect(pages == 5)
            #expect(numbers.count == 22)
            #expect(Set(numbers).count == 22)
            #expect(numbers.first == "INC0010001")
        }
    }

    @Test("concurrent paging returns the same records in the same order as following Link headers")
    func concurrentPaginator() async throws {
        try await withLiveServer { base throws in
            let client = try client(base)
            var sequential: [String] = []
            for try await page in client.table.paginator(in: "incident", fields: ["number"], pageSize: 4) {
                sequential += page.records.compactMap { $0["number"] }
            }
            for concurrency in [2, 3, 8] {
                var concurrent: [String] = []
                var pages = 0
                for try await page in client.table.paginator(
                    in: "incident", fields: ["number"], pageSize: 4, concurrency: concurrency
                ) {
                    concurrent += page.records.compactMap { $0["number"] }
                    pages += 1
                }
                #expect(concurrent == sequential)
                #expect(pages == 6)
            }
            #expect(sequential.count == 22)
        }
    }

    struct Incident: Codable, Equatable {
        var sys_id: String?
        var number: String?
        var short_description: String
        var urgency: String?
    }

    @Test("Decodable and Encodable records round-trip; create, update and delete")
    func codable() async throws {
        try await withLiveServer { base throws in
            let client = try client(base)
            let created = try await client.table.createRecord(
                Incident(short_description: "Typed create", urgency: "1"), in: "incident", as: Incident.self
            )
            let id = try #require(created.sys_id)
            #expect(created.number == "INC0010023")
            let updated = try await client.table.updateRecord(
                id, in: "incident", with: ["short_description": "Typed update"], as: Incident.self
            )
            #expect(updated.short_description == "Typed update")
            let read = try await client.table.record(Incident.self, id, in: "incident")
            #expect(read == updated)
            let list = try await client.table.records(
                Incident.self, in: "incident", query: .where("number", .equals, "INC0010023"),
                fields: ["sys_id", "number", "short_description", "urgency"]
            )
            #expect(list == [read])
            try await client.table.deleteRecord(id, in: "incident")
            await #expect { try await client.table.record(id, in: "incident") } throws: { error in
                (error as? DocketError)?.status == 404
            }
        }
    }

    @Test("the typed query builder filters like a hand-written encoded query")
    func queryBuilder() async throws {
        try await withLiveServer { base throws in
            let client = try client(base)
            let query = EncodedQuery.where("active", .equals, "true").and("priority", .lessOrEqual, "2")
                .orderBy("number", descending: true)
            let page = try await client.table.records(in: "incident", query: query, fields: ["number", "priority"])
            #expect(!page.records.isEmpty)
            #expect(page.records.allSatisfy { Int($0["priority"] ?? "9")! <= 2 })
            #expect(page.records.map { $0["number"]! } == page.records.map { $0["number"]! }.sorted(by: >))
        }
    }

    @Test("wrong passwords and missing records are errors a person can read")
    func errors() async throws {
        try await withLiveServer { base throws in
            let wrong = try client(base, password: "nope")
            await #expect { _ = try await wrong.myWork.myTasks() } throws: { error in
                let error = error as? DocketError
                return error?.status == 401 && error?.description.contains("wrong user name or password") == true
            }
            let client = try client(base)
            await #expect { _ = try await client.table.record("0123456789abcdef0123456789abcdef", in: "incident") } throws: {
                ($0 as? DocketError)?.status == 404 && ($0 as? DocketError)?.message == "No Record found"
            }
            let unreachable = try DocketClient(instance: "http://127.0.0.1:1", credentials: .basic(userName: "a", password: "b"))
            await #expect { _ = try await unreachable.myWork.myTasks() } throws: {
                ($0 as? DocketError)?.kind == .transport && "\($0)".hasPrefix("cannot reach 127.0.0.1:1")
            }
        }
    }
}
