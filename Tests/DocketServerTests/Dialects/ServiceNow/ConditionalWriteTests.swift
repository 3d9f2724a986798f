import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

@testable import DocketServer

/// The Table API's conditional writes (`ETag`, `If-Match`, `If-None-Match`) and `Idempotency-Key`, which offline
/// clients rely on: a write applies only to the version it was based on, and a write repeated after a lost answer
/// is answered again, never written twice.
@Suite("Conditional and idempotent writes")
struct ConditionalWriteTests {
    static func with(_ extra: [(String, String)], as headers: HTTPFields = .john) -> HTTPFields {
        var fields = headers
        for (name, value) in extra { fields[HTTPField.Name(name)!] = value }
        return fields
    }

    static func incidents(_ client: any TestClientProtocol, _ text: String) async throws -> Int {
        let query = text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text
        return Int(try await client.get("/api/now/table/incident?sysparm_query=short_description=\(query)&sysparm_limit=1", .admin)
            .headers[.xTotalCount] ?? "") ?? -1
    }

    @Test("GET carries the version as a strong ETag (also with sysparm_fields leaving sys_mod_count out); If-None-Match of it is a 304; writes answer the new one")
    func etags() async throws {
        try await TestApp.withRouter { client in
            let path = "/api/now/table/incident/\(Demo.incident1)"
            let read = try await client.get(path)
            let modCount = try read.result.string("sys_mod_count")
            #expect(read.headers[.eTag] == "\"\(modCount)\"")
            #expect(try await client.get(path + "?sysparm_fields=number").headers[.eTag] == "\"\(modCount)\"")
            let unchanged = try await client.get(path, Self.with([("If-None-Match", "\"\(modCount)\"")]))
            #expect(unchanged.status == .notModified)
            #expect(unchanged.body.readableBytes == 0)
            #expect(try await client.get(path, Self.with([("If-None-Match", "\"999\"")])).status == .ok)
            let updated = try await client.send(.patch, path + "?sysparm_fields=number", json: #"{"comments":"a note"}"#)
            #expect(updated.status == .ok)
            #expect(updated.headers[.eTag] == "\"\((Int(modCount) ?? 0) + 1)\"")
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"etag on create"}"#)
            #expect(created.headers[.eTag] == "\"0\"")
            // Lists have no single version.
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1").headers[.eTag] == nil)
        }
    }

