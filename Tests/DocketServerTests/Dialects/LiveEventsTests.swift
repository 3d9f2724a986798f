import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
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

    @Test("a stream starts with ready, replays matching changes the caller may read, and ends with revoked at logout", .timeLimit(.minutes(1)))
    func replayThenRevoked() async throws {
        try await TestApp.withRouter(configure: { $0.liveHeartbeat = .milliseconds(50) }) { client in
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
            let cookie = try await Self.sessionCookie(client, .abel)
            let stream = Task {
                try await client.get("/api/docket/events?table=incident&query=short_descriptionSTARTSWITHsse-replay&since=0", [.cookie: cookie])
            }
            try await Task.sleep(for: .milliseconds(500))
            try await Self.logout(client, cookie)
            let response = try await stream.value
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("text/event-stream") == true)
            #expect(response.headers[.cacheControl]?.contains("no-cache") == true)
            let messages = Self.messages(response.text)
            #expect(messages.first?["event"] == "ready")
            #expect(messages.first?["id"] == "0")
            #expect(messages.last?["event"] == "revoked")
            let changes = try messages.filter { $0["event"] == nil }.map { try JSONValue.parse(Array(($0["data"] ?? "").utf8)) }
            #expect(changes.map { $0.string("sys_id") } == [mine, mine])
            #expect(changes.map { $0.string("change") } == ["entered", "changed"])
            #expect(changes[1]["previous"]?["urgency"] != nil)
            #expect(changes[1]["record"]?["urgency"]?.stringValue == "1")
            #expect(!response.text.contains("sse-replay other"))
            // `id:` is the sequence, so that EventSource resumes with Last-Event-ID.
            let ids = messages.filter { $0["event"] == nil }.compactMap { $0["id"].flatMap { Int($0) } }
            #expect(ids == changes.compactMap { $0["sequence"]?.intValue })
        }
    }

    @Test("Last-Event-ID resumes after the given sequence and wins over since", .timeLimit(.minutes(1)))
    func resume() async throws {
        try await TestApp.withRouter(configure: { $0.liveHeartbeat = .milliseconds(50) }) { client in
            var ids: [String] = []
            for index in 0..<3 {
                ids.append(try await client.send(
                    .post, "/api/now/table/incident", json: #"{"short_description":"sse-resume \#(index)"}"#, headers: .admin
                ).result.string("sys_id"))
            }
            let cookie = try await Self.sessionCookie(client, .admin)
            let first = Task {
                try await client.get("/api/docket/events?table=incident&query=short_descriptionSTARTSWITHsse-resume&since=0", [.cookie: cookie])
            }
            try await Task.sleep(for: .milliseconds(400))
            try await Self.logout(client, cookie)
            let all = Self.messages(try await first.value.text).filter { $0["event"] == nil }
            #expect(all.count == 3)
            let cookie2 = try await Self.sessionCookie(client, .admin)
            let resumed = Task {
                try await client.get(
                    "/api/docket/events?table=incident&query=short_descriptionSTARTSWITHsse-resume&since=0",
                    [.cookie: cookie2, .lastEventID: all[0]["id"] ?? ""]
                )
            }
            try await Task.sleep(for: .milliseconds(400))
            try await Self.logout(client, cookie2)
            let rest = Self.messages(try await resumed.value.text).filter { $0["event"] == nil }
            #expect(rest.map { $0["id"] } == all.dropFirst().map { $0["id"] })
            #expect(ids.count == 3)
        }
    }

    @Test("resuming from before the oldest retained event says resync and ends", .timeLimit(.minutes(1)))
    func resync() async throws {
        // The retention service prunes at start: only the newest five events stay.
        try await TestApp.withRouter(configure: { $0.eventLogMaxEvents = 5 }) { client in
            var response = try await client.get("/api/docket/events?since=0", .admin)
            for _ in 0..<50 where !response.text.contains("event: resync") {
                // The pruning service may not have run yet when the first request arrives.
                try await Task.sleep(for: .milliseconds(100))
                response = try await client.get("/api/docket/events?since=0", .admin)
            }
            let messages = Self.messages(response.text)
            #expect(messages.map { $0["event"] } == ["ready", "resync"])
            let resync = try JSONValue.parse(Array((messages.last?["data"] ?? "").utf8))
            #expect((resync["oldest_available"]?.intValue ?? 0) > 0)
        }
    }

    @Test("bad input is a 400 before any stream starts; no credentials is a 401")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            for uri in [
                "/api/docket/events?since=-1", "/api/docket/events?since=abc", "/api/docket/events?since=99999999999999999999",
                "/api/docket/events?table=no_such_table", "/api/docket/events?query=active=true",
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

    @Test("a user may hold only so many streams at once", .timeLimit(.minutes(1)))
    func streamsPerUser() async throws {
        try await TestApp.withRouter(configure: {
            $0.liveStreamsPerUser = 1
            $0.liveHeartbeat = .milliseconds(50)
        }) { client in
            let cookie = try await Self.sessionCookie(client)
            let streams = (0..<2).map { _ in Task { try await client.get("/api/docket/events", [.cookie: cookie]) } }
            try await Task.sleep(for: .seconds(1))
            // Another user is not affected.
            let beth = try await Self.sessionCookie(client, .beth)
            let bethStream = Task { try await client.get("/api/docket/events", [.cookie: beth]) }
            try await Task.sleep(for: .milliseconds(300))
            try await Self.logout(client, cookie)
            try await Self.logout(client, beth)
            var statuses: [HTTPResponse.Status] = []
            for stream in streams { statuses.append(try await stream.value.status) }
            #expect(statuses.sorted { $0.code < $1.code } == [.ok, .tooManyRequests])
            #expect(try await bethStream.value.status == .ok)
            // The slot is free again once the stream ended.
            let again = try await Self.sessionCookie(client)
            let third = Task { try await client.get("/api/docket/events", [.cookie: again]) }
            try await Task.sleep(for: .milliseconds(300))
            try await Self.logout(client, again)
            #expect(try await third.value.status == .ok)
        }
    }

    @Test("a revoked bearer token ends its stream", .timeLimit(.minutes(1)))
    func revokedBearer() async throws {
        try await TestApp.withRouter(configure: { $0.liveHeartbeat = .milliseconds(50) }) { client in
            let token = try await client.passwordGrant()
            let stream = Task { try await client.get("/api/docket/events", .bearer(token.string("access_token"))) }
            try await Task.sleep(for: .milliseconds(300))
            let revoke = try await client.get("/oauth_revoke_token.do?token=" + token.string("access_token"), [:])
            #expect(revoke.status == .ok)
            let messages = Self.messages(try await stream.value.text)
            #expect(messages.map { $0["event"] } == ["ready", "revoked"])
        }
    }
}
