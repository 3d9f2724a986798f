import DocketModel
import Foundation
import GraphQL
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// `POST` and `GET /api/now/graphql`: ServiceNow's GraphQL API over the engine.
@Suite("GraphQL API (NowData)")
struct GraphQLAPITests {
    static func graphql(
        _ client: any TestClientProtocol, _ query: String, variables: String? = nil, headers: HTTPFields = .john
    ) async throws -> TestResponse {
        var body = JSONValue(members: [("query", .string(query))])
        if let variables, case .object(var members) = body {
            members["variables"] = try JSONValue.parse(Array(variables.utf8))
            body = .object(members)
        }
        return try await client.execute(
            uri: "/api/now/graphql", method: .post, headers: .json(headers), body: ByteBuffer(bytes: body.serialized())
        )
    }

    @Test("the NowData documentation's query works verbatim: active articles the caller may read, most recently published first")
    func nowDataDocument() async throws {
        try await TestApp.withRouter { client in
            let document = #"{ GlideRecord_Query { kb_knowledge(queryConditions: "active=true^ORDERBYpublishedDESC" pagination: { limit: 10, offset: 0 }) { _results { sys_id { value }, number { displayValue }, short_description { displayValue }, author { displayValue } published { displayValue } } } } }"#
            for headers in [HTTPFields.john, .abel] {
                let response = try await Self.graphql(client, document, headers: headers)
                #expect(response.status == .ok)
                let json = try response.json
                #expect(json["errors"] == nil)
                let results = json["data"]?["GlideRecord_Query"]?["kb_knowledge"]?["_results"]?.arrayValue ?? []
                // The same rows, in the same order, as the Table API gives this caller.
                let table = try await client.get(
                    "/api/now/table/kb_knowledge?sysparm_query=active%3Dtrue%5EORDERBYDESCpublished&sysparm_limit=10&sysparm_fields=sys_id,published",
                    headers
                ).results
                #expect(!results.isEmpty)
                #expect(results.map { $0["sys_id"]?["value"]?.stringValue } == table.map { $0["sys_id"]?.stringValue })
                let published = table.map { $0.string("published") }
                #expect(published == published.sorted(by: >))
                #expect(results.allSatisfy { !($0["author"]?["displayValue"]?.stringValue ?? "").isEmpty })
                #expect(results.allSatisfy { ($0["number"]?["displayValue"]?.stringValue ?? "").hasPrefix("KB") })
            }
        }
    }

    @Test("wrappers: value and displayValue, typed scalars, choices as strings with their list, references walked")
    func wrappers() async throws {
        try await TestApp.withRouter { client in
            let response = try await Self.graphql(
                client,
                """
                query ($qc: String!) { GlideRecord_Query { incident(queryConditions: $qc, pagination: {limit: 1, offset: 0}) {
                  _rowCount _results { number { value displayValue label } state { value displayValue _choices { value displayValue } }
                  priority { value } active { value } sys_mod_count { value } reassignment_count { value }
                  assigned_to { value displayValue _reference { email { value } user_name { value } } } } } } }
                """,
                variables: #"{"qc": "number=INC0010001"}"#
            )
            let json = try response.json
            #expect(json["errors"] == nil)
            let result = json["data"]?["GlideRecord_Query"]?["incident"]
            #expect(result?["_rowCount"]?.intValue == 1)
            let row = result?["_results"]?[0]
            #expect(row?["number"]?["value"]?.stringValue == "INC0010001")
            #expect(row?["number"]?["label"]?.stringValue == "Number")
            #expect(row?["state"]?["value"]?.stringValue == "2")
            #expect(row?["state"]?["displayValue"]?.stringValue == "In Progress")
            let choices = row?["state"]?["_choices"]?.arrayValue ?? []
            #expect(choices.first?["value"]?.stringValue == "")
            #expect(choices.contains { $0["displayValue"]?.stringValue == "Closed" })
            #expect(row?["priority"]?["value"]?.stringValue != nil)
            #expect(row?["active"]?["value"] == .bool(true))
            #expect(row?["sys_mod_count"]?["value"]?.intValue != nil)
            #expect(row?["reassignment_count"]?["value"]?.intValue != nil)
            #expect(row?["assigned_to"]?["displayValue"]?.stringValue == "John Doe")
            #expect(row?["assigned_to"]?["_reference"]?["user_name"]?["value"]?.stringValue == "john.doe")
        }
    }

