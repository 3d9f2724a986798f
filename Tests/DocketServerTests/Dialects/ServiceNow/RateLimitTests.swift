import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Rate limits from sys_rate_limit_rules")
struct RateLimitTests {
    @Test("a role rule limits its users per hour with 429, Retry-After and X-RateLimit-* headers")
    func roleRule() async throws {
        try await TestApp.withRouter { client throws in
            let rule = try await client.send(
                .post, "/api/now/table/sys_rate_limit_rules",
                json: #"{"name":"itil table","resource":"table","type":"role","role":"itil","rate_limit":"2"}"#,
                headers: .admin
            )
            #expect(rule.status == .created)
            let ruleID = try rule.result.string("sys_id")
            for _ in 0..<2 {
                let allowed = try await client.get("/api/now/table/incident?sysparm_limit=1")
                #expect(allowed.status == .ok)
                #expect(allowed.headers[.xRateLimitLimit] == "2")
                #expect(allowed.headers[.xRateLimitRule] == ruleID)
                let reset = Int(allowed.headers[.xRateLimitReset] ?? "") ?? 0
                #expect(reset > Int(Date().timeIntervalSince1970))
            }
            let denied = try await client.get("/api/now/table/incident?sysparm_limit=1")
            #expect(denied.status == .tooManyRequests)
            #expect(Int(denied.headers[.retryAfter] ?? "") ?? 0 > 0)
            #expect(denied.errorMessage == "Rate limit exceeded")
            #expect(try denied.json["error"]?.string("detail") == "Rate limit of 2 requests per hour for Table API exceeded")
            // Other APIs, other roles and other users are not limited by it.
            #expect(try await client.get("/api/now/stats/incident?sysparm_count=true").status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .admin).status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .beth).status == .ok)
        }
    }

    @Test("a single-user rule beats a role rule; an all-users rule applies to everyone else")
    func precedence() async throws {
        try await TestApp.withRouter { client throws in
            for json in [
                #"{"name":"all","type":"all_users","rate_limit":"1"}"#,
                #"{"name":"john","type":"user","user":"\#(DemoData.userID("john.doe"))","rate_limit":"3"}"#,
            ] {
                #expect(try await client.send(.post, "/api/now/table/sys_rate_limit_rules", json: json, headers: .admin).status == .created)
            }
            let statuses = try await (0..<4).asyncMap { _ in try await client.get("/api/now/table/incident?sysparm_limit=1").status }
            #expect(statuses == [.ok, .ok, .ok, .tooManyRequests])
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .beth).status == .ok)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .beth).status == .tooManyRequests)
        }
    }

    @Test("a batch counts once, whatever it holds")
    func batchCountsOnce() async throws {
        try await TestApp.withRouter { client throws in
            let rule = #"{"name":"john","type":"user","user":"\#(DemoData.userID("john.doe"))","rate_limit":"1"}"#
            #expect(try await client.send(.post, "/api/now/table/sys_rate_limit_rules", json: rule, headers: .admin).status == .created)
            let get = #"{"id":"x","method":"GET","url":"/api/now/table/incident?sysparm_limit=1"}"#
            let batch = try await client.send(
                .post, "/api/now/v1/batch", json: #"{"batch_request_id":"1","rest_requests":[\#(get),\#(get.replacingOccurrences(of: "\"x\"", with: "\"y\""))]}"#
            )
            #expect(batch.status == .ok)
            #expect(try batch.json["serviced_requests"]?.arrayValue?.map { $0["status_code"] } == [.number(200), .number(200)])
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").status == .tooManyRequests)
        }
    }

    @Test("the API a path belongs to")
    func resources() {
        #expect(RateLimiter.resource(of: "/api/now/table/incident") == "table")
        #expect(RateLimiter.resource(of: "/api/now/v2/table/incident") == "table")
        #expect(RateLimiter.resource(of: "/api/now/v1/attachment/x/file") == "attachment")
        #expect(RateLimiter.resource(of: "/api/now/stats/incident") == "stats")
        #expect(RateLimiter.resource(of: "/api/now/v1/batch") == "batch")
        #expect(RateLimiter.resource(of: "/api/x_snc_my_work/v1/tracker/task") == "my_work")
    }
}

extension Sequence {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
