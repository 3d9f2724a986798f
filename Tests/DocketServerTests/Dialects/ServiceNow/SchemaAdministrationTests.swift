import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

@Suite("Schema administration through sys_db_object and sys_dictionary")
struct SchemaAdministrationTests {
    @Test("a table extending task and its fields are usable at once through every API, and after a restart")
    func customTaskTable() async throws {
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        let id = try await buildApplication(configuration).test(.router) { client throws in
            let table = try await client.send(
                .post, "/api/now/table/sys_db_object", json: #"{"name":"u_widget","label":"Widget","super_class":"task"}"#,
                headers: .admin
            )
            #expect(table.status == .created)
            for json in [
                #"{"name":"u_widget","element":"u_color","internal_type":"string","column_label":"Color"}"#,
                #"{"name":"u_widget","element":"u_weight","internal_type":"integer"}"#,
                #"{"name":"u_widget","element":"u_owner","internal_type":"reference","reference":"sys_user"}"#,
            ] {
                let field = try await client.send(.post, "/api/now/table/sys_dictionary", json: json, headers: .admin)
                #expect(field.status == .created)
            }
            let created = try await client.send(
                .post, "/api/now/table/u_widget?sysparm_display_value=all",
                json: #"{"short_description":"first widget","u_color":"red","u_weight":"7","u_owner":"\#(DemoData.userID("john.doe"))"}"#
            )
            #expect(created.status == .created)
            let record = try created.result
            #expect(record["u_color"]?.string("value") == "red")
            #expect(record["u_owner"]?.string("display_value") == "John Doe")
            #expect(record["sys_class_name"]?.string("value") == "u_widget")
            #expect(record["number"]?.string("value").hasPrefix("TASK") == true)
            // itil users work on it like any task; it shows up through task too.
            let listed = try await client.get("/api/now/table/task?sysparm_query=sys_class_name=u_widget")
            #expect(try listed.results.count == 1)
            let stats = try await client.get("/api/now/stats/u_widget?sysparm_count=true&sysparm_sum_fields=u_weight")
            #expect(try stats.result["stats"]?["sum"]?.string("u_weight") == "7")
            let recordID = record["sys_id"]?.string("value") ?? ""
            var headers = HTTPFields.john
            headers[.contentType] = "text/plain"
            let attachment = try await client.execute(
                uri: "/api/now/attachment/file?table_name=u_widget&table_sys_id=\(recordID)&file_name=spec.txt",
                method: .post, headers: headers, body: .init(string: "spec")
            )
            #expect(attachment.status == .created)
            return recordID
        }
        try await buildApplication(configuration).test(.router) { client throws in
            let record = try await client.get("/api/now/table/u_widget/\(id)?sysparm_fields=u_color,u_weight").result
            #expect(record.string("u_color") == "red")
            #expect(record.string("u_weight") == "7")
            let field = try await client.send(
                .post, "/api/now/table/sys_dictionary", json: #"{"name":"u_widget","element":"u_size","internal_type":"string"}"#,
                headers: .admin
            )
            #expect(field.status == .created)
            let updated = try await client.send(.patch, "/api/now/table/u_widget/\(id)", json: #"{"u_size":"XL"}"#)
            #expect(try updated.result.string("u_size") == "XL")
        }
    }

    @Test("a field added to a table that was read before is read, written and answered at once (no columns kept from before)")
    func fieldAddedAfterReads() async throws {
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { client throws in
            let list = try await client.get("/api/now/table/incident?sysparm_limit=1", .admin)
            let id = try #require(try list.results.first?["sys_id"]?.stringValue)
            // Read (and written) with every field before the change.
            #expect(try await client.get("/api/now/table/incident/\(id)", .admin).result["u_extra"] == nil)
            let before = try await client.send(.patch, "/api/now/table/incident/\(id)", json: #"{"short_description":"before"}"#, headers: .admin)
            #expect(try before.result["u_extra"] == nil)
            let field = try await client.send(
                .post, "/api/now/table/sys_dictionary", json: #"{"name":"incident","element":"u_extra","internal_type":"string"}"#,
                headers: .admin
            )
            #expect(field.status == .created)
            let written = try await client.send(.patch, "/api/now/table/incident/\(id)", json: #"{"u_extra":"kept"}"#, headers: .admin)
            #expect(try written.result["u_extra"]?.stringValue == "kept")
            #expect(try await client.get("/api/now/table/incident/\(id)", .admin).result["u_extra"]?.stringValue == "kept")
            let created = try await client.send(
                .post, "/api/now/table/incident", json: #"{"short_description":"after","u_extra":"new"}"#, headers: .admin
            )
            #expect(try created.result["u_extra"]?.stringValue == "new")
        }
    }

    @Test("columns kept for one caller's field list serve another's rightly: made-up names are never kept, each sees only their rows")
    func keptColumnsAcrossCallers() async throws {
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        try await buildApplication(configuration).test(.router) { client throws in
            // One name holding a NUL (as %00 decodes) must not stand for the two fields it joins.
            let odd = try await client.get("/api/now/table/incident?sysparm_limit=1&sysparm_fields=number%00short_description", .john)
            #expect(odd.status == .ok)
            let admin = try await client.get("/api/now/table/incident?sysparm_limit=1&sysparm_fields=number,short_description", .admin)
            let record = try #require(try admin.results.first)
            #expect(record["number"]?.stringValue?.isEmpty == false)
            #expect(record["short_description"] != nil)
            // The same list for a caller who sees fewer rows: the same columns, only their rows.
            let all = try await client.get("/api/now/table/incident?sysparm_fields=number,short_description&sysparm_limit=1000", .admin)
            // abel.tuter (self-service) sees only the incidents he raised.
            let abels = try await client.get("/api/now/table/incident?sysparm_fields=number,short_description&sysparm_limit=1000", .abel)
            #expect(try !abels.results.isEmpty && abels.results.allSatisfy { $0["number"] != nil && $0["short_description"] != nil })
            #expect(try abels.results.count < all.results.count)
        }
    }

    @Test("a new root table gets its own physical table")
    func rootTable() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"x_app_item"}"#, headers: .admin).status == .created)
            #expect(try await client.send(
                .post, "/api/now/table/sys_dictionary", json: #"{"name":"x_app_item","element":"size","internal_type":"decimal"}"#,
                headers: .admin
            ).status == .created)
            let created = try await client.send(.post, "/api/now/table/x_app_item", json: #"{"size":"1.5"}"#, headers: .admin)
            #expect(created.status == .created)
            #expect(try created.result.string("size") == "1.5")
            #expect(try await client.get("/api/now/table/x_app_item", .admin).headers[.xTotalCount] == "1")
        }
    }

    @Test("a new root table comes with a <table>_user role that grants access to it")
    func customTableRole() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"u_asset"}"#, headers: .admin).status == .created)
            #expect(try await client.send(
                .post, "/api/now/table/sys_dictionary", json: #"{"name":"u_asset","element":"u_tag"}"#, headers: .admin
            ).status == .created)
            #expect(try await client.send(.post, "/api/now/table/u_asset", json: #"{"u_tag":"A1"}"#, headers: .admin).status == .created)
            // john.doe (itil) has no access yet.
            #expect(try await client.get("/api/now/table/u_asset").results.isEmpty)
            #expect(try await client.send(.post, "/api/now/table/u_asset", json: #"{"u_tag":"J1"}"#).status == .forbidden)
            let role = try await client.get("/api/now/table/sys_user_role?name=u_asset_user", .admin).results
            let roleID = try #require(role.first).string("sys_id")
            let grant = try await client.send(
                .post, "/api/now/table/sys_user_has_role",
                json: #"{"user":"\#(DemoData.userID("john.doe"))","role":"\#(roleID)"}"#, headers: .admin
            )
            #expect(grant.status == .created)
            #expect(try await client.send(.post, "/api/now/table/u_asset", json: #"{"u_tag":"J1"}"#).status == .created)
            #expect(try await client.get("/api/now/table/u_asset").results.count == 2)
            #expect(try await client.get("/api/now/stats/u_asset?sysparm_count=true").result["stats"]?.string("count") == "2")
        }
    }

    /// Each refused change, in one app: the table and the body posted to it.
    static let invalidChanges = [
        ("sys_db_object", #"{"name":"widget"}"#), ("sys_db_object", #"{"name":"u_bad name"}"#),
        ("sys_db_object", #"{"name":"u_x\"; DROP TABLE task; --"}"#), ("sys_db_object", #"{"name":"incident"}"#),
        ("sys_db_object", #"{"name":"u_y","super_class":"nope"}"#), ("sys_db_object", #"{"name":"u_z","super_class":"sys_user"}"#),
        ("sys_dictionary", #"{"name":"incident","element":"color"}"#),
        ("sys_dictionary", #"{"name":"incident","element":"u_color","internal_type":"blob"}"#),
        ("sys_dictionary", #"{"name":"nope","element":"u_color"}"#),
        ("sys_dictionary", #"{"name":"incident","element":"u_ref","internal_type":"reference","reference":"nope"}"#),
        ("sys_dictionary", #"{"name":"incident","element":"u_id","internal_type":"GUID"}"#),
        ("sys_dictionary", #"{"name":"incident","element":"short_description"}"#),
    ]

    @Test("invalid schema changes are 400s and leave nothing behind")
    func invalid() async throws {
        try await TestApp.withRouter { client throws in
            for (table, json) in Self.invalidChanges {
                let before = try await client.get("/api/now/table/\(table)?sysparm_limit=1", .admin).headers[.xTotalCount]
                let response = try await client.send(.post, "/api/now/table/\(table)", json: json, headers: .admin)
                #expect(response.status == .badRequest, "\(table) \(json)")
                #expect(try await client.get("/api/now/table/\(table)?sysparm_limit=1", .admin).headers[.xTotalCount] == before, "\(json)")
                #expect(try await client.get("/api/now/table/task?sysparm_limit=1", .admin).status == .ok, "\(json)")
            }
            // Nothing of them is in the schema: an incident takes none of the refused fields.
            let created = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"after","u_color":"red"}"#)
            #expect(created.status == .created)
            #expect(try created.result["u_color"] == nil)
        }
    }

    @Test("only admins change the schema; structure cannot be renamed or deleted through the API")
    func guarded() async throws {
        try await TestApp.withRouter { client throws in
            #expect(try await client.send(.post, "/api/now/table/sys_db_object", json: #"{"name":"u_mine"}"#).status == .forbidden)
            let field = try await client.send(
                .post, "/api/now/table/sys_dictionary", json: #"{"name":"incident","element":"u_flag","internal_type":"boolean"}"#,
                headers: .admin
            )
            #expect(field.status == .created)
            let id = try field.result.string("sys_id")
            let rename = try await client.send(.patch, "/api/now/table/sys_dictionary/\(id)", json: #"{"element":"u_other"}"#, headers: .admin)
            #expect(rename.status == .badRequest)
            let relabel = try await client.send(.patch, "/api/now/table/sys_dictionary/\(id)", json: #"{"column_label":"Flag"}"#, headers: .admin)
            #expect(relabel.status == .ok)
            let delete = try await client.execute(uri: "/api/now/table/sys_dictionary/\(id)", method: .delete, headers: .admin, body: nil)
            #expect(delete.status == .badRequest)
            let flagged = try await client.send(.patch, "/api/now/table/incident/\(Demo.incident1)", json: #"{"u_flag":"true"}"#)
            #expect(try flagged.result.string("u_flag") == "true")
        }
    }
}
