import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import InMemoryTracing
import Testing
import Tracing

@testable import DocketServer

/// Traces: a server span per request, a child of the caller's context, with the storage, each statement and
/// access evaluation under it; nothing secret in any attribute.
@Suite("Traces")
struct TracingTests {
    /// Every attribute of a span as text.
    static func texts(_ span: FinishedInMemorySpan) -> [String: String] {
        var texts: [String: String] = [:]
        span.attributes.forEach { key, value in texts[key] = text(value) }
        return texts
    }

    static func text(_ value: SpanAttribute) -> String {
        switch value {
        case .string(let text): text
        case .int64(let number): String(number)
        case .bool(let flag): String(flag)
        case .double(let number): String(number)
        default: "\(value)"
        }
    }

    @Test("a request is a server span named by its route; storage, statements and access checks are its children")
    func requestSpans() async throws {
        let tracer = InMemoryTracer()
        try await TestApp.withRouter(configure: { $0.tracer = tracer }) { client throws in
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"traced"}"#)
            #expect(created.status == .created)
            let id = try #require(created.json["result"]?["sys_id"]?.stringValue)
            tracer.clearFinishedSpans()

            let patched = try await client.send(.patch, "/api/now/table/incident/\(id)", json: #"{"short_description":"traced again"}"#)
            #expect(patched.status == .ok)
            let requestID = try #require(patched.headers[RequestIDs.header])
            let spans = tracer.finishedSpans
            let server = try #require(spans.first { $0.kind == .server })
            #expect(spans.filter { $0.kind == .server }.count == 1)
            #expect(server.operationName == "PATCH /api/now/table/{table}/{sys_id}")
            #expect(server.parentSpanID == nil)
            let attributes = Self.texts(server)
            #expect(attributes["http.request.method"] == "PATCH")
            #expect(attributes["http.route"] == "/api/now/table/{table}/{sys_id}")
            #expect(attributes["url.path"] == "/api/now/table/incident/\(id)")
            #expect(attributes["http.response.status_code"] == "200")
            #expect(attributes["docket.dialect"] == "servicenow")
            #expect(attributes["docket.request_id"] == requestID)
            #expect(attributes["enduser.id"] == "john.doe")

            // Every other span belongs to the request's trace and descends from its span.
            let byID = Dictionary(spans.map { ($0.spanID, $0) }, uniquingKeysWith: { first, _ in first })
            func descends(_ span: FinishedInMemorySpan) -> Bool {
                var parent = span.parentSpanID
                while let id = parent {
                    if id == server.spanID { return true }
                    parent = byID[id]?.parentSpanID
                }
                return false
            }
            for span in spans where span.spanID != server.spanID {
                #expect(span.traceID == server.traceID)
                #expect(descends(span), "\(span.operationName) is outside the request's span")
            }
            let write = try #require(spans.first { $0.operationName == "db.write" })
            #expect(write.kind == .client)
            #expect(Self.texts(write)["db.system.name"] == (TestDatabase.postgres == nil ? "sqlite" : "postgresql"))
            let statements = spans.filter { $0.operationName == "db.statement" }
            // The row's update: on PostgreSQL inside the statement that also appends its event.
            #expect(statements.contains { statement in
                let text = Self.texts(statement)["db.query.text"] ?? ""
                return statement.parentSpanID == write.spanID && (text.hasPrefix("UPDATE") || text.hasPrefix("WITH docket_updated AS (UPDATE"))
            })
            // Statements carry placeholders, never the values written.
            for statement in statements {
                #expect(Self.texts(statement)["db.query.text"]?.contains("traced again") == false)
            }
            // The access check runs where the update reads the row: on PostgreSQL, an update of the row alone reads it
            // (with its version) before the write, in a read of the storage of its own.
            let check = try #require(spans.first { $0.operationName == "access.check" })
            let reads = spans.filter { $0.operationName == "db.read" }.map(\.spanID)
            #expect(TestDatabase.postgres == nil ? check.parentSpanID == write.spanID : reads.contains(check.parentSpanID ?? ""))
            #expect(Self.texts(check)["docket.access.operation"] == "write")
            #expect(Self.texts(check)["docket.access.allowed"] == "true")
            #expect(check.status == nil)

