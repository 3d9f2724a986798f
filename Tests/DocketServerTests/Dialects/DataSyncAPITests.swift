import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The DataSync showcase's task API at `/graphql`, with the operations its clients send, verbatim.
@Suite("DataSync task API")
struct DataSyncAPITests {
    static let fragment = "fragment TaskFields on Task { __typename id title version description status }"

    /// An Apollo-style POST: `{"operationName", "query", "variables"}`, the fragment appended to the document.
    static func apollo(
        _ client: any TestClientProtocol, _ operationName: String?, _ document: String, variables: String = "{}",
        headers: HTTPFields = .john
    ) async throws -> TestResponse {
        var body: [(String, JSONValue)] = [("query", .string(document)), ("variables", try JSONValue.parse(Array(variables.utf8)))]
        if let operationName { body.insert(("operationName", .string(operationName)), at: 0) }
        return try await client.execute(
            uri: "/graphql", method: .post, headers: .json(headers), body: ByteBuffer(bytes: JSONValue(members: body).serialized())
        )
    }

    @Test("the iOS showcase's operations work verbatim: create (forced OPEN, version 1), list, delete")
    func showcase() async throws {
        try await TestApp.withRouter { client in
            let create = try await Self.apollo(
                client, "createTask",
                "mutation createTask($title: String!, $description: String!, $status: TaskStatus!) { createTask(title: $title, description: $description, status: $status) { __typename ...TaskFields } }\n"
                    + Self.fragment,
                variables: #"{"title": "Buy milk", "description": "Semi-skimmed", "status": "COMPLETE"}"#
            )
            #expect(create.status == .ok)
            let created = try create.json["data"]?["createTask"]
            #expect(created?["__typename"]?.stringValue == "Task")
            #expect(created?["title"]?.stringValue == "Buy milk")
            #expect(created?["status"]?.stringValue == "OPEN")
            #expect(created?["version"]?.intValue == 1)
            let id = created?["id"]?.stringValue ?? ""
            let all = try await Self.apollo(client, "allTasks", "query allTasks { allTasks { __typename ...TaskFields } }\n" + Self.fragment)
            let tasks = try all.json["data"]?["allTasks"]?.arrayValue ?? []
            #expect(tasks.contains { $0["id"]?.stringValue == id && $0["description"]?.stringValue == "Semi-skimmed" })
            // The same task through the Table API: one engine.
            let record = try await client.get("/api/now/table/datasync_task/\(id)")
            #expect(try record.result.string("title") == "Buy milk")
            let delete = try await Self.apollo(
                client, "deleteTask", "mutation deleteTask($id: ID!) { deleteTask(id: $id) }", variables: #"{"id": "\#(id)"}"#
            )
            #expect(try delete.json["data"]?["deleteTask"]?.stringValue == id)
            let again = try await Self.apollo(
                client, nil, "mutation deleteTask($id: ID!) { deleteTask(id: $id) }", variables: #"{"id": "\#(id)"}"#
            )
            #expect(try again.json["errors"]?.arrayValue?.first?["message"]?.stringValue == "Cannot delete object \(id)")
        }
    }

