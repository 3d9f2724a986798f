import AsyncHTTPClient
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

@testable import DocketServer

/// Lines a JSON log handler wrote during a test.
final class CapturedLog: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func handler(level: Logger.Level = .trace) -> @Sendable (String) -> any LogHandler {
        let output = JSONLogHandler.Output { bytes in
            let text = String(decoding: bytes, as: UTF8.self)
            self.lines.withLock { $0.append(text) }
        }
        return { label in
            var handler = JSONLogHandler(label: label, output: output)
            handler.logLevel = level
            return handler
        }
    }

    /// The lines parsed; a line that is not one JSON object fails the test.
    func objects() throws -> [JSONValue] {
        try all.map { line in
            #expect(line.hasSuffix("\n") && line.dropLast().firstIndex(of: "\n") == nil, "one line per entry: \(line)")
            return try JSONValue.parse(Data(line.utf8))
        }
    }
}

@Suite("Health, request ids, logs and metrics")
struct ObservabilityTests {
    @Test("live answers while the database is down; ready names the check that fails")
    func liveAndReady() async throws {
        try await OutageTests.withFaultyRouter { client, faulty throws in
            let live = try await client.get("/health/live", [:])
            #expect(live.status == .ok)
            #expect(try live.json["status"]?.stringValue == "ok")
            let ready = try await client.get("/health/ready", [:])
            #expect(ready.status == .ok)
            #expect(try ready.json["storage"]?.stringValue == "ok")
            #expect(try ready.json["schema"]?.stringValue == "ok")
            #expect(try ready.json["events"]?.stringValue == "ok")
            #expect(ready.headers[.cacheControl] == "no-store")

            // An answer is reused for a second, as /health's is: the next different one comes within two.
            func readyUntil(_ status: HTTPResponse.Status) async throws -> TestResponse {
                var answer = try await client.get("/health/ready", [:])
                for _ in 0..<30 where answer.status != status {
                    try await Task.sleep(for: .milliseconds(100))
                    answer = try await client.get("/health/ready", [:])
                }
                return answer
            }
            faulty.setDown(true)
            let down = try await readyUntil(.serviceUnavailable)
            #expect(down.status == .serviceUnavailable)
            #expect(down.headers[.retryAfter] != nil)
            #expect(try down.json["status"]?.stringValue == "unavailable")
            #expect(try down.json["storage"]?.stringValue?.contains("cut the database off") == true)
            #expect(try await client.get("/health/live", [:]).status == .ok)
            faulty.setDown(false)
            #expect(try await readyUntil(.ok).status == .ok)

            // A newer docketd migrated the database under this one: not ready, and says why.
            try await faulty.base.write { db in
                try await db.run("UPDATE docket_meta SET value = '99' WHERE key = 'schema_version'")
            }
            let newer = try await readyUntil(.serviceUnavailable)
            #expect(newer.status == .serviceUnavailable)
            #expect(try newer.json["schema"]?.stringValue?.contains("newer docketd") == true)
            #expect(try await client.get("/health/live", [:]).status == .ok)
            // HEAD works as load balancers send it.
            let head = try await client.execute(uri: "/health/live", method: .head, headers: [:], body: nil)
            #expect(head.status == .ok)
        }
    }

    @Test("every response carries a request id; a sensible one from the caller is kept, anything else replaced")
    func requestIDs() async throws {
        try await TestApp.withRouter { client throws in
            let fresh = try await client.get("/api/now/table/incident?sysparm_limit=1")
            let id = try #require(fresh.headers[RequestIDs.header])
            #expect(id.count == 16 && id.allSatisfy(\.isHexDigit))
            let other = try await client.get("/api/now/table/incident?sysparm_limit=1")
            #expect(other.headers[RequestIDs.header] != id)

            var headers = HTTPFields.john
            headers[RequestIDs.header] = "lb-7f3a:trace/42"
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", headers).headers[RequestIDs.header] == "lb-7f3a:trace/42")
            // Errors, unknown paths and other dialects too.
            headers[RequestIDs.header] = "kept-on-error"
            #expect(try await client.get("/api/now/table/no_such_table", headers).headers[RequestIDs.header] == "kept-on-error")
            #expect(try await client.get("/nowhere", headers).headers[RequestIDs.header] == "kept-on-error")
            #expect(try await client.get("/health", headers).headers[RequestIDs.header] == "kept-on-error")
            for bad in ["with space", String(repeating: "a", count: 129), "quote\"", "semi;colon", "ümlaut"] {
                var fields = HTTPFields.john
                fields[RequestIDs.header] = bad
                let answer = try await client.get("/api/now/table/incident?sysparm_limit=1", fields)
                #expect(answer.status == .ok)
                let given = try #require(answer.headers[RequestIDs.header])
                #expect(given != bad && given.count == 16, "\(bad) must be replaced")
            }
        }
    }

