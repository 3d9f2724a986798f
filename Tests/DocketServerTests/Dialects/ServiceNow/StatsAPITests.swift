import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Aggregate API")
struct StatsAPITests {
    @Test("count alone, and with a query, agrees with the Table API's X-Total-Count")
    func count() async throws {
        try await TestApp.withRouter { client throws in
            let all = try await client.get("/api/now/stats/incident?sysparm_count=true", .admin).json
            #expect(all == .object(["result": .object(["stats": .object(["count": .string("22")])])]))
            let active = try await client.get("/api/now/v1/stats/incident?sysparm_count=true&sysparm_query=active=true^priority<=2", .admin)
            let total = try await client.get("/api/now/table/incident?sysparm_query=active=true^priority<=2&sysparm_limit=1", .admin)
            #expect(try active.result["stats"]?.string("count") == total.headers[.xTotalCount])
            // Name-value filters work as on the Table API.
            let filtered = try await client.get("/api/now/stats/incident?sysparm_count=true&priority=1", .admin)
            #expect(try filtered.result["stats"]?.string("count") == "1")
        }
    }

    @Test("grouped counts with aggregates, display values, HAVING and ORDER BY")
    func grouped() async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get(
                "/api/now/stats/incident?sysparm_count=true&sysparm_group_by=priority&sysparm_avg_fields=priority"
                    + "&sysparm_min_fields=number&sysparm_max_fields=priority,urgency&sysparm_sum_fields=reopen_count"
                    + "&sysparm_display_value=true&sysparm_order_by=COUNT^DESC",
                .admin
            )
            #expect(response.status == .ok)
            let groups = try response.results
            #expect(groups.count == 5)
            let counts = groups.compactMap { Int($0["stats"]?.string("count") ?? "") }
            #expect(counts.reduce(0, +) == 22)
            #expect(counts == counts.sorted(by: >))
            let critical = try #require(groups.first { $0["groupby_fields"]?.arrayValue?.first?.string("value") == "1" })
            #expect(critical["groupby_fields"]?.arrayValue?.first?.string("display_value") == "1 - Critical")
            #expect(critical["groupby_fields"]?.arrayValue?.first?.string("field") == "priority")
            #expect(critical["stats"]?["avg"]?.string("priority") == "1.0000")
            #expect(critical["stats"]?["max"]?.string("priority") == "1")
            #expect(critical["stats"]?["sum"]?.string("reopen_count") == "0")
            #expect(critical["stats"]?["min"]?.string("number").hasPrefix("INC") == true)

            let having = try await client.get(
                "/api/now/stats/incident?sysparm_count=true&sysparm_group_by=priority&sysparm_having=count^priority^>^4",
                .admin
            ).results
            #expect(!having.isEmpty)
            #expect(having.allSatisfy { Int($0["stats"]?.string("count") ?? "") ?? 0 > 4 })

            let references = try await client.get(
                "/api/now/stats/incident?sysparm_count=true&sysparm_group_by=assigned_to&sysparm_display_value=all", .admin
            ).results
            let names = references.compactMap { $0["groupby_fields"]?.arrayValue?.first?.string("display_value") }
            #expect(names.contains("John Doe"))
        }
    }

    @Test("access rules apply: counts cover only readable records; tables without read access are 403")
    func access() async throws {
        try await TestApp.withRouter { client throws in
            let abel = try await client.get("/api/now/stats/incident?sysparm_count=true", .abel)
            let visible = try await client.get("/api/now/table/incident?sysparm_limit=1", .abel)
            #expect(try abel.result["stats"]?.string("count") == visible.headers[.xTotalCount])
            #expect(try abel.result["stats"]?.string("count") != "22")
            let denied = try await client.get("/api/now/stats/oauth_entity?sysparm_count=true", .abel)
            #expect(denied.status == .forbidden)
            #expect(denied.errorMessage == "Insufficient rights to query records")
        }
    }

    @Test("more groups than a page holds is a 400 that says so; as many as a page holds are answered")
    func tooManyGroups() async throws {
        try await TestApp.withRouter(configure: { $0.maxPageSize = 5 }) { client throws in
            let refused = try await client.get("/api/now/stats/incident?sysparm_count=true&sysparm_group_by=sys_id", .admin)
            #expect(refused.status == .badRequest)
            #expect(refused.errorMessage == "Too many groups")
            let answered = try await client.get("/api/now/stats/incident?sysparm_count=true&sysparm_group_by=priority", .admin)
            #expect(answered.status == .ok)
            #expect(try answered.results.count == 5)
        }
    }

    @Test(
        "bad parameters are 400s",
        arguments: [
            "incident?sysparm_group_by=nope", "incident?sysparm_avg_fields=short_description",
            "incident?sysparm_sum_fields=nope", "incident?sysparm_having=count^priority^>", "incident?sysparm_having=x^y^>^1",
            "incident?sysparm_having=count^priority^LIKE^1", "incident?sysparm_query=stateFOO1", "nope?sysparm_count=true",
        ]
    )
    func badParameters(path: String) async throws {
        try await TestApp.withRouter { client throws in
            let response = try await client.get("/api/now/stats/\(path)", .admin)
            #expect(response.status == .badRequest)
            #expect(try response.json.string("status") == "failure")
        }
    }
}
