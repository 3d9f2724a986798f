import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Synchronization
import Testing

@testable import DocketServer

/// Rendered list pages served again: only to the same caller, for the same request, while nothing the page can
/// show has changed, and never for a query that moves with the clock.
@Suite("Table API: kept list pages")
struct ListPagesTests {
    static let page = "/api/now/table/incident?sysparm_limit=20&sysparm_display_value=all&sysparm_query=ORDERBYnumber"

    /// Plans a failure of the next page read (a `SELECT … LIMIT`): a request answered from a kept page leaves it
    /// planned; one that reads meets it (503). The read is told by its compiled query (its columns quoted, the first
    /// named `_id`), so that a background reader's statement (the notifier's, with a LIMIT of its own) does not take
    /// the fault.
    static func failNextPageRead(_ faulty: FaultyStorage) {
        faulty.failNext { $0.hasPrefix("SELECT \"") && $0.contains(" AS \"_id\"") && $0.contains(" LIMIT ") }
    }

    @Test("the same page again is the kept rendering, byte for byte, without reading it; another page or caller is read")
    func servedAgain() async throws {
        try await OutageTests.withFaultyRouter { client, faulty throws in
            let first = try await client.get(Self.page)
            #expect(first.status == .ok)
            #expect(try first.results.count == 20)
            Self.failNextPageRead(faulty)
            let again = try await client.get(Self.page)
            #expect(again.status == .ok)
            #expect(again.text == first.text)
            #expect(again.headers[.link] == first.headers[.link])
            #expect(again.headers[.xTotalCount] == first.headers[.xTotalCount])
            #expect(again.headers[.contentType] == first.headers[.contentType])
            // The planned failure is still there: another page reads, and meets it.
            #expect(try await client.get(Self.page + "&sysparm_offset=1").status == .serviceUnavailable)
            // Another caller, and the same page on /v2, are read.
            for (path, user) in [(Self.page, HTTPFields.beth), (Self.page.replacingOccurrences(of: "/api/now/table/", with: "/api/now/v2/table/"), .john)] {
                #expect(try await client.get(path, user).status == .ok)
                Self.failNextPageRead(faulty)
                #expect(try await client.get(path, user).status == .ok, "kept: \(path)")
                #expect(try await client.get(Self.page + "&sysparm_offset=2").status == .serviceUnavailable)
            }
            // A database that does not answer: 503, kept page or not (the log's head cannot be read).
            faulty.setDown(true)
            #expect(try await client.get(Self.page).status == .serviceUnavailable)
            faulty.setDown(false)
            #expect(try await client.get(Self.page).text == first.text)
        }
    }