    @Test("--log-format json: one object a line with the request's id, user, dialect, route, status and duration; no secret in any line")
    func jsonLogs() async throws {
        let log = CapturedLog()
        let secret = "Zebra-\(UUID().uuidString)-Secret"
        try await TestApp.withRouter(configure: { configuration in
            configuration.logHandler = log.handler()
            configuration.logLevel = .trace
        }) { client throws in
            // An administrator gives john a password no text of Docket contains.
            let set = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("john.doe"))", json: #"{"user_password":"\#(secret)"}"#, headers: .admin
            )
            #expect(set.status == .ok)
            let basic = HTTPFields.basic("john.doe", secret)
            let listed = try await client.get("/api/now/table/incident?sysparm_limit=2", basic)
            #expect(listed.status == .ok)
            let requestID = try #require(listed.headers[RequestIDs.header])
            // A wrong password, a bearer token, a session cookie, a refresh token.
            #expect(try await client.get("/api/now/table/incident", .basic("john.doe", secret + "x")).status == .unauthorized)
            let grant = try await client.passwordGrant("john.doe", secret)
            let access = try #require(grant["access_token"]?.stringValue)
            let refresh = try #require(grant["refresh_token"]?.stringValue)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", .bearer(access)).status == .ok)
            let cookie = try #require(listed.headers[.setCookie]).split(separator: ";")[0]
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", [.cookie: String(cookie)]).status == .ok)
            _ = try await client.form(
                "/oauth_token.do", "grant_type=refresh_token&client_id=docket-demo&client_secret=docket-demo-secret&refresh_token=\(refresh)"
            )
            // ETO: the password in a body, then the SSO token in a path.
            let sso = try await client.execute(
                uri: "/API/Security.svc/SSOAuthenticate/", method: .post, headers: [.contentType: "application/json"],
                body: ByteBuffer(string: #"{"security":{"Email":"john.doe@example.com","Password":"\#(secret)"}}"#)
            )
            let ssoToken = try #require(try sso.json["SSOAuthenticateResult"]?["SSOAuthToken"]?.stringValue)
            #expect(ssoToken != ETOAPI.zeroGUID)
            let enterprises = try await client.get("/API/Security.svc/GetSSOEnterprises/\(ssoToken)", [:])
            #expect(enterprises.status == .ok)
            let etoID = try #require(enterprises.headers[RequestIDs.header])

            let objects = try log.objects()
            #expect(objects.count >= 6)
            for object in objects {
                #expect(object["time"]?.stringValue?.hasSuffix("Z") == true)
                #expect(object["level"]?.stringValue != nil)
                #expect(object["message"]?.stringValue != nil)
            }
            let line = try #require(objects.first { $0["request_id"]?.stringValue == requestID && $0["message"]?.stringValue == "request" })
            #expect(line["user"]?.stringValue == "john.doe")
            #expect(line["dialect"]?.stringValue == "servicenow")
            #expect(line["route"]?.stringValue?.hasPrefix("/api/now/table/") == true)
            #expect(line["status"]?.stringValue == "200")
            #expect(line["method"]?.stringValue == "GET")
            #expect(Double(line["duration_ms"]?.stringValue ?? "") != nil)
            #expect(line["path"]?.stringValue == "/api/now/table/incident")
            let everything = log.all.joined()
            let basicHeader = "Basic " + Data("john.doe:\(secret)".utf8).base64EncodedString()
            let etoLine = try #require(objects.first { $0["request_id"]?.stringValue == etoID && $0["message"]?.stringValue == "request" })
            #expect(etoLine["dialect"]?.stringValue == "eto")
            #expect(etoLine["route"]?.stringValue == "/api/security.svc/getssoenterprises/{token}")
            #expect(etoLine["path"]?.stringValue == "/api/security.svc/getssoenterprises/{token}")
            for leaked in [secret, access, refresh, String(cookie.split(separator: "=", maxSplits: 1)[1]), basicHeader, "docket-demo-secret", ssoToken] {
                #expect(!everything.contains(leaked), "a secret was logged")
            }
            // A device's push token in a path is logged as the route's pattern.
            #expect(ObservedResponder.loggedPath("/rest/registry/device/f00dcafe", route: "/rest/registry/device/{token}") == "/rest/registry/device/{token}")
            #expect(ObservedResponder.carriesToken("/a/{deviceToken}/b") && ObservedResponder.carriesToken("/a/{TOKEN}"))
            #expect(!ObservedResponder.carriesToken("/a/{token") && !ObservedResponder.carriesToken("/a/{tokens}") && !ObservedResponder.carriesToken("}"))
            #expect(!ObservedResponder.carriesToken("/api/now/table/{table}") && !ObservedResponder.carriesToken(""))
        }
    }

    @Test("/metrics on the main port only with the token; Prometheus text with help on every family")
    func metricsOnMainPort() async throws {
        try await TestApp.withRouter { client throws in
            // No token configured: nothing there.
            #expect(try await client.get("/metrics", [:]).status == .notFound)
        }
        let token = "metrics-" + UUID().uuidString
        try await TestApp.withRouter(configure: { $0.metricsToken = token }) { client throws in
            for headers: HTTPFields in [[:], .bearer("wrong-token-wrong-token"), .bearer(""), [.authorization: "Bearer"], .admin,
                                        [.authorization: "Basic " + token]] {
                let refused = try await client.get("/metrics", headers)
                #expect(refused.status == .unauthorized)
                #expect(refused.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                #expect(!refused.text.contains("docket_"))
            }
            // Requests of several dialects, a wrong password, concurrently.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        let answer = try await client.get("/api/now/table/incident?sysparm_limit=1")
                        #expect(answer.status == .ok)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await client.get("/api/now/table/incident", .basic("john.doe", "wrong")).status == .unauthorized)
            #expect(try await client.get("/nowhere", [:]).status == .notFound)
            // Methods are any token a client likes: all but the standard ones share one label.
            for index in 0..<5 {
                _ = try await client.execute(uri: "/api/now/table/incident", method: HTTPRequest.Method("FUZZ\(index)")!, headers: .john, body: nil)
            }
            let scrape = try await client.get("/metrics", .bearer(token))
            #expect(scrape.status == .ok)
            #expect(scrape.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
            let text = scrape.text
            let samples = Self.samples(text)
            let listed = samples.filter { $0.name == "docket_http_requests_total" && $0.labels["route"] == "/api/now/table/{table}" && $0.labels["status"] == "200" }
            #expect(listed.count == 1)
            #expect(listed.first?.labels["dialect"] == "servicenow")
            #expect(listed.first?.labels["method"] == "GET")
            #expect(listed.first?.value == 20)
            #expect(samples.contains { $0.name == "docket_http_requests_total" && $0.labels["status"] == "401" })
            #expect(samples.contains { $0.name == "docket_http_requests_total" && $0.labels["dialect"] == "root" && $0.labels["status"] == "404" })
            #expect(samples.contains { $0.name == "docket_http_request_duration_seconds_bucket" && $0.labels["le"] == "+Inf" })
            #expect(samples.first { $0.name == "docket_auth_login_failures_total" }?.value == 1)
            #expect(samples.filter { $0.name == "docket_http_requests_total" && $0.labels["method"] == "other" }.map(\.value).reduce(0, +) == 5)
            #expect(!samples.contains { $0.labels["method"]?.hasPrefix("FUZZ") == true })
            #expect(samples.contains { $0.name == "docket_storage_statement_seconds_count" && $0.labels["kind"] == "read" })
            #expect(samples.contains { $0.name == "docket_storage_wait_seconds_count" })
            #expect(samples.contains { $0.name == "docket_event_log_head" && $0.value > 0 })
            #expect(samples.contains { $0.name == "docket_event_log_lag" && $0.value == 0 })
            #expect(samples.contains { $0.name == "docket_live_streams_open" })
            #expect(samples.contains { $0.name == "docket_live_fanout_seconds_count" })
            #expect(samples.contains { $0.name == "docket_live_fanout_deliveries_total" })
            // The 20 lists: at least one read; the others kept or shared.
            let pages = samples.filter { $0.name == "docket_table_list_pages_total" }
            #expect(pages.map(\.value).reduce(0, +) >= 20)
            #expect(pages.first { $0.labels["outcome"] == "read" }.map(\.value) ?? 0 >= 1)
            for kind in ["live", "notifier"] {
                #expect(samples.contains { $0.name == "docket_event_log_follower_lag" && $0.labels["follower"] == kind && $0.value >= 0 })
            }
            #expect(samples.contains { $0.name == "docket_auth_password_checks_in_flight" })
            // Every family has help and a type.
            let families = Set(samples.map { name in
                ["_bucket", "_sum", "_count"].reduce(name.name) { $0.hasSuffix($1) && text.contains("# TYPE \($0.dropLast($1.count)) histogram") ? String($0.dropLast($1.count)) : $0 }
            })
            for family in families {
                #expect(text.contains("# HELP \(family) "), "\(family) has no help")
                #expect(text.contains("# TYPE \(family) "), "\(family) has no type")
            }
        }
    }

    @Test("--metrics-port: a listener of its own, guarded by the token when there is one")
    func metricsListener() async throws {
        let port = Mutex<Int?>(nil)
        let token = "metrics-" + UUID().uuidString
        let directory = TemporaryDirectory()
        var configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        configuration.metricsPort = 0
        configuration.metricsToken = token
        configuration.onMetricsListening = { given in port.withLock { $0 = given } }
        let app = try await buildApplication(configuration)
        try await app.test(.live) { client throws in
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").status == .ok)
            var metricsPort: Int?
            for _ in 0..<100 {
                metricsPort = port.withLock { $0 }
                if metricsPort != nil { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            let listening = try #require(metricsPort)
            #expect(listening != client.port)
            var request = HTTPClientRequest(url: "http://127.0.0.1:\(listening)/metrics")
            let refused = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            #expect(refused.status == .unauthorized)
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let answer = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
            #expect(answer.status == .ok)
            let text = String(buffer: try await answer.body.collect(upTo: 4 << 20))
            #expect(text.contains(#"docket_http_requests_total{dialect="servicenow",route="/api/now/table/{table}",method="GET",status="200"} 1"#))
            // Only /metrics there.
            let other = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(listening)/api/now/table/incident"), timeout: .seconds(10))
            #expect(other.status == .notFound)
        }
    }

    /// Samples of a Prometheus text exposition.
    static func samples(_ text: String) -> [(name: String, labels: [String: String], value: Double)] {
        text.split(separator: "\n").compactMap { line -> (String, [String: String], Double)? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { return nil }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return (String(series), [:], value) }
            var labels: [String: String] = [:]
            for pair in series[series.index(after: brace)..<series.index(before: series.endIndex)].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { continue }
                labels[String(parts[0])] = String(parts[1].dropFirst().dropLast())
            }
            return (String(series[..<brace]), labels, value)
        }
    }
}