            // A read: the access filter is compiled in a span of its own.
            tracer.clearFinishedSpans()
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=2").status == .ok)
            let read = tracer.finishedSpans
            #expect(read.contains { $0.operationName == "GET /api/now/table/{table}" })
            #expect(read.contains { $0.operationName == "access.filter" && Self.texts($0)["docket.table"] == "incident" })
            #expect(read.contains { $0.operationName == "db.read" })
        }
    }

    @Test("the caller's trace context is the parent; a refusal is an answer, a 5xx marks the span failed")
    func propagation() async throws {
        let tracer = InMemoryTracer()
        try await TestApp.withRouter(configure: { $0.tracer = tracer }) { client throws in
            // InMemoryTracer propagates with headers of its own name, read through the same extractor as traceparent.
            var headers = HTTPFields.john
            headers[HTTPField.Name(InMemoryTracer.traceIDKey)!] = "trace-from-the-caller"
            headers[HTTPField.Name(InMemoryTracer.spanIDKey)!] = "span-of-the-caller"
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", headers).status == .ok)
            let server = try #require(tracer.finishedSpans.first { $0.kind == .server })
            #expect(server.traceID == "trace-from-the-caller")
            #expect(server.parentSpanID == "span-of-the-caller")

            // No context: a trace of its own.
            tracer.clearFinishedSpans()
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").status == .ok)
            let fresh = try #require(tracer.finishedSpans.first { $0.kind == .server })
            #expect(fresh.traceID != "trace-from-the-caller")
            #expect(fresh.parentSpanID == nil)

            // A refused write: 403 is an answer; the access check says no, and no span failed.
            tracer.clearFinishedSpans()
            let refused = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("admin"))", json: #"{"title":"x"}"#
            )
            #expect(refused.status == .forbidden)
            let spans = tracer.finishedSpans
            #expect(spans.first { $0.kind == .server }.map { Self.texts($0)["http.response.status_code"] } == "403")
            #expect(!spans.contains { $0.status?.code == .error })

            // A method of no standard: its own label, never the client's text.
            tracer.clearFinishedSpans()
            _ = try await client.execute(uri: "/api/now/table/incident", method: HTTPRequest.Method("FUZZED")!, headers: .john, body: nil)
            let odd = try #require(tracer.finishedSpans.first { $0.kind == .server })
            #expect(Self.texts(odd)["http.request.method"] == "_OTHER")
            #expect(!odd.operationName.contains("FUZZED"))
        }
    }

    @Test("a database that is down: the request's span and its storage span are marked failed (503)")
    func failedStorage() async throws {
        let tracer = InMemoryTracer()
        try await OutageTests.withFaultyRouter(configure: { $0.tracer = tracer }) { client, faulty throws in
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").status == .ok)
            faulty.setDown(true)
            tracer.clearFinishedSpans()
            // Another page than the one just read (a page read again may be answered as kept: ``ListPages``).
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=2").status == .serviceUnavailable)
            let spans = tracer.finishedSpans
            let server = try #require(spans.first { $0.kind == .server })
            #expect(server.status?.code == .error)
            #expect(spans.contains { $0.operationName == "db.read" && $0.status?.code == .error && Self.texts($0)["error.type"] != nil })
        }
    }

    @Test("--otel-endpoint: a collector's base URL gets /v1/traces; anything else is refused with a sentence")
    func endpoints() throws {
        #expect(try TraceExport.tracesURL("http://localhost:4318") == "http://localhost:4318/v1/traces")
        #expect(try TraceExport.tracesURL("https://collector.example.com/") == "https://collector.example.com/v1/traces")
        #expect(try TraceExport.tracesURL("http://collector:4318/custom/traces") == "http://collector:4318/custom/traces")
        for bad in ["localhost:4318", "ftp://collector", "http://", "http://user:secret@collector:4318", "http://collector?x=1", "", "not a url"] {
            #expect(throws: StartupFailure.self, "\(bad)") { try TraceExport.tracesURL(bad) }
        }
    }
}