    @Test("If-Match: the write applies to that version only; another is a 412 with the current record and its ETag, and writes nothing; * and no header apply to any")
    func ifMatch() async throws {
        try await TestApp.withRouter { client in
            let path = "/api/now/table/incident/\(Demo.incident1)"
            let version = try await client.get(path).headers[.eTag] ?? ""
            let first = try await client.send(.patch, path, json: #"{"short_description":"mine"}"#, headers: Self.with([("If-Match", version)]))
            #expect(first.status == .ok)
            let newer = first.headers[.eTag] ?? ""
            #expect(newer != version)
            // Another client that read the old version.
            let stale = try await client.send(.put, path, json: #"{"short_description":"theirs"}"#, headers: Self.with([("If-Match", version)], as: .beth))
            #expect(stale.status == .preconditionFailed)
            #expect(stale.errorMessage == "Precondition Failed")
            #expect(try stale.json["status"] == .string("failure"))
            #expect(try stale.json["result"]?.string("short_description") == "mine")
            #expect(stale.headers[.eTag] == newer)
            #expect(try await client.get(path).result.string("short_description") == "mine")
            // A weak tag never matches a write; * and no header do.
            #expect(try await client.send(.patch, path, json: #"{"short_description":"weak"}"#, headers: Self.with([("If-Match", "W/\(newer)")])).status == .preconditionFailed)
            #expect(try await client.send(.patch, path, json: #"{"short_description":"any"}"#, headers: Self.with([("If-Match", "*")])).status == .ok)
            #expect(try await client.send(.patch, path, json: #"{"short_description":"blind"}"#).status == .ok)
            // Delete: only the version named.
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"to delete"}"#)
            let id = try created.result.string("sys_id")
            let target = "/api/now/table/incident/\(id)"
            _ = try await client.send(.patch, target, json: #"{"comments":"changed meanwhile"}"#, headers: .beth)
            let refused = try await client.execute(uri: target, method: .delete, headers: Self.with([("If-Match", "\"0\"")]), body: nil)
            #expect(refused.status == .preconditionFailed)
            #expect(try refused.json["result"]?.string("sys_mod_count") == "1")
            #expect(try await client.get(target).status == .ok)
            let deleted = try await client.execute(uri: target, method: .delete, headers: Self.with([("If-Match", "\"1\"")]), body: nil)
            #expect(deleted.status == .noContent)
            #expect(try await client.get(target).status == .notFound)
            // A record that is gone is a 404 with or without If-Match.
            #expect(try await client.send(.patch, target, json: "{}", headers: Self.with([("If-Match", "\"1\"")])).status == .notFound)
        }
    }

    @Test("bad If-Match and Idempotency-Key headers are 400s that write nothing; If-Match on a record one may not read is a 404")
    func badHeaders() async throws {
        try await TestApp.withRouter { client in
            let path = "/api/now/table/incident/\(Demo.incident1)"
            for value in ["7", "\"x\"", "\"-1\"", "\"1\", \"2\"", "\"99999999999999999999999\"", String(repeating: "\"", count: 300)] {
                let response = try await client.send(.patch, path, json: #"{"short_description":"bad header"}"#, headers: Self.with([("If-Match", value)]))
                #expect(response.status == .badRequest, "If-Match: \(value.prefix(30))")
                #expect(response.errorMessage == "Invalid If-Match")
            }
            for value in ["", "\"\"", "has space", String(repeating: "k", count: 256), "tab\tkey", "quote\"inside", "é"] {
                let response = try await client.send(
                    .post, "/api/now/table/incident", json: #"{"short_description":"bad header"}"#, headers: Self.with([("Idempotency-Key", value)])
                )
                #expect(response.status == .badRequest, "Idempotency-Key: \(value.prefix(30))")
                #expect(response.errorMessage == "Invalid Idempotency-Key")
            }
            #expect(try await Self.incidents(client, "bad header") == 0)
            #expect(try await client.get(path).result.string("short_description") != "bad header")
            // abel.tuter may not read INC0010003's neighbour records: no version is revealed.
            let hidden = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident3)", json: #"{"short_description":"x"}"#,
                headers: Self.with([("If-Match", "\"0\"")], as: .basic("abel.tuter", "password"))
            )
            #expect(hidden.status == .notFound)
            #expect(try hidden.json["result"] == nil)
        }
    }

    @Test("Idempotency-Key: the same request again is answered as the first (Idempotent-Replayed), written once; another body with the key is a 422; keys are per user")
    func idempotency() async throws {
        let storage = Mutex<(any Storage)?>(nil)
        try await TestApp.withRouter(configure: { configuration in
            configuration.wrapStorage = { opened in
                storage.withLock { $0 = opened }
                return opened
            }
        }) { client in
            let body = #"{"short_description":"offline create"}"#
            let headers = Self.with([("Idempotency-Key", "key-1")])
            let first = try await client.send(.post, "/api/now/table/incident", json: body, headers: headers)
            #expect(first.status == .created)
            #expect(first.headers[.idempotentReplayed] == nil)
            let again = try await client.send(.post, "/api/now/table/incident", json: body, headers: headers)
            #expect(again.status == .created)
            #expect(again.headers[.idempotentReplayed] == "true")
            #expect(again.body == first.body)
            #expect(again.headers[.location] == first.headers[.location] && again.headers[.eTag] == first.headers[.eTag])
            #expect(try await Self.incidents(client, "offline create") == 1)
            // The same values with the members in another order (and other spacing) are the same request.
            let reordered = try await client.send(
                .post, "/api/now/table/incident", json: #"{ "urgency" : "2", "short_description":"two members"}"#,
                headers: Self.with([("Idempotency-Key", "key-order")])
            )
            let swapped = try await client.send(
                .post, "/api/now/table/incident", json: #"{"short_description":"two members","urgency":"2"}"#,
                headers: Self.with([("Idempotency-Key", "key-order")])
            )
            #expect(reordered.status == .created && swapped.headers[.idempotentReplayed] == "true")
            #expect(try await Self.incidents(client, "two members") == 1)
            // The key with another request.
            let other = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"other"}"#, headers: headers)
            #expect(other.status == .unprocessableContent)
            #expect(other.errorMessage == "Idempotency-Key reused")
            #expect(try await Self.incidents(client, "other") == 0)
            // A key older than 24 hours, not yet pruned, is free again (a new write, not a replay or an error).
            try await #require(storage.withLock { $0 }).write { db in
                try await db.run("UPDATE docket_idempotency SET created = 0 WHERE idempotency_key = 'key-1'")
            }
            let afterRetention = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"other"}"#, headers: headers)
            #expect(afterRetention.status == .created && afterRetention.headers[.idempotentReplayed] == nil)
            #expect(try await Self.incidents(client, "other") == 1)
            // The same key from another user is that user's own.
            let beths = try await client.send(.post, "/api/now/table/incident", json: body, headers: Self.with([("Idempotency-Key", "key-1")], as: .beth))
            #expect(beths.status == .created && beths.headers[.idempotentReplayed] == nil)
            #expect(try await Self.incidents(client, "offline create") == 2)
            // Updates and deletes: a repeat after the record moved on is the first answer, not a 412 or a 404.
            let id = try first.result.string("sys_id")
            let path = "/api/now/table/incident/\(id)"
            let update = Self.with([("Idempotency-Key", "key-2"), ("If-Match", "\"0\"")])
            let patched = try await client.send(.patch, path, json: #"{"comments":"typed offline"}"#, headers: update)
            #expect(patched.status == .ok)
            let repeated = try await client.send(.patch, path, json: #"{"comments":"typed offline"}"#, headers: update)
            #expect(repeated.status == .ok && repeated.headers[.idempotentReplayed] == "true" && repeated.body == patched.body)
            let journal = try await client.get("/api/now/table/sys_journal_field?sysparm_query=element_id=\(id)", .admin)
            #expect(try journal.results.count == 1)
            let delete = Self.with([("Idempotency-Key", "key-3")])
            #expect(try await client.execute(uri: path, method: .delete, headers: delete, body: nil).status == .noContent)
            let deletedAgain = try await client.execute(uri: path, method: .delete, headers: delete, body: nil)
            #expect(deletedAgain.status == .noContent && deletedAgain.headers[.idempotentReplayed] == "true")
            // A client-chosen sys_id: the create of an offline record needs no id mapping.
            let chosen = "0123456789abcdef0123456789abcdef"
            let withID = Self.with([("Idempotency-Key", "key-4")])
            let made = try await client.send(.post, "/api/now/table/incident", json: #"{"sys_id":"\#(chosen)","short_description":"chosen id"}"#, headers: withID)
            #expect(try made.status == .created && made.result.string("sys_id") == chosen)
            let madeAgain = try await client.send(.post, "/api/now/table/incident", json: #"{"sys_id":"\#(chosen)","short_description":"chosen id"}"#, headers: withID)
            #expect(madeAgain.status == .created && madeAgain.headers[.idempotentReplayed] == "true")
        }
    }

    @Test("ten requests with one key at once write once, and every answer is the first one's", .timeLimit(.minutes(1)))
    func concurrentKey() async throws {
        try await TestApp.withRouter { client in
            let headers = Self.with([("Idempotency-Key", "same-key-at-once")])
            let answers = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let answer = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"at once"}"#, headers: headers)
                        return (answer.status, try answer.result.string("sys_id"))
                    }
                }
                return try await group.reduce(into: [(HTTPResponse.Status, String)]()) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.0 == .created })
            #expect(Set(answers.map(\.1)).count == 1)
            #expect(try await Self.incidents(client, "at once") == 1)
        }
    }

    @Test("the Batch API honours If-Match and Idempotency-Key per request")
    func batch() async throws {
        try await TestApp.withRouter { client in
            func batch(_ requests: String) async throws -> [JSONValue] {
                let response = try await client.send(.post, "/api/now/v1/batch", json: #"{"batch_request_id":"b","rest_requests":[\#(requests)]}"#)
                #expect(response.status == .ok)
                return try response.json["serviced_requests"]?.arrayValue ?? []
            }
            let create = #"{"id":"c","method":"POST","url":"/api/now/table/incident","headers":[{"name":"Content-Type","value":"application/json"},{"name":"Idempotency-Key","value":"batch-key"}],"body":"\#(BatchAPITests.base64(#"{"short_description":"batched offline"}"#))"}"#
            let first = try await batch(create)
            let again = try await batch(create)
            #expect(first.first?["status_code"] == .number(201) && again.first?["status_code"] == .number(201))
            #expect(try await Self.incidents(client, "batched offline") == 1)
            let id = try BatchAPITests.decode(try #require(first.first))["result"]?.string("sys_id") ?? ""
            let stale = #"{"id":"u","method":"PATCH","url":"/api/now/table/incident/\#(id)","headers":[{"name":"Content-Type","value":"application/json"},{"name":"If-Match","value":"\"5\""}],"body":"\#(BatchAPITests.base64(#"{"short_description":"stale"}"#))"}"#
            let refused = try await batch(stale)
            #expect(refused.first?["status_code"] == .number(412))
            #expect(try await client.get("/api/now/table/incident/\(id)").result.string("short_description") == "batched offline")
        }
    }

    @Test("the web UI's comment form with an Idempotency-Key (a comment typed offline, sent again): added once; the key with another text is a 422; a bad key is a 400")
    func webComment() async throws {
        try await TestApp.withRouter { client in
            var john = WebBrowser(client)
            try await john.signIn()
            let path = "/app/item/incident/\(Demo.incident1)"
            try await john.get(path)
            func post(_ text: String, key: String) async throws -> TestResponse {
                var headers = john.cookieHeader
                headers[.contentType] = "application/x-www-form-urlencoded"
                headers[HTTPField.Name("Idempotency-Key")!] = key
                let body = "csrf=\(john.csrf)&element=comments&text=" + (text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text)
                return try await client.execute(uri: path + "/comment", method: .post, headers: headers, body: ByteBuffer(string: body))
            }
            #expect(try await post("sent from the outbox", key: "outbox-1").status == .seeOther)
            #expect(try await post("sent from the outbox", key: "outbox-1").status == .seeOther)
            #expect(try await post("another text", key: "outbox-1").status == .unprocessableContent)
            #expect(try await post("bad key", key: "has space").status == .badRequest)
            let journal = try await client.get("/api/now/table/sys_journal_field?sysparm_query=element_id=\(Demo.incident1)^value=sent from the outbox", .admin)
            #expect(try journal.results.count == 1)
            let others = try await client.get("/api/now/table/sys_journal_field?sysparm_query=element_id=\(Demo.incident1)^valueINanother text,bad key", .admin)
            #expect(try others.results.isEmpty)
        }
    }
}