@Suite("The OpenAPI description")
struct OpenAPITests {
    @Test("served to signed-in callers: 3.1, every described API's routes, each table with its fields and choices")
    func document() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.get("/api/docket/openapi.json", [:]).status == .unauthorized)
            let answer = try await client.get("/api/docket/openapi.json")
            #expect(answer.status == .ok)
            let document = try answer.json
            #expect(document["openapi"]?.stringValue == "3.1.0")
            let paths = try #require(document["paths"]?.objectValue)
            for (path, methods) in [
                ("/api/now/table/{table}", ["get", "post"]), ("/api/now/table/{table}/{sys_id}", ["get", "put", "patch", "delete"]),
                ("/api/now/attachment/{sys_id}/file", ["get"]), ("/api/now/attachment/file", ["post"]), ("/api/now/stats/{table}", ["get"]),
                ("/api/now/v1/batch", ["post"]), ("/api/x_snc_my_work/v1/tracker/task", ["get"]), ("/api/docket/events", ["get"]),
                ("/api/now/table/incident", ["get", "post"]), ("/api/now/table/incident/{sys_id}", ["get", "put", "patch", "delete"]),
            ] {
                let item = try #require(paths[path]?.objectValue, "\(path) is missing")
                #expect(Set(item.keys) == Set(methods), "\(path)")
            }
            #expect(paths.keys.allSatisfy { !$0.hasPrefix("/api/now/graphql") && !$0.hasPrefix("/api/docket/notifications") })
            let state = try #require(document["components"]?["schemas"]?["incident"]?["properties"]?["state"])
            let choices = try #require(state["x-choices"]?.arrayValue).compactMap { $0["value"]?.stringValue }
            #expect(choices.contains("1") && choices.contains("7"))
            #expect(state["x-choices"]?.arrayValue?.first?["label"]?.stringValue?.isEmpty == false)
            #expect(document["components"]?["schemas"]?["sys_user"]?["properties"]?["user_password"] == nil)
            let operation = try #require(paths["/api/now/table/incident"]?["get"])
            #expect(operation["responses"]?["200"]?["content"]?["application/json"]?["schema"]?["properties"]?["result"]?["items"]?["$ref"]?
                .stringValue == "#/components/schemas/incident")
            // Operation ids are unique.
            let ids = paths.values.flatMap { ($0.objectValue ?? [:]).values.compactMap { $0["operationId"]?.stringValue } }
            #expect(Set(ids).count == ids.count)
        }
    }

    @Test("a route of a described API without a description is named (and stops debug builds)")
    func drift() {
        #expect(OpenAPIDocument.undescribed([("GET", "/api/now/table/{table}"), ("GET", "/api/now/graphql")]).isEmpty)
        #expect(OpenAPIDocument.undescribed([("GET", "/api/now/table/{table}/{sys_id}/extra"), ("HEAD", "/api/now/table/{table}")])
            == ["GET /api/now/table/{table}/{sys_id}/extra"])
    }
}
