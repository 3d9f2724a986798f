import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// What ServiceNow's own clients expect of a developer instance: the queries they send and the records they
/// look for.
@Suite("Parity with a developer instance")
struct InstanceParityTests {
    @Test("JOIN finds users who manage an active group; JOIN on sys_user_has_role finds the admins")
    func join() async throws {
        try await TestApp.withRouter { client throws in
            let managers = try await client.get(
                "/api/now/table/sys_user?sysparm_query=JOINsys_user.sys_id=sys_user_group.manager!active=true&sysparm_fields=user_name",
                .admin
            )
            #expect(managers.status == .ok)
            let names = Set(try managers.results.map { $0.string("user_name") })
            #expect(names == Set(DemoData.groups.map(\.manager)))
            let admins = try await client.get(
                "/api/now/table/sys_user?sysparm_query=JOINsys_user.sys_id=sys_user_has_role.user!role=2831a114c611228501d4ea6c309d626d&sysparm_fields=user_name",
                .admin
            ).results
            #expect(admins.count == DemoData.people.filter { $0.roles.contains("admin") }.count)
            #expect((11..<25).contains(admins.count))
            // An inactive group's manager no longer counts.
            let inactive = try await client.send(
                .patch, "/api/now/table/sys_user_group/\(DemoData.id("group", 8))", json: #"{"active":"false"}"#, headers: .admin
            )
            #expect(inactive.status == .ok)
            let after = try await client.get(
                "/api/now/table/sys_user?sysparm_query=JOINsys_user.sys_id=sys_user_group.manager!active=true&sysparm_fields=user_name",
                .admin
            )
            #expect(!Set(try after.results.map { $0.string("user_name") }).contains("sam.sorokin"))
        }
    }

    @Test("RLQUERY counts related records: groups with an admin-like role, problems with and without incidents")
    func relatedList() async throws {
        try await TestApp.withRouter { client throws in
            let groups = try await client.get(
                "/api/now/table/sys_user_group?sysparm_query=RLQUERYsys_group_has_role.group,>0,m2m^role.nameLIKEadmin^ENDRLQUERY&sysparm_fields=name",
                .admin
            ).results
            #expect(Set(groups.map { $0.string("name") }) == ["Database", "Platform Administrators", "Identity and Access", "Knowledge Managers"])
            // Link two incidents to the first problem; then only it has incidents, and only it has two.
            for number in [1, 2] {
                let linked = try await client.send(
                    .patch, "/api/now/table/incident/\(DemoData.id("incident", number))",
                    json: #"{"problem_id":"\#(DemoData.id("problem", 1))"}"#, headers: .admin
                )
                #expect(linked.status == .ok)
            }
            let with = try await client.get("/api/now/table/problem?sysparm_query=RLQUERYincident.problem_id,>=1^ENDRLQUERY", .admin).results
            #expect(with.map { $0.string("sys_id") } == [DemoData.id("problem", 1)])
            let two = try await client.get("/api/now/table/problem?sysparm_query=RLQUERYincident.problem_id,>1^ENDRLQUERY", .admin).results
            #expect(two.count == 1)
            let three = try await client.get("/api/now/table/problem?sysparm_query=RLQUERYincident.problem_id,>=3^ENDRLQUERY", .admin).results
            #expect(three.isEmpty)
            let without = try await client.get("/api/now/table/problem?sysparm_query=RLQUERYincident.problem_id,=0^ENDRLQUERY", .admin).results
            #expect(without.count == 7)
        }
    }