    @Test("a change to a record on the page, or to one it shows by reference, is in the next read of it")
    func changesShow() async throws {
        try await TestApp.withRouter { client throws in
            let first = try await client.get(Self.page)
            let record = try #require(try first.results.first)
            let id = try #require(record["sys_id"]?["value"]?.stringValue)
            let callerID = try #require(record["caller_id"]?["value"]?.stringValue)
            #expect(try await client.get(Self.page).text == first.text)

            let changed = "Changed-\(UUID().uuidString)"
            #expect(try await client.send(.patch, "/api/now/table/incident/\(id)", json: #"{"short_description":"\#(changed)"}"#, headers: .admin).status == .ok)
            let afterRecord = try await client.get(Self.page)
            #expect(afterRecord.text.contains(changed))

            // The caller's name is the display value of caller_id: renaming the user shows on the incident page.
            let renamed = "Renamed-\(UUID().uuidString.prefix(8))"
            #expect(try await client.send(.patch, "/api/now/table/sys_user/\(callerID)", json: #"{"last_name":"\#(renamed)"}"#, headers: .admin).status == .ok)
            let afterUser = try await client.get(Self.page)
            #expect(afterUser.text.contains(renamed))

            // A new incident that sorts first changes the total and the page.
            let total = Int(afterUser.headers[.xTotalCount] ?? "") ?? -1
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"new","number":"INC0000000"}"#, headers: .admin).status == .created)
            let afterInsert = try await client.get(Self.page)
            #expect(Int(afterInsert.headers[.xTotalCount] ?? "") == total + 1)
            #expect(try afterInsert.results.first?["number"]?["value"]?.stringValue == "INC0000000")
        }
    }

    @Test("each caller their own page: users who see differently never get each other's")
    func perCaller() async throws {
        try await TestApp.withRouter { client throws in
            // abel (no roles) sees only incidents he is involved in; john (itil) sees them all.
            let list = "/api/now/table/incident?sysparm_limit=100&sysparm_fields=number"
            let john = try await client.get(list, .john)
            let abel = try await client.get(list, .abel)
            #expect(john.status == .ok && abel.status == .ok)
            #expect(try john.results.count > abel.results.count)
            #expect(try await client.get(list, .abel).text == abel.text)
            #expect(try await client.get(list, .john).text == john.text)
            // A query naming the caller reads each caller's own.
            let mine = "/api/now/table/incident?sysparm_query=caller_id=javascript:gs.getUserID()&sysparm_fields=caller_id"
            for user in [HTTPFields.john, .abel, .john, .abel] {
                let answer = try await client.get(mine, user)
                let expected = user == .john ? DemoData.userID("john.doe") : DemoData.userID("abel.tuter")
                for result in try answer.results { #expect(result["caller_id"]?["value"]?.stringValue == expected) }
            }
        }
    }

    @Test("a query relative to today is read every time (it selects other rows tomorrow); --list-cache-mb 0 keeps nothing")
    func relativeQueriesRead() async throws {
        let today = "/api/now/table/incident?sysparm_query=opened_at>=javascript:gs.beginningOfToday()&sysparm_limit=5"
        let relative = "/api/now/table/incident?sysparm_query=opened_at>javascript:gs.daysAgoStart(1)&sysparm_limit=5"
        // The same query with a fixed date is kept, as any other.
        let fixed = "/api/now/table/incident?sysparm_query=opened_at>2020-01-01 00:00:00&sysparm_limit=5"
        for (megabytes, kept) in [(64, [fixed]), (0, [])] {
            try await OutageTests.withFaultyRouter(configure: { $0.listCacheBytes = megabytes << 20 }) { client, faulty throws in
                for path in [today, relative, fixed] {
                    #expect(try await client.get(path).status == .ok)
                    Self.failNextPageRead(faulty)
                    let again = try await client.get(path)
                    if kept.contains(path) {
                        #expect(again.status == .ok, "\(path) was read again")
                        #expect(try await client.get(Self.page).status == .serviceUnavailable)
                    } else {
                        #expect(again.status == .serviceUnavailable, "\(path) was kept (\(megabytes) MB)")
                    }
                }
            }
        }
    }

    @Test("reads racing writes: once the writes stop, the page is what a fresh read shows", .timeLimit(.minutes(3)))
    func racingWrites() async throws {
        try await TestApp.withRouter { client throws in
            let list = "/api/now/table/incident?sysparm_limit=50&sysparm_query=ORDERBYDESCsys_updated_on^ORDERBYnumber&sysparm_fields=number,short_description,sys_mod_count"
            let ids = try await client.get("/api/now/table/incident?sysparm_limit=8&sysparm_fields=sys_id&sysparm_query=ORDERBYnumber", .admin)
                .results.compactMap { $0["sys_id"]?.stringValue }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, id) in ids.enumerated() {
                    group.addTask {
                        for round in 0..<5 {
                            let answer = try await client.send(
                                .patch, "/api/now/table/incident/\(id)", json: #"{"short_description":"race \#(index) \#(round)"}"#, headers: .admin
                            )
                            #expect(answer.status == .ok)
                        }
                    }
                }
                for _ in 0..<4 {
                    group.addTask {
                        for _ in 0..<15 {
                            let answer = try await client.get(list)
                            #expect(answer.status == .ok)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let kept = try await client.get(list)
            // The same query with one more (ignored) parameter is another key: read now.
            let fresh = try await client.get(list + "&sysparm_no_count=false")
            #expect(try kept.results == fresh.results)
            for index in ids.indices { #expect(kept.text.contains("race \(index) 4")) }
        }
    }

    @Test("callers asking for the same page at the same head at once cost one read; a failed read is nobody's page", .timeLimit(.minutes(1)))
    func oneReadForMany() async throws {
        let metrics = ServerMetrics()
        let pages = ListPages(maxBytes: 1 << 20, metrics: metrics)
        let reads = Mutex(0)
        @Sendable func read(_ text: String, failing: Bool = false) -> @Sendable () async throws -> ListPages.Read {
            {
                reads.withLock { $0 += 1 }
                // Long enough for every caller to ask while this read is still going.
                try await Task.sleep(for: .milliseconds(300))
                if failing { throw StorageUnavailable(reason: "test") }
                return (ListPages.Page(body: .init(string: text), headers: [:], head: 1), true)
            }
        }
        func together(_ head: Int, _ work: @escaping @Sendable () async throws -> ListPages.Read) async -> [Result<String, any Error>] {
            await withTaskGroup(of: Result<String, any Error>.self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        do { return .success(String(buffer: try await pages.page("k", head: head, read: work).body)) }
                        catch { return .failure(error) }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }
        let first = await together(1, read("one"))
        #expect(reads.withLock { $0 } == 1)
        #expect(first.allSatisfy { (try? $0.get()) == "one" })
        // Kept: asked again at the same head, nothing is read.
        #expect(String(buffer: try await pages.page("k", head: 1, read: read("unused")).body) == "one")
        #expect(reads.withLock { $0 } == 1)
        // The head moved: one read for all again; when it fails, all are told, and nothing is kept.
        let failed = await together(2, read("two", failing: true))
        #expect(reads.withLock { $0 } == 2)
        #expect(failed.allSatisfy { if case .failure(let error) = $0 { error is StorageUnavailable } else { false } })
        #expect(String(buffer: try await pages.page("k", head: 2, read: read("three")).body) == "three")
        #expect(reads.withLock { $0 } == 3)
        // Counted for operators: 3 reads, the 30 who shared them, the 1 kept answer.
        let samples = ObservabilityTests.samples(String(decoding: await metrics.exposition(), as: UTF8.self))
            .filter { $0.name == "docket_table_list_pages_total" }
        #expect(Dictionary(uniqueKeysWithValues: samples.map { ($0.labels["outcome"] ?? "", $0.value) }) == ["read": 3, "shared": 30, "kept": 1])
    }

    @Test("kept pages are bounded: the oldest go first; a page read before a change is not served after it")
    func bounded() async throws {
        let small = ListPages(maxBytes: 64 * 8)
        for index in 0..<20 {
            small.keep(.init(body: .init(string: String(repeating: "x", count: 60)), headers: [:], head: 7), as: "\(index)")
        }
        /// The page answered for `key` at `head`: "read" when it was read anew (nothing kept for it).
        func answer(_ key: String, _ head: Int) async throws -> String {
            String(buffer: try await small.page(key, head: head) {
                (ListPages.Page(body: .init(string: "read"), headers: [:], head: head), false)
            }.body)
        }
        #expect(try await answer("0", 7) == "read")
        #expect(try await answer("19", 7).hasPrefix("xxx"))
        #expect(try await answer("19", 8) == "read")
        #expect(try await answer("19", 7) == "read", "a page is forgotten once found stale")
        // A page larger than an eighth of the room is not kept.
        small.keep(.init(body: .init(string: String(repeating: "y", count: 65)), headers: [:], head: 7), as: "big")
        #expect(try await answer("big", 7) == "read")
    }

    @Test("the caller key names every property of Caller that can change a page")
    func callerKeyCoversCaller() {
        let base = Callers.john
        var variants: [String: Caller] = [:]
        var other = base; other.userID = "someone-else"; variants["userID"] = other
        other = base; other.userName = "someone.else"; variants["userName"] = other
        other = base; other.roles = ["itil", "admin"]; variants["roles"] = other
        other = base; other.timeZoneName = "Europe/Paris"; variants["timeZoneName"] = other
        other = base; other.domains = ["d1"]; variants["domains"] = other
        other = base; other.activeDomain = "d1"; variants["activeDomain"] = other
        let shownNowhere: Set<String> = ["displayName"]
        let properties = Set(Mirror(reflecting: base).children.compactMap(\.label))
        #expect(properties == Set(variants.keys).union(shownNowhere), "a property of Caller is not in ListPages.callerKey")
        for (name, variant) in variants { #expect(ListPages.callerKey(variant) != ListPages.callerKey(base), "\(name)") }
    }
}
