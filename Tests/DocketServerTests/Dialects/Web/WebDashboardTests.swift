import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The dashboard through the router: its counts against the Stats API, the lists its bars and columns open,
/// access, bad input, and loads while others write.
@Suite("Web UI dashboard")
struct WebDashboardTests {
    static func bars(_ page: String, after heading: String) -> [(href: String, label: String, count: Int)] {
        guard let start = page.range(of: heading) else { return [] }
        let rest = page[start.upperBound...]
        let end = rest.range(of: "</ul>")?.lowerBound ?? rest.endIndex
        return rest[..<end].matches(of: /<li><a href="([^"]+)"><span class="bar-label">([^<]*)<\/span>.*?<span class="bar-count">(\d+)<\/span>/)
            .map { (String($0.1).replacingOccurrences(of: "&amp;", with: "&"), String($0.2), Int($0.3) ?? -1) }
    }

    @Test("open incidents by state, priority and group as the Stats API counts them; each bar and day opens the list it counts")
    func counts() async throws {
        try await TestApp.withRouter { client in
            var browser = WebBrowser(client)
            try await browser.signIn()
            let made = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"Today","priority":"1"}"#, headers: .beth)
            #expect(made.status == .created)
            let page = try await browser.get("/app/dashboard")
            #expect(page.status == .ok)
            let text = page.text
            let stats = try await client.get("/api/now/stats/incident?sysparm_count=true&sysparm_group_by=state&sysparm_query=active=true", .john)
            var expected: [String: Int] = [:]
            for group in try stats.results {
                let value = group["groupby_fields"]?.arrayValue?.first?["value"]?.stringValue ?? ""
                expected[value] = Int(group["stats"]?["count"]?.stringValue ?? "") ?? -1
            }
            let states = Self.bars(text, after: #"<h2 id="by-state">"#)
            #expect(!states.isEmpty)
            #expect(states.reduce(0) { $0 + $1.count } == expected.values.reduce(0, +))
            let labels = ["1": "New", "2": "In Progress", "3": "On Hold", "6": "Resolved"]
            for bar in states {
                let value = try #require(labels.first { $0.value == bar.label }?.key)
                #expect(bar.count == expected[value], "\(bar.label)")
                #expect(bar.href == "/app/list/incident?q=active%3Dtrue%5Estate%3D\(value)")
                let listed = try await browser.get(bar.href).text
                #expect(listed.contains(#"<p class="summary">\#(bar.count) record"#), "\(bar.label)")
            }
            let priorities = Self.bars(text, after: #"<h2 id="by-priority">"#)
            #expect(priorities.first?.label == "1 - Critical")
            let groups = Self.bars(text, after: #"<h2 id="by-group">"#)
            #expect(groups.contains { $0.label == "Service Desk" })
            // Thirty days; today's opened column counts what was created today.
            #expect(text.matches(of: /<tr><th scope="row">/).count == 30)
            let today = try #require(text.matches(of: /aria-label="([A-Z][a-z]{2} \d+): (\d+) opened"/).last)
            let openedLinks = text.matches(of: /<tr><th scope="row">[^<]+<\/th><td><a href="([^"]+)">(\d+)<\/a><\/td>/)
            let last = try #require(openedLinks.last)
            #expect(String(last.2) == String(today.2))
            let todays = try await browser.get(String(last.1).replacingOccurrences(of: "&amp;", with: "&")).text
            #expect(todays.contains(#"<p class="summary">\#(today.2) record"#))
            #expect(todays.contains("Today"))
        }
    }

    @Test("access and bad input: only types of work the caller may read, others not found; signed out goes to sign-in; no 5xx")
    func access() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            for table in ["sys_user", "oauth_entity", "nothing", "%00", String(repeating: "x", count: 5000)] {
                let response = try await john.get("/app/dashboard?table=" + table)
                #expect(response.status == .notFound, "\(table.prefix(20))")
            }
            #expect(try await john.get("/app/dashboard?table=defect").text.contains("open Defect items"))
            #expect(try await john.get("/app/dashboard?table=incident&table=problem").status == .ok)
            var nobody = WebBrowser(client)
            let signedOut = try await nobody.get("/app/dashboard")
            #expect(signedOut.status == .seeOther && signedOut.location.hasPrefix("/?next="))
        }
    }

    @Test("dashboards load while others write: every load answers, and the counts add up after")
    func concurrent() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<8 {
                    let browser = john
                    group.addTask {
                        var copy = browser
                        return Int(try await copy.get("/app/dashboard").status.code)
                    }
                    group.addTask {
                        Int(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"Load \#(index)"}"#, headers: .beth).status.code)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 8 && statuses.filter { $0 == 201 }.count == 8, "\(statuses)")
            let page = try await john.get("/app/dashboard").text
            let open = try #require(page.firstMatch(of: /(\d+) open Incident items/)).1
            #expect(Self.bars(page, after: #"<h2 id="by-state">"#).reduce(0) { $0 + $1.count } == Int(open))
        }
    }
}