    @Test("subqueries only count records the caller may read")
    func subqueryAccess() async throws {
        try await TestApp.withRouter { client throws in
            // Incident 3 does not involve abel; linking it to a problem must not reveal it through the problem.
            let linked = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident3)", json: #"{"problem_id":"\#(DemoData.id("problem", 2))"}"#,
                headers: .admin
            )
            #expect(linked.status == .ok)
            let asAdmin = try await client.get("/api/now/stats/problem?sysparm_count=true&sysparm_query=RLQUERYincident.problem_id,>=1^ENDRLQUERY", .admin)
            #expect(try asAdmin.result["stats"]?.string("count") == "1")
            let asITIL = try await client.get("/api/now/stats/problem?sysparm_count=true&sysparm_query=RLQUERYincident.problem_id,>=1^ENDRLQUERY", .john)
            #expect(try asITIL.result["stats"]?.string("count") == "1")
            let managers = try await client.get(
                "/api/now/table/sys_user?sysparm_query=JOINsys_user.sys_id=incident.caller_id!short_descriptionLIKEprinter&sysparm_fields=user_name",
                .abel
            )
            // abel cannot read incident 3 (carol's printer): the JOIN sees none of it.
            #expect(try managers.results.isEmpty)
        }
    }

    @Test("unknown terms are ignored whatever their case, however many there are")
    func unknownTerms() async throws {
        try await TestApp.withRouter { client throws in
            let query = Array(repeating: "AAAA=BBBB", count: 2300).joined(separator: "^") + "^sys_id=" + DemoData.adminUserID
            let response = try await client.get("/api/now/table/sys_user?sysparm_query=\(query)&sysparm_fields=user_name", .admin)
            #expect(response.status == .ok)
            #expect(try response.results.map { $0.string("user_name") } == ["admin"])
            let mixed = try await client.get("/api/now/table/incident?sysparm_query=Foo=1^numberSTARTSWITHINC^FOO=2&sysparm_limit=1", .admin)
            #expect(mixed.status == .ok)
            #expect(try mixed.results.count == 1)
        }
    }

    @Test("with glide.invalid_query.returns_no_rows true, a query with an unknown term returns no rows; other refusals stay")
    func invalidQueryReturnsNoRows() async throws {
        try await TestApp.withRouter { client throws in
            let unknown = "/api/now/table/incident?sysparm_query=nosuchfield=3&sysparm_fields=number"
            let before = try await client.get(unknown, .admin)
            #expect(before.status == .ok)
            #expect(try before.results.count > 1)
            let set = try await client.send(
                .post, "/api/now/table/sys_properties",
                json: #"{"name":"glide.invalid_query.returns_no_rows","value":"true","type":"boolean"}"#, headers: .admin
            )
            #expect(set.status == .created)
            let after = try await client.get(unknown, .admin)
            #expect(after.status == .ok)
            #expect(try after.results.isEmpty)
            #expect(after.headers[HTTPField.Name("X-Total-Count")!] == "0")
            // An unknown term anywhere, even in an alternative, or a sort on an unknown field: no rows.
            #expect(try await client.get("/api/now/table/incident?sysparm_query=active=true^ORstaet=2", .admin).results.isEmpty)
            #expect(try await client.get("/api/now/table/incident?sysparm_query=active=true^ORDERBYnosuch", .admin).results.isEmpty)
            // A valid query is unchanged; a password term is still a 403, a malformed query still a 400.
            #expect(try await client.get("/api/now/table/incident?sysparm_query=active=true", .admin).results.count > 1)
            #expect(try await client.get("/api/now/table/sys_user?sysparm_query=user_password=x", .admin).status == .forbidden)
            #expect(try await client.get("/api/now/table/sys_user?sysparm_query=bogus=1%5Euser_password=x", .admin).status == .forbidden)
            #expect(try await client.get("/api/now/table/incident?sysparm_query=state=1%5ENQ", .admin).status.code < 500)
            // Back to false (any case but "true"): ignored again, at once.
            let property = try set.result.string("sys_id")
            let unset = try await client.send(
                .patch, "/api/now/table/sys_properties/\(property)", json: #"{"value":"False"}"#, headers: .admin
            )
            #expect(unset.status == .ok)
            #expect(try await client.get(unknown, .admin).results.count > 1)
        }
    }

    @Test("the demo has what a fresh developer instance has where scripts depend on it")
    func demoFacts() async throws {
        try await TestApp.withRouter { client throws in
            let admin = try await client.get("/api/now/table/sys_user/6816f79cc0a8016401c5a33be04be441", .admin)
            #expect(try admin.result.string("user_name") == "admin")
            for table in ["cmn_department", "cmn_location", "sys_group_has_role", "syslog", "sys_metadata"] {
                let count = try await client.get("/api/now/stats/\(table)?sysparm_count=true", .admin)
                #expect(count.status == .ok, "\(table)")
                #expect((Int(try count.result["stats"]?.string("count") ?? "") ?? 0) > 0, "\(table)")
            }
            let logs = try await client.get("/api/now/stats/syslog?sysparm_count=true", .admin)
            #expect((Int(try logs.result["stats"]?.string("count") ?? "") ?? 0) >= 600)
            // sys_metadata lists the catalog's own definitions.
            let metadata = try await client.get("/api/now/table/sys_metadata?sys_update_name=sys_db_object_incident", .admin)
            #expect(try metadata.results.count == 1)
            // Departments are records now, and a user's department is a reference to one.
            let john = try await client.get(
                "/api/now/table/sys_user/\(DemoData.userID("john.doe"))?sysparm_display_value=all&sysparm_fields=department,location", .admin
            ).result
            #expect(john["department"]?.string("display_value") == "IT")
            #expect(john["department"]?.string("value") == DemoData.departmentID("IT"))
            #expect(john["location"]?.string("display_value").isEmpty == false)
            let walked = try await client.get("/api/now/table/incident?sysparm_query=caller_id.department.name=Sales&sysparm_fields=number", .admin)
            #expect(try !walked.results.isEmpty)
            let groups = try await client.get("/api/now/table/sys_user_group?sysparm_query=managerISEMPTY", .admin)
            #expect(try groups.results.isEmpty)
        }
    }

    @Test("ORDERBY<name>DESC, as NowData's documentation writes it, sorts descending by <name>; a real field keeps its name")
    func orderByDescSuffix() async throws {
        try await TestApp.withRouter { client throws in
            let documented = try await client.get(
                "/api/now/table/kb_knowledge?sysparm_query=active=true^ORDERBYpublishedDESC&sysparm_fields=number,published", .admin
            )
            #expect(documented.status == .ok)
            let canonical = try await client.get(
                "/api/now/table/kb_knowledge?sysparm_query=active=true^ORDERBYDESCpublished&sysparm_fields=number,published", .admin
            )
            let dates = try documented.results.map { $0.string("published") }
            #expect(try dates == canonical.results.map { $0.string("published") })
            #expect(dates.filter { !$0.isEmpty } == dates.filter { !$0.isEmpty }.sorted(by: >))
            #expect(dates.first?.isEmpty == false)
            // Ascending stays ascending.
            let ascending = try await client.get(
                "/api/now/table/kb_knowledge?sysparm_query=active=true^ORDERBYpublished&sysparm_fields=published", .admin
            ).results.map { $0.string("published") }
            #expect(ascending != dates)
        }
    }
}