    @Test("the Ionic client's updateTask checks the version: a stale one is an OffixConflict with both states")
    func versionConflict() async throws {
        try await TestApp.withRouter { client in
            let created = try await Self.apollo(
                client, nil, #"mutation { createTask(title: "A", description: "d") { id version } }"#
            ).json["data"]?["createTask"]
            let id = created?["id"]?.stringValue ?? ""
            let update = "mutation updateTask($description: String, $id: ID!, $title: String, $version: Int!, $status: TaskStatus) { updateTask(description: $description, id: $id, title: $title, version: $version, status: $status) { id title description version status } }"
            let first = try await Self.apollo(
                client, "updateTask", update, variables: #"{"id": "\#(id)", "title": "B", "version": 1, "status": "ASSIGNED"}"#
            )
            let updated = try first.json["data"]?["updateTask"]
            #expect(updated?["version"]?.intValue == 2)
            #expect(updated?["title"]?.stringValue == "B")
            #expect(updated?["status"]?.stringValue == "ASSIGNED")
            // Another client still holding version 1.
            let stale = try await Self.apollo(
                client, "updateTask", update, variables: #"{"id": "\#(id)", "title": "C", "version": 1}"#, headers: .beth
            )
            #expect(stale.status == .ok)
            let json = try stale.json
            #expect(json["data"]?["updateTask"] == .null)
            let error = json["errors"]?.arrayValue?.first
            #expect(error?["message"]?.stringValue == "OffixConflict")
            #expect(error?["path"]?.arrayValue?.first?.stringValue == "updateTask")
            #expect(error?["extensions"]?["code"]?.stringValue == "INTERNAL_SERVER_ERROR")
            let info = error?["extensions"]?["exception"]?["conflictInfo"]
            #expect(info?["serverState"]?["title"]?.stringValue == "B")
            #expect(info?["serverState"]?["version"]?.intValue == 2)
            #expect(info?["clientState"]?["title"]?.stringValue == "C")
            #expect(info?["clientState"]?["version"]?.intValue == 1)
            // Nothing was written.
            let now = try await Self.apollo(client, nil, #"{ getTask(id: "\#(id)") { title version } }"#)
            #expect(try now.json["data"]?["getTask"]?["title"]?.stringValue == "B")
            let missing = try await Self.apollo(
                client, "updateTask", update, variables: #"{"id": "nope", "title": "C", "version": 1}"#
            )
            #expect(try missing.json["errors"]?.arrayValue?.first?["message"]?.stringValue == "Invalid ID for task object: nope")
        }
    }

    @Test("allTasks: first is a limit, after an offset given as a string (only with first)")
    func paging() async throws {
        try await TestApp.withRouter { client in
            for index in 0..<5 {
                _ = try await Self.apollo(client, nil, #"mutation { createTask(title: "T\#(index)", description: "") { id } }"#)
            }
            let all = try await Self.apollo(client, nil, "{ allTasks { title } }").json["data"]?["allTasks"]?.arrayValue ?? []
            let page = try await Self.apollo(
                client, "allTasks", "query allTasks($first: Int) { allTasks(first: $first, after: \"1\") { title } }",
                variables: #"{"first": 2}"#
            ).json["data"]?["allTasks"]?.arrayValue ?? []
            #expect(page.map { $0["title"] } == Array(all.dropFirst().prefix(2)).map { $0["title"] })
            let afterOnly = try await Self.apollo(client, nil, #"{ allTasks(after: "3") { title } }"#).json["data"]?["allTasks"]?.arrayValue
            #expect(afterOnly?.count == all.count)
        }
    }

    @Test("the dialect's own boundary: 401 in GraphQL's shape, bearer tokens, Basic; no ServiceNow envelope")
    func authentication() async throws {
        try await TestApp.withRouter { client in
            let document = ByteBuffer(string: #"{"query":"{ allTasks { id } }"}"#)
            let anonymous = try await client.execute(uri: "/graphql", method: .post, headers: .json([:]), body: document)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
            #expect(try anonymous.json["errors"]?.arrayValue?.first?["extensions"]?["code"]?.stringValue == "UNAUTHENTICATED")
            #expect(try anonymous.json["error"] == nil)
            let forged = try await client.execute(uri: "/graphql", method: .post, headers: .json(.bearer("forged")), body: document)
            #expect(forged.status == .unauthorized)
            #expect(forged.headers[.wwwAuthenticate]?.contains("invalid_token") == true)
            let wrong = try await client.execute(uri: "/graphql", method: .post, headers: .json(.basic("john.doe", "wrong")), body: document)
            #expect(wrong.status == .unauthorized)
            let token = try await client.passwordGrant().string("access_token")
            let bearer = try await client.execute(uri: "/graphql", method: .post, headers: .json(.bearer(token)), body: document)
            #expect(bearer.status == .ok)
            #expect(try bearer.json["data"]?["allTasks"] != nil)
            // No session cookie: each request carries its credentials.
            #expect(bearer.headers[.setCookie] == nil)
        }
    }

    @Test("bad input: 400 for unparsable bodies and documents, mutations over GET are 405, subscriptions need a WebSocket")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            for body in ["{nope", "[]", #"{"query": 5}"#, #"{"query": "{ allTasks { nope } }"}"#, #"{"query": "{ allTasks "}"#,
                         #"{"query": "subscription add { taskAdded { id } }"}"#, #"{"query": "{ allTasks { id } }", "variables": 3}"#]
            {
                let response = try await client.execute(uri: "/graphql", method: .post, headers: .json(.john), body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(try response.json["errors"]?.arrayValue?.isEmpty == false, "\(body)")
            }
            let get = try await client.get("/graphql?query=" + "{ allTasks { id } }".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
            #expect(get.status == .ok)
            let mutation = try await client.get(
                "/graphql?query=" + #"mutation { deleteTask(id: "x") }"#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            )
            #expect(mutation.status == .methodNotAllowed)
            #expect(mutation.headers[.allow] == "POST")
            // A status the enum does not know (written through the Table API) reads as null, not as an error.
            let odd = try await client.send(.post, "/api/now/table/datasync_task", json: #"{"title":"odd","status":"WEIRD"}"#)
            let id = try odd.result.string("sys_id")
            let read = try await Self.apollo(client, nil, #"{ getTask(id: "\#(id)") { title status } }"#)
            #expect(try read.json["data"]?["getTask"]?["status"] == .null)
            #expect(try read.json["errors"] == nil)
            // A version beyond what GraphQL's Int holds (an admin may write any sys_mod_count) does not break reads.
            _ = try await client.send(
                .patch, "/api/now/table/datasync_task/\(id)?sysparm_suppress_auto_sys_field=true",
                json: #"{"title":"odd, again","sys_mod_count":"9223372036854775807"}"#, headers: .admin
            )
            let huge = try await Self.apollo(client, nil, #"{ getTask(id: "\#(id)") { version } }"#)
            #expect(try huge.json["data"]?["getTask"]?["version"]?.intValue == Int(Int32.max))
            // The subscription refusal says what to do instead.
            let subscription = try await Self.apollo(client, nil, "subscription add { taskAdded { id } }")
            #expect(try subscription.json["errors"]?[0]?["message"]?.stringValue?.contains("open one to this URL") == true)
        }
    }

    @Test("concurrent updates with the same version: exactly one wins, the others conflict", .timeLimit(.minutes(3)))
    func concurrentUpdates() async throws {
        try await TestApp.withRouter { client in
            let id = try await Self.apollo(client, nil, #"mutation { createTask(title: "race", description: "") { id } }"#)
                .json["data"]?["createTask"]?["id"]?.stringValue ?? ""
            let outcomes = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<6 {
                    group.addTask {
                        let response = try await Self.apollo(
                            client, nil, #"mutation { updateTask(id: "\#(id)", title: "r\#(index)", version: 1) { version } }"#
                        )
                        return try response.json["errors"]?.arrayValue?.first?["message"]?.stringValue ?? "ok"
                    }
                }
                var all: [String] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.filter { $0 == "ok" }.count == 1)
            #expect(outcomes.filter { $0 == "OffixConflict" }.count == 5)
        }
    }
}
