import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

/// Business rules (`sys_script`) as data, applied in the one write path: filters, set values, aborts.
@Suite("Business rules")
struct BusinessRulesTests {
    static func rule(_ client: any TestClientProtocol, _ fields: String) async throws -> String {
        let created = try await client.send(.post, "/api/now/table/sys_script", json: "{\(fields)}", headers: .admin)
        #expect(created.status == .created)
        return try created.result.string("sys_id")
    }

    static let abortEICAR = #""name":"no EICAR","collection":"task","action_insert":true,"action_update":true,"action_delete":true,"abort_action":true,"add_message":true,"message":"EICAR is not allowed","filter_condition":"short_descriptionLIKEEICAR^EQ""#

    @Test("a rule aborts matching inserts, updates and deletes of its table and the tables below it; nothing is written")
    func aborts() async throws {
        try await TestApp.withRouter { client in
            _ = try await Self.rule(client, Self.abortEICAR)
            let before = try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count
            let refused = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"EICAR test"}"#)
            #expect(refused.status == .forbidden)
            #expect(refused.errorMessage == "EICAR is not allowed")
            #expect(try refused.json["error"]?["detail"]?.stringValue == "Operation against file 'incident' was aborted by Business Rule 'no EICAR'")
            #expect(try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count == before)
            // Not matching: written.
            let fine = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"printer"}"#)
            #expect(fine.status == .created)
            let id = try fine.result.string("sys_id")
            // An update that would make it match is refused; the record keeps its value.
            let update = try await client.send(.patch, "/api/now/table/incident/\(id)", json: #"{"short_description":"EICAR printer"}"#)
            #expect(update.status == .forbidden)
            #expect(try await client.get("/api/now/table/incident/\(id)").result.string("short_description") == "printer")
            // A delete rule judges the record as it is.
            _ = try await Self.rule(
                client,
                #""name":"keep","collection":"problem","action_delete":true,"abort_action":true,"filter_condition":"short_descriptionSTARTSWITHkeep""#
            )
            let kept = try await client.send(.post, "/api/now/table/problem", json: #"{"short_description":"keep me"}"#).result.string("sys_id")
            let gone = try await client.send(.post, "/api/now/table/problem", json: #"{"short_description":"drop me"}"#).result.string("sys_id")
            let refusedDelete = try await client.execute(uri: "/api/now/table/problem/\(kept)", method: .delete, headers: .john, body: nil)
            #expect(refusedDelete.status == .forbidden)
            #expect(refusedDelete.errorMessage == "Operation against file 'problem' was aborted by Business Rule 'keep'")
            #expect(try await client.get("/api/now/table/problem/\(kept)").status == .ok)
            #expect(try await client.execute(uri: "/api/now/table/problem/\(gone)", method: .delete, headers: .john, body: nil).status == .noContent)
        }
    }

    @Test("set field values happen before derived fields (priority follows the urgency a rule set)")
    func setsValues() async throws {
        try await TestApp.withRouter { client in
            _ = try await Self.rule(
                client,
                #""name":"urgent","collection":"incident","action_insert":true,"action_update":true,"template":"urgency=1^impact=1^category=network^EQ","filter_condition":"short_descriptionSTARTSWITHURGENT""#
            )
            let created = try await client.send(
                .post, "/api/now/table/incident?sysparm_fields=sys_id,urgency,impact,priority,category", json: #"{"short_description":"URGENT: core switch"}"#
            )
            #expect(created.status == .created)
            let record = try created.result
            #expect(record.string("urgency") == "1" && record.string("impact") == "1" && record.string("category") == "network")
            #expect(record.string("priority") == "1")
            let other = try await client.send(.post, "/api/now/table/incident?sysparm_fields=urgency", json: #"{"short_description":"later"}"#)
            #expect(try other.result.string("urgency") == "3")
        }
    }

    @Test("inactive rules, rules that run after or async, and rules of other tables do nothing; a change to a rule holds at once")
    func whatRuns() async throws {
        try await TestApp.withRouter { client in
            let id = try await Self.rule(client, Self.abortEICAR + #","active":false"#)
            _ = try await Self.rule(client, Self.abortEICAR.replacingOccurrences(of: "no EICAR", with: "after") + #","when":"after""#)
            _ = try await Self.rule(client, Self.abortEICAR.replacingOccurrences(of: "\"task\"", with: "\"kb_knowledge\""))
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"EICAR one"}"#).status == .created)
            // Switched on: the very next write sees it.
            #expect(try await client.send(.patch, "/api/now/table/sys_script/\(id)", json: #"{"active":true}"#, headers: .admin).status == .ok)
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"EICAR two"}"#).status == .forbidden)
            #expect(try await client.execute(uri: "/api/now/table/sys_script/\(id)", method: .delete, headers: .admin, body: nil).status == .noContent)
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"EICAR three"}"#).status == .created)
        }
    }

    @Test("only admins read or write rules; a filter that does not parse matches nothing")
    func access() async throws {
        try await TestApp.withRouter { client in
            let refused = try await client.send(.post, "/api/now/table/sys_script", json: #"{"name":"mine","collection":"task"}"#)
            #expect(refused.status == .forbidden)
            #expect(try await client.get("/api/now/table/sys_script").results.isEmpty)
            _ = try await Self.rule(
                client, #""name":"broken","collection":"task","action_insert":true,"abort_action":true,"filter_condition":"short_description^^^=(""#
            )
            #expect(try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"anything"}"#).status == .created)
        }
    }

    @Test("concurrent writes under an aborting rule: every matching one refused, every other one written")
    func concurrency() async throws {
        try await TestApp.withRouter { client in
            _ = try await Self.rule(client, Self.abortEICAR)
            let statuses = try await withThrowingTaskGroup(of: (Bool, HTTPResponse.Status).self) { group in
                for index in 0..<16 {
                    group.addTask {
                        let bad = index % 2 == 0
                        let response = try await client.send(
                            .post, "/api/now/table/incident", json: #"{"short_description":"run \#(index) \#(bad ? "EICAR" : "clean")"}"#
                        )
                        return (bad, response.status)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0.0 ? $0.1 == .forbidden : $0.1 == .created })
            let written = try await client.get("/api/now/table/incident?sysparm_query=short_descriptionSTARTSWITHrun%20&sysparm_fields=short_description", .admin).results
            #expect(written.count == 8)
        }
    }

    @Test("set field values: terms joined by ^, ^^ a literal caret, EQ ignored")
    func template() {
        let values = BusinessRules.fieldValues("urgency=1^short_description=a^^b=c^EQ")
        #expect(values.map(\.field) == ["urgency", "short_description"])
        #expect(values.map(\.value) == ["1", "a^b=c"])
        #expect(BusinessRules.fieldValues("").isEmpty)
        #expect(BusinessRules.fieldValues("=x^nothing").isEmpty)
    }
}
