import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

@testable import DocketServer

/// `GET /api/docket/events`: live changes as Server-Sent Events. Streams here end by themselves (their session
/// ends, or the log no longer reaches back), so each whole answer can be read; the SDK's tests follow streams
/// that stay open.
@Suite("Live events (SSE)")
struct LiveEventsTests {
    /// A session cookie for a demo user (Basic login once).
    static func sessionCookie(_ client: any TestClientProtocol, _ headers: HTTPFields = .john) async throws -> String {
        let login = try await client.get("/api/now/table/sys_user?sysparm_limit=1", headers)
        return String((login.headers[.setCookie] ?? "").split(separator: ";")[0])
    }

    /// Opens a user's one allowed stream and waits until it is open: a short poll (follow=false) with other
    /// credentials of the same user is refused while it is. A probe holds the slot for as long as it runs, so
    /// the stream itself may be refused with 429 when it arrives during a probe; it is then opened again.
    static func openStream(
        _ client: any TestClientProtocol, _ uri: String = "/api/docket/events", headers: HTTPFields, probe: HTTPFields
    ) async throws -> Task<TestResponse, any Error> {
        for _ in 0..<20 {
            let finished = Mutex(false)
            let stream = Task {
                defer { finished.withLock { $0 = true } }
                return try await client.get(uri, headers)
            }
            for _ in 0..<200 {
                // The stream first: a probe sent with it can take the slot before it (on a loaded machine, every time).
                try await Task.sleep(for: .milliseconds(20))
                if finished.withLock({ $0 }) { break }
                if try await client.get("/api/docket/events?follow=false", probe).status == .tooManyRequests {
                    return stream
                }
            }
            guard finished.withLock({ $0 }) else { break }
            let refused = try await stream.value
            guard refused.status == .tooManyRequests else {
                Issue.record("the stream ended at once with \(refused.status)")
                return stream
            }
        }
        Issue.record("the stream never opened")
        throw CancellationError()
    }

    static func logout(_ client: any TestClientProtocol, _ cookie: String) async throws {
        _ = try await client.execute(uri: "/logout.do", method: .post, headers: [.cookie: cookie], body: nil)
    }