    @Test("access: rows, counts and referenced records follow the caller's read access")
    func access() async throws {
        try await TestApp.withRouter { client in
            // Abel may read the incidents he is involved in; the problem one of them points to is not his.
            let problem = try await client.send(
                .post, "/api/now/table/problem", json: #"{"short_description":"not abel's"}"#, headers: .admin
            ).result.string("sys_id")
            _ = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident1)", json: #"{"problem_id":"\#(problem)"}"#, headers: .admin
            )
            let response = try await Self.graphql(
                client,
                "{ GlideRecord_Query { incident { _rowCount _results { sys_id { value } problem_id { value _reference { short_description { value } } } } } } }",
                headers: .abel
            )
            let json = try response.json
            #expect(json["errors"] == nil)
            let result = json["data"]?["GlideRecord_Query"]?["incident"]
            let ids = result?["_results"]?.arrayValue?.compactMap { $0["sys_id"]?["value"]?.stringValue } ?? []
            let tableAPI = try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .abel)
            #expect(Set(ids) == Set(try tableAPI.results.map { $0.string("sys_id") }))
            #expect(result?["_rowCount"]?.intValue == Int(tableAPI.headers[HTTPField.Name("X-Total-Count")!] ?? ""))
            #expect(ids.contains(Demo.incident1) && !ids.contains(Demo.incident3))
            let first = result?["_results"]?.arrayValue?.first { $0["sys_id"]?["value"]?.stringValue == Demo.incident1 }
            #expect(first?["problem_id"]?["value"]?.stringValue == problem)
            #expect(first?["problem_id"]?["_reference"] == .null)
            // Passwords are not in the schema at all.
            let password = try await Self.graphql(client, "{ GlideRecord_Query { sys_user { _results { user_password { value } } } } }", headers: .admin)
            #expect(try password.json["errors"]?.arrayValue?.isEmpty == false)
        }
    }

    @Test("mutations insert, update and delete through the engine, aliases run several tables at once")
    func mutations() async throws {
        try await TestApp.withRouter { client in
            let insert = try await Self.graphql(
                client,
                #"mutation { GlideRecord_Mutation { insert_incident(short_description: "from graphql", urgency: "1") { _rowCount _results { sys_id { value } number { value } urgency { value } } } } }"#
            )
            let inserted = try insert.json["data"]?["GlideRecord_Mutation"]?["insert_incident"]?["_results"]?[0]
            let id = inserted?["sys_id"]?["value"]?.stringValue ?? ""
            #expect(inserted?["number"]?["value"]?.stringValue?.hasPrefix("INC") == true)
            #expect(inserted?["urgency"]?["value"]?.stringValue == "1")
            let update = try await Self.graphql(
                client,
                #"mutation ($id: String!) { GlideRecord_Mutation { update_incident(sys_id: $id, work_notes: "checked the router", short_description: "edited") { _results { short_description { value } } } } }"#,
                variables: #"{"id": "\#(id)"}"#
            )
            #expect(try update.json["data"]?["GlideRecord_Mutation"]?["update_incident"]?["_results"]?[0]?["short_description"]?["value"]?.stringValue == "edited")
            let stored = try await client.get("/api/now/table/incident/\(id)?sysparm_fields=short_description,work_notes&sysparm_display_value=true")
            #expect(try stored.result.string("short_description") == "edited")
            #expect(try stored.result.string("work_notes").contains("checked the router"))
            // Aliases: two tables (and two filters of one) in one request.
            let aliased = try await Self.graphql(
                client,
                #"{ GlideRecord_Query { mine: incident(sys_id: "\#(id)") { _results { number { value } } } p: problem(omitCount: true, pagination: {limit: 1}) { _rowCount _results { number { value } } } } }"#
            )
            let data = try aliased.json["data"]?["GlideRecord_Query"]
            #expect(data?["mine"]?["_results"]?.arrayValue?.count == 1)
            #expect(data?["p"]?["_rowCount"] == .null)
            #expect(data?["p"]?["_results"]?.arrayValue?.count == 1)
            let delete = try await Self.graphql(
                client, #"mutation { GlideRecord_Mutation { delete_incident(sys_id: "\#(id)") { modified_count sys_id } } }"#
            )
            #expect(try delete.json["data"]?["GlideRecord_Mutation"]?["delete_incident"]?["sys_id"]?.stringValue == id)
            #expect(try await client.get("/api/now/table/incident/\(id)").status == .notFound)
            // A refused write is an in-band error, and writes nothing.
            let refused = try await Self.graphql(
                client, #"mutation { GlideRecord_Mutation { insert_incident(short_description: "abel may not") { _rowCount } } }"#,
                headers: .abel
            )
            #expect(refused.status == .ok)
            #expect(try refused.json["errors"]?[0]?["message"]?.stringValue?.contains("ACL Exception Insert Failed") == true)
            let none = try await client.get("/api/now/table/incident?short_description=abel%20may%20not")
            #expect(try none.results.isEmpty)
        }
    }

    @Test("bad documents and arguments are in-band errors with HTTP 200; no credentials is a 401; GET works too")
    func badInput() async throws {
        try await TestApp.withRouter { client in
            let cases: [(String, String)] = [
                ("{ GlideRecord_Query { incident { _results { nope { value } } } } }", "ValidationError"),
                ("{ GlideRecord_Query { incident { _results { ", "InvalidSyntax"),
                (#"{ GlideRecord_Query { incident(queryConditions: "active=true^ORDERBY") { _rowCount } } }"#, "DataFetchingException"),
                ("{ GlideRecord_Query { incident(pagination: {limit: 100000000}) { _rowCount } } }", "DataFetchingException"),
                ("{ GlideRecord_Query { incident(pagination: {offset: -1}) { _rowCount } } }", "DataFetchingException"),
                ("{ GlideRecord_Query { no_such_table { _rowCount } } }", "ValidationError"),
                (
                    "{ GlideRecord_Query { incident { _results { caller_id { "
                        + String(repeating: "_reference { manager { ", count: 8) + "value" + String(repeating: " } }", count: 8)
                        + " } } } } }",
                    "ValidationError"
                ),
                ("", "InvalidSyntax"),
                // Deep enough to overflow a recursive parser: refused before parsing.
                (String(repeating: "{", count: 100_000), "InvalidSyntax"),
                ("query ($v: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[String]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]) { GlideRecord_Query { incident { _rowCount } } }", "InvalidSyntax"),
            ]
            for (document, type) in cases {
                let response = try await Self.graphql(client, document)
                #expect(response.status == .ok, "\(document)")
                let errors = try response.json["errors"]?.arrayValue ?? []
                #expect(!errors.isEmpty, "\(document)")
                #expect(errors.first?["errorType"]?.stringValue == type, "\(document)")
            }
            // Brackets inside strings and comments do not count.
            let quoted = try await Self.graphql(
                client,
                "{ GlideRecord_Query { incident(queryConditions: \"short_description=" + String(repeating: "{", count: 200)
                    + "\") { _rowCount } } } # " + String(repeating: "(", count: 200)
            )
            #expect(try quoted.json["data"]?["GlideRecord_Query"]?["incident"]?["_rowCount"]?.intValue == 0)
            let notJSON = try await client.execute(
                uri: "/api/now/graphql", method: .post, headers: .json(.john), body: ByteBuffer(string: "{nope")
            )
            #expect(notJSON.status == .ok)
            #expect(try notJSON.json["errors"] != nil)
            let anonymous = try await client.execute(
                uri: "/api/now/graphql", method: .post, headers: .json([:]),
                body: ByteBuffer(string: #"{"query":"{ GlideRecord_Query { incident { _rowCount } } }"}"#)
            )
            #expect(anonymous.status == .unauthorized)
            let get = try await client.get(
                "/api/now/graphql?query=" + "{ GlideRecord_Query { incident(sys_id: \"\(Demo.incident1)\") { _results { number { value } } } } }"
                    .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            )
            #expect(try get.json["data"]?["GlideRecord_Query"]?["incident"]?["_results"]?[0]?["number"]?["value"]?.stringValue == "INC0010001")
            // As a form encodes it (Python's requests, a browser's GET form): spaces as `+`.
            let plus = try await client.get(
                "/api/now/graphql?query=%7B+GlideRecord_Query+%7B+incident%28sys_id%3A+%22\(Demo.incident1)%22%29+%7B+_results+%7B+number+%7B+value+%7D+%7D+%7D+%7D+%7D"
            )
            #expect(try plus.json["data"]?["GlideRecord_Query"]?["incident"]?["_results"]?[0]?["number"]?["value"]?.stringValue == "INC0010001")
            #expect(try plus.json["errors"] == nil)
            // A mutation over GET (which a browser sends cross-site with the session cookie) is refused and writes
            // nothing.
            let deleting = try await client.get(
                "/api/now/graphql?query=" + "mutation { GlideRecord_Mutation { delete_incident(sys_id: \"\(Demo.incident1)\") { sys_id } } }"
                    .addingPercentEncoding(withAllowedCharacters: .alphanumerics)!,
                .admin
            )
            #expect(deleting.status == .methodNotAllowed)
            #expect(deleting.headers[.allow] == "POST")
            #expect(try await client.get("/api/now/table/incident/\(Demo.incident1)", .admin).status == .ok)
        }
    }

    @Test("a table added through sys_db_object is queryable at once; concurrent requests agree", .timeLimit(.minutes(3)))
    func schemaFollowsCatalog() async throws {
        try await TestApp.withRouter { client in
            #expect(try await client.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"u_gadget","label":"Gadget"}"#, headers: .admin).status == .created)
            #expect(try await client.send(.post, "/api/now/table/sys_dictionary", json: #"{"name":"u_gadget","element":"u_size","internal_type":"integer","column_label":"Size"}"#, headers: .admin).status == .created)
            _ = try await client.send(.post, "/api/now/table/u_gadget", json: #"{"u_size":"7"}"#, headers: .admin)
            let counts = try await withThrowingTaskGroup(of: Int?.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let response = try await Self.graphql(client, "{ GlideRecord_Query { u_gadget { _rowCount _results { u_size { value } } } } }", headers: .admin)
                        return try response.json["data"]?["GlideRecord_Query"]?["u_gadget"]?["_results"]?[0]?["u_size"]?["value"]?.intValue
                    }
                }
                var values: [Int?] = []
                for try await value in group { values.append(value) }
                return values
            }
            #expect(counts == Array(repeating: 7, count: 8))
        }
    }
}