    /// Messages of an SSE body: each a dictionary of its fields (comments dropped).
    static func messages(_ body: String) -> [[String: String]] {
        body.components(separatedBy: "\n\n").compactMap { block in
            var fields: [String: String] = [:]
            for line in block.split(separator: "\n") where !line.hasPrefix(":") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let value = line[line.index(after: colon)...]
                fields[String(line[..<colon])] = String(value.hasPrefix(" ") ? value.dropFirst() : value)
            }
            return fields.isEmpty ? nil : fields
        }
    }

    @Test("a stream starts with ready and replays the changes matching its query that the caller may read; follow=false ends it with end", .timeLimit(.minutes(3)))
    func replay() async throws {
        try await TestApp.withRouter { client in
            // Abel's own incident and one he may not read, both matching the query.
            let mine = try await client.send(
                .post, "/api/now/table/incident",
                json: #"{"short_description":"sse-replay mine","caller_id":"\#(Callers.abel.userID)"}"#, headers: .admin
            ).result.string("sys_id")
            let other = try await client.send(
                .post, "/api/now/table/incident", json: #"{"short_description":"sse-replay other"}"#, headers: .admin
            ).result.string("sys_id")
            _ = try await client.send(
                .patch, "/api/now/table/incident/\(mine)", json: #"{"urgency":"1"}"#, headers: .admin
            )
            _ = try await client.send(
                .patch, "/api/now/table/incident/\(other)", json: #"{"urgency":"1"}"#, headers: .admin
            )
            let response = try await client.get(
                "/api/docket/events?table=incident&query=short_descriptionSTARTSWITHsse-replay&since=0&follow=false", .abel
            )
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("text/event-stream") == true)
            #expect(response.headers[.cacheControl]?.contains("no-cache") == true)
            let messages = Self.messages(response.text)
            #expect(messages.first?["event"] == "ready")
            #expect(messages.first?["id"] == "0")
            #expect(messages.last?["event"] == "end")
            let changes = try messages.filter { $0["event"] == nil }.map { try JSONValue.parse(Array(($0["data"] ?? "").utf8)) }
            #expect(changes.map { $0.string("sys_id") } == [mine, mine])
            #expect(changes.map { $0.string("change") } == ["entered", "changed"])
            #expect(changes[1]["previous"]?["urgency"] != nil)
            #expect(changes[1]["record"]?["urgency"]?.stringValue == "1")
            // Who did it, by user name and by full name.
            #expect(changes.allSatisfy { $0.string("user") == "admin" && $0.string("user_display") == "System Administrator" })
            #expect(!response.text.contains("sse-replay other"))
            // `id:` is the sequence, so that EventSource resumes with Last-Event-ID.
            let ids = messages.filter { $0["event"] == nil }.compactMap { $0["id"].flatMap { Int($0) } }
            #expect(ids == changes.compactMap { $0["sequence"]?.intValue })
        }
    }

    @Test("Last-Event-ID resumes after the given sequence and wins over since", .timeLimit(.minutes(3)))
    func resume() async throws {
        try await TestApp.withRouter { client in
            var ids: [String] = []
            for index in 0..<3 {
                ids.append(try await client.send(
                    .post, "/api/now/table/incident", json: #"{"short_description":"sse-resume \#(index)"}"#, headers: .admin
                ).result.string("sys_id"))
            }
            let query = "/api/docket/events?table=incident&query=short_descriptionSTARTSWITHsse-resume&since=0&follow=false"
            let all = Self.messages(try await client.get(query, .admin).text).filter { $0["event"] == nil }
            #expect(all.count == 3)
            var headers = HTTPFields.admin
            headers[.lastEventID] = all.first?["id"] ?? ""
            let rest = Self.messages(try await client.get(query, headers).text).filter { $0["event"] == nil }
            #expect(rest.map { $0["id"] } == all.dropFirst().map { $0["id"] })
            // The end event says where to continue: nothing follows it.
            let end = Self.messages(try await client.get(query, headers).text).last
            #expect(end?["event"] == "end")
            var after = HTTPFields.admin
            after[.lastEventID] = end?["id"] ?? ""
            #expect(Self.messages(try await client.get(query, after).text).filter { $0["event"] == nil }.isEmpty)
            #expect(ids.count == 3)
        }
    }

    @Test("resuming from before the oldest retained event says resync and ends", .timeLimit(.minutes(3)))
    func resync() async throws {
        // The retention service prunes at start: only the newest five events stay.
        try await TestApp.withRouter(configure: { $0.eventLogMaxEvents = 5 }) { client in
            var response = try await client.get("/api/docket/events?since=0&follow=false", .admin)
            for _ in 0..<50 where !response.text.contains("event: resync") {
                // The pruning service may not have run yet when the first request arrives.
                try await Task.sleep(for: .milliseconds(100))
                response = try await client.get("/api/docket/events?since=0&follow=false", .admin)
            }
            let messages = Self.messages(response.text)
            #expect(messages.map { $0["event"] } == ["ready", "resync"])
            let resync = try JSONValue.parse(Array((messages.last?["data"] ?? "").utf8))
            #expect((resync["oldest_available"]?.intValue ?? 0) > 0)
        }
    }

    @Test("a replay longer than the limit says resync at once, from the newest event; a shorter one replays", .timeLimit(.minutes(3)))
    func replayLimit() async throws {
        try await TestApp.withRouter(configure: { $0.liveReplayMaxEvents = 2 }) { client in
            for index in 0..<3 {
                let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"replay \#(index)"}"#)
                #expect(created.status == .created)
            }
            let messages = Self.messages(try await client.get("/api/docket/events?since=0&follow=false", .admin).text)
            #expect(messages.map { $0["event"] } == ["ready", "resync"])
            let resync = try JSONValue.parse(Array((messages.last?["data"] ?? "").utf8))
            let newest = resync["oldest_available"]?.intValue ?? 0
            #expect(newest > 3)
            let short = Self.messages(try await client.get("/api/docket/events?since=\(newest - 2)&follow=false", .admin).text)
            #expect(short.filter { $0["event"] == nil }.count == 2)
            #expect(short.last?["event"] == "end")
        }
    }

    @Test("bad input is a 400 before any stream starts; no credentials is a 401")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            for uri in [
                "/api/docket/events?since=-1", "/api/docket/events?since=abc", "/api/docket/events?since=99999999999999999999",
                "/api/docket/events?table=no_such_table", "/api/docket/events?query=active=true",
                "/api/docket/events?follow=maybe",
                "/api/docket/events?table=incident&query=priority%3D1%5ENQ" + String(repeating: "%5Eactive%3Dtrue", count: 300),
            ] {
                let response = try await client.get(uri)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(response.errorMessage != nil, "\(uri)")
            }
            let badID = try await client.get("/api/docket/events", [
                .authorization: HTTPFields.john[.authorization]!, .lastEventID: "x1",
            ])
            #expect(badID.status == .badRequest)
            #expect(try await client.get("/api/docket/events", [:]).status == .unauthorized)
            #expect(try await client.get("/api/docket/events", .basic("john.doe", "wrong")).status == .unauthorized)
            // HEAD answers the headers without starting a stream.
            let head = try await client.execute(uri: "/api/docket/events", method: .head, headers: .john, body: nil)
            #expect(head.status == .ok)
            #expect(head.headers[.contentType]?.hasPrefix("text/event-stream") == true)
        }
    }

    @Test("a user may hold only so many streams at once", .timeLimit(.minutes(3)))
    func streamsPerUser() async throws {
        try await TestApp.withRouter(configure: {
            $0.liveStreamsPerUser = 1
            $0.liveHeartbeat = .milliseconds(50)
        }) { client in
            let cookie = try await Self.sessionCookie(client)
            // A second stream of the same user (Basic credentials this time) is refused while the first is open.
            let stream = try await Self.openStream(client, headers: [.cookie: cookie], probe: .john)
            let refused = try await client.get("/api/docket/events", .john)
            #expect(refused.status == .tooManyRequests)
            #expect(refused.headers[.retryAfter] != nil)
            #expect(refused.errorMessage == "Too many live streams")
            // Another user is not affected.
            #expect(try await client.get("/api/docket/events?follow=false", .beth).status == .ok)
            try await Self.logout(client, cookie)
            let ended = Self.messages(try await stream.value.text)
            #expect(ended.map { $0["event"] } == ["ready", "revoked"])
            // The slot is free again once the stream ended.
            #expect(try await client.get("/api/docket/events?follow=false", .john).status == .ok)
        }
    }

    @Test("a revoked bearer token ends its stream", .timeLimit(.minutes(3)))
    func revokedBearer() async throws {
        try await TestApp.withRouter(configure: {
            $0.liveHeartbeat = .milliseconds(50)
            $0.liveStreamsPerUser = 1
        }) { client in
            let token = try await client.passwordGrant()
            let stream = try await Self.openStream(
                client, headers: .bearer(token.string("access_token")), probe: .john
            )
            let revoke = try await client.get("/oauth_revoke_token.do?token=" + token.string("access_token"), [:])
            #expect(revoke.status == .ok)
            let messages = Self.messages(try await stream.value.text)
            #expect(messages.map { $0["event"] } == ["ready", "revoked"])
        }
    }
    /// An HTTP/1.1 body in chunks, decoded; nil when the framing is broken. What follows the last whole chunk is left.
    static func dechunk(_ bytes: [UInt8]) -> String? {
        var body: [UInt8] = []
        var index = 0
        while let lineEnd = bytes[index...].firstIndex(of: UInt8(ascii: "\n")) {
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let size = Int(sizeText, radix: 16) else { return nil }
            if size == 0 { break }
            let start = lineEnd + 1
            guard start + size + 2 <= bytes.count else { break }
            guard bytes[start + size] == UInt8(ascii: "\r"), bytes[start + size + 1] == UInt8(ascii: "\n") else { return nil }
            body += bytes[start..<start + size]
            index = start + size + 2
        }
        return String(decoding: body, as: UTF8.self)
    }

    @Test(
        "streams from now on HTTP/1 ride one group per way of seeing: each change reaches each stream once, in order, in whole chunks; one that resumes follows alone and misses nothing",
        .timeLimit(.minutes(3))
    )
    func groupedStreams() async throws {
        let token = "metrics-" + UUID().uuidString
        try await ConnectionGuardTests.withServer(configure: {
            $0.metricsToken = token
            $0.idleTimeout = .seconds(60)
        }) { port in
            func basic(_ user: String, _ password: String) -> String {
                "Authorization: Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
            }
            func request(_ auth: String, _ extra: String = "") -> [UInt8] {
                Array("GET /api/docket/events?table=incident&query=short_descriptionSTARTSWITHgrouped HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\(auth)\r\n\(extra)\r\n".utf8)
            }
            func metric(_ name: String) async throws -> Int {
                let (answer, _) = try await ConnectionGuardTests.exchange(
                    port, Array("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nConnection: close\r\n\r\n".utf8)
                )
                let line = answer.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                return line.flatMap { Int(Double($0.split(separator: " ").last ?? "") ?? -1) } ?? 0
            }
            func create(_ text: String) async throws -> String {
                let body = #"{"short_description":"\#(text)"}"#
                let (answer, _) = try await ConnectionGuardTests.exchange(port, Array((
                    "POST /api/now/table/incident HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                        + basic("admin", "admin") + "\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
                ).utf8))
                #expect(answer.hasPrefix("HTTP/1.1 201"))
                return try #require(answer.firstRange(of: #""sys_id":""#).map { String(answer[$0.upperBound...].prefix(32)) })
            }
            // john three times (one group) and beth (another time zone: another group).
            let john = basic("john.doe", "password")
            var streams: [(name: String, channel: any Channel, collector: ConnectionGuardTests.Collector)] = []
            for (name, auth) in [("john 1", john), ("john 2", john), ("beth", basic("beth.anglin", "password")), ("john 3", john)] {
                let (channel, collector) = try await ConnectionGuardTests.open(port, request(auth), until: "event: ready")
                streams.append((name, channel, collector))
            }
            let deliveries = try await metric("docket_live_fanout_deliveries_total")
            let fanouts = try await metric("docket_live_fanout_seconds_count")
            var created: [String] = []
            for index in 0..<3 { created.append(try await create("grouped \(index)")) }
            _ = try await create("not for these streams")
            // One resuming from before the first change follows on its own, and misses none of them.
            let john1 = try #require(streams.first)
            let ready = String(decoding: john1.collector.received.withLock { $0 }, as: UTF8.self)
            let start = try #require(ready.firstRange(of: "event: ready\nid: ").map { ready[$0.upperBound...].prefix { $0.isNumber } })
            let (resumed, resumedCollector) = try await ConnectionGuardTests.open(
                port, request(john, "Last-Event-ID: \(start)\r\n"), until: "grouped 2"
            )
            streams.append(("resumed", resumed, resumedCollector))

            for stream in streams {
                var text = ""
                for _ in 0..<500 {
                    let bytes = stream.collector.received.withLock { $0 }
                    guard let split = bytes.firstRange(of: Array("\r\n\r\n".utf8)) else { continue }
                    let body = Array(bytes[split.upperBound...])
                    text = try #require(Self.dechunk(body), "\(stream.name): broken chunks")
                    if text.contains("grouped 2") { break }
                    try await Task.sleep(for: .milliseconds(10))
                }
                let changes = Self.messages(text).filter { $0["event"] == nil && $0["data"] != nil }
                let ids = changes.compactMap { $0["data"].flatMap { try? JSONValue.parse(Data($0.utf8)) }?["sys_id"]?.stringValue }
                #expect(ids == created, "\(stream.name): \(text.suffix(400))")
                let sequences = changes.compactMap { $0["id"].flatMap { Int($0) } }
                #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "\(stream.name)")
            }
            // Two groups judged and wrote each of the three changes: john's three streams and beth's one.
            #expect(try await metric("docket_live_fanout_seconds_count") - fanouts == 6)
            #expect(try await metric("docket_live_fanout_deliveries_total") - deliveries == 12)
            for stream in streams { try? await stream.channel.close() }
        }
    }
}