/// Plain queries run without the library's executor: their answers must be the library's, byte for byte.
@Suite("GraphQL direct execution")
struct GraphQLDirectTests {
    @Test("the direct path answers every plain document exactly as the library does, and leaves the rest to it")
    func sameAnswers() async throws {
        try await TestApp.withStore { store in
            let directory = TemporaryDirectory()
            let controller = NowGraphQLController(store: store, configuration: TestApp.configuration(dataDirectory: directory.path))
            let documents: [(String, String?)] = [
                (#"{ GlideRecord_Query { kb_knowledge(queryConditions: "active=true^ORDERBYpublishedDESC" pagination: { limit: 10, offset: 0 }) { _results { sys_id { value }, number { displayValue }, short_description { displayValue }, author { displayValue } published { displayValue } } } } }"#, nil),
                ("query ($qc: String!, $n: Int) { GlideRecord_Query { a: incident(queryConditions: $qc, pagination: {limit: $n}) { _rowCount rows: _results { number { v: value displayValue label } state { value displayValue } priority { value } active { value isNil hasValue } reassignment_count { value internalType isMandatory } assigned_to { value displayValue } opened_at { value displayValue } comments { value displayValue } } } b: problem(omitCount: true) { _rowCount _results { sys_id { value } } } } }", #"{"qc": "ORDERBYnumber", "n": 25}"#),
                ("{ GlideRecord_Query { task(pagination: {limit: 50}) { _results { number { value } sys_class_name { value displayValue } } _rowCount } sys_user { _rowCount } } }", nil),
                ("query Named { GlideRecord_Query { incident(sys_id: \"\(Demo.incident1)\") { _results { work_notes { displayValue } } } } }", nil),
                // Not plain: the library answers these, the direct path must not change that.
                ("{ GlideRecord_Query { incident { _results { assigned_to { _reference { name { value } } } } } } }", nil),
                ("{ GlideRecord_Query { incident { _results { state { _choices { value } } } } } }", nil),
                ("{ __typename GlideRecord_Query { incident { _rowCount } } }", nil),
                ("fragment F on GlideRecord_Type_incident { number { value } } { GlideRecord_Query { incident { _results { ...F } } } }", nil),
                ("query ($qc: String = \"active=true\") { GlideRecord_Query { incident(queryConditions: $qc) { _rowCount } } }", nil),
                ("query ($n: Int) { GlideRecord_Query { incident(pagination: {limit: $n}) { _rowCount } } }", #"{"n": "x"}"#),
                ("{ GlideRecord_Query { incident(pagination: {limit: 100000000}) { _rowCount } } }", nil),
                ("{ GlideRecord_Query { incident { _rowCount _rowCount } } }", nil),
            ]
            // The first four are plain: the direct path runs them itself; it declines the rest.
            for (index, (document, variables)) in documents.enumerated() {
                let values = try GraphQLOverHTTP.variables(variables.map { try JSONValue.parse(Array($0.utf8)) }).get()
                let context = NowGraphQLSchema.Context(
                    store: store, caller: Callers.admin, maxPageSize: 10_000, budget: NowGraphQLSchema.Budget()
                )
                let data = await NowGraphQLDirect.execute(try parse(source: document), operationName: nil, variables: values, context: context)
                #expect((data != nil) == (index < 4), "\(document)")
            }
            for caller in [Callers.john, Callers.abel, Callers.admin] {
                for (document, variables) in documents {
                    let parsed = try variables.map { try JSONValue.parse(Array($0.utf8)) }
                    let direct = try await controller.answer(query: document, variables: parsed, operationName: nil, caller: caller)
                    let library = try await controller.answer(
                        query: document, variables: parsed, operationName: nil, caller: caller, direct: false
                    )
                    #expect(direct == library, "\(caller.userName): \(document)")
                    #expect(!direct.isEmpty)
                }
            }
            // A plain document gets real rows (the comparison is not between two empty answers).
            let rows = try await controller.answer(
                query: "{ GlideRecord_Query { incident { _results { number { value } } } } }", variables: nil, operationName: nil,
                caller: Callers.john
            )
            #expect(String(decoding: rows, as: UTF8.self).contains("INC0010001"))
        }
    }

    @Test("plain subscription documents render each change exactly as the library does; the rest are left to it")
    func sameSubscriptionResults() async throws {
        try await TestApp.withStore { store in
            let directory = TemporaryDirectory()
            let controller = NowGraphQLController(store: store, configuration: TestApp.configuration(dataDirectory: directory.path))
            let documents: [(text: String, table: String, variables: [String: Map], plain: Bool)] = [
                ("subscription { incident { sequence change operation table sys_id fields user time record { number { value displayValue } state { value displayValue label } priority { value } active { value isNil hasValue } reassignment_count { value internalType isMandatory } assigned_to { value displayValue } opened_at { value displayValue } sys_updated_on { displayValue } comments { value displayValue } short_description { value } } previous { state { value displayValue } short_description { value } } } }", "incident", [:], true),
                ("subscription S($qc: String) { watched: incident(queryConditions: $qc) { s: sequence c: change record { n: number { v: value d: displayValue } } } }", "incident", ["qc": .string("active=true")], true),
                ("subscription { task { sequence record { number { value } sys_class_name { value displayValue } state { value displayValue } } } }", "task", [:], true),
                // Not plain: the library renders these.
                ("subscription { incident { record { assigned_to { _reference { name { value } } } } } }", "incident", [:], false),
                ("subscription { incident { record { state { _choices { value } } } } }", "incident", [:], false),
                ("subscription { incident { __typename sequence } }", "incident", [:], false),
                ("subscription ($s: Int = 0) { incident(since: $s) { sequence } }", "incident", [:], false),
            ]
            // An insert, an update with a comment, a delete: entered, changed and deleted.
            let start = try await store.latestSequence()
            let id = try await store.insert(
                into: "incident", values: ["short_description": "Watched \"closely\"", "assigned_to": DemoData.userID("abel.tuter")],
                caller: Callers.john
            )
            try await store.update(id, in: "incident", values: ["state": "2", "short_description": "Watched more", "comments": "A note"], caller: Callers.john)
            try await store.delete(id, from: "incident", caller: Callers.admin)
            let events = try await store.events(after: start)
            for caller in [Callers.john, Callers.beth, Callers.abel, Callers.admin] {
                for document in documents {
                    guard case .success(let (schema, prepared)) = controller.prepare(document.text) else {
                        Issue.record("\(document.text) did not prepare")
                        continue
                    }
                    let plan = NowGraphQLDirect.subscriptionPlan(prepared.document, operationName: nil, catalog: store.catalog)
                    #expect((plan != nil) == document.plain, "\(document.text)")
                    guard let plan else { continue }
                    let live = LiveQuery(table: try store.table(document.table), query: EncodedQuery(), caller: caller)
                    var kinds: Set<String> = []
                    for event in events {
                        guard let change = try await store.change(event, for: live) else { continue }
                        let value = try await LiveChange.make(change, table: try store.table(document.table), store: store, caller: caller)
                        let direct = try #require(NowGraphQLDirect.render(plan, value))
                        let context = NowGraphQLSchema.Context(
                            store: store, caller: caller, maxPageSize: 10_000, budget: NowGraphQLSchema.Budget()
                        )
                        let library = NowGraphQLController.bytes(try await execute(
                            schema: schema, documentAST: prepared.document, rootValue: value, context: context,
                            variableValues: document.variables, operationName: nil
                        ))
                        #expect(
                            direct == library,
                            "\(caller.userName): \(document.text)\n\(String(decoding: direct, as: UTF8.self))\n\(String(decoding: library, as: UTF8.self))"
                        )
                        kinds.insert(change.kind.rawValue)
                    }
                    // Real results were compared, of every kind.
                    #expect(kinds == ["entered", "changed", "deleted"], "\(caller.userName): \(document.text)")
                }
            }
        }
    }
}

extension JSONValue {
    /// An element of an array, or nil.
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
}
