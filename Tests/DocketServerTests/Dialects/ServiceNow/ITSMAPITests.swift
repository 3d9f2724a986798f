import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing

@testable import DocketServer

/// Step 18: change, CMDB, service catalog and problem tasks, as Ansible's servicenow.itsm drives them.
@Suite("ITSM: change, CMDB, catalog")
struct ITSMAPITests {
    @Test("a standard change takes its template's values for what the request leaves out; priority stays as given")
    func standardChange() async throws {
        try await TestApp.withRouter { client throws in
            let template = try await client.get(
                "/api/now/table/std_change_producer_version?name=Clear+BGP+sessions+on+a+Cisco+router+-+1", .admin
            ).results
            #expect(template.count == 1)
            let created = try await client.send(
                .post, "/api/now/table/change_request?sysparm_exclude_reference_link=true",
                json: #"{"type":"standard","priority":"4","impact":"3","short_description":"mine","std_change_producer_version":"\#(template[0].string("sys_id"))"}"#,
                headers: .admin
            )
            #expect(created.status == .created)
            let record = try created.result
            #expect(record.string("short_description") == "mine")
            #expect(record.string("description").contains("Resend the complete BGP table"))
            #expect(record.string("priority") == "4")
            #expect(record.string("number").hasPrefix("CHG"))
            // A change task belongs to its change.
            let task = try await client.send(
                .post, "/api/now/table/change_task",
                json: #"{"change_request":"\#(record.string("sys_id"))","change_task_type":"planning","short_description":"t","planned_end_date":"2021-07-15T08:00:00"}"#,
                headers: .admin
            )
            #expect(task.status == .created)
            #expect(try task.result.string("number").hasPrefix("CTASK"))
            #expect(try task.result.string("planned_end_date") == "2021-07-15 08:00:00")
        }
    }

    @Test("= on strings ignores case, as an instance's does; references and sys_ids stay exact")
    func caseInsensitiveEquality() async throws {
        try await TestApp.withRouter { client throws in
            let lower = try await client.get("/api/now/table/sys_user_group?name=network", .admin).results
            #expect(lower.map { $0.string("name") } == ["Network"])
            let query = try await client.get("/api/now/table/sys_user_group?sysparm_query=name=NETWORK", .admin).results
            #expect(query.count == 1)
            let notEqual = try await client.get("/api/now/table/sys_user_group?sysparm_query=name!=network", .admin).results
            #expect(!notEqual.contains { $0.string("name") == "Network" })
            let list = try await client.get("/api/now/table/sys_user_group?sysparm_query=nameINnetwork,help+desk", .admin).results
            #expect(Set(list.map { $0.string("name") }) == ["Network", "Help Desk"])
            let number = try await client.get("/api/now/table/incident?sysparm_query=number=inc0010001", .admin).results
            #expect(number.count == 1)
        }
    }

    @Test("CMDB Instance API: create, read with relations, update, relate, unrelate; bad input and access")
    func cmdbInstances() async throws {
        try await TestApp.withRouter { client throws in
            let base = "/api/now/cmdb/instance/cmdb_ci_linux_server"
            let first = try await client.send(
                .post, base, json: #"{"attributes":{"name":"linux99","firewall_status":"intranet"},"source":"ServiceNow"}"#,
                headers: .admin
            )
            #expect(first.status == .created)
            let id = try first.result["attributes"]?.string("sys_id") ?? ""
            #expect(try first.result["attributes"]?.string("discovery_source") == "ServiceNow")
            let second = try await client.send(.post, base, json: #"{"attributes":{"name":"linux100"}}"#, headers: .admin)
            let other = try second.result["attributes"]?.string("sys_id") ?? ""
            let patched = try await client.send(
                .patch, "\(base)/\(id)", json: #"{"attributes":{"cpu_name":"i5","sys_class_name":"cmdb_ci"}}"#, headers: .admin
            )
            #expect(patched.status == .ok)
            #expect(try patched.result["attributes"]?.string("cpu_name") == "i5")
            #expect(try patched.result["attributes"]?.string("sys_class_name") == "cmdb_ci_linux_server")
            let types = try await client.get("/api/now/table/cmdb_rel_type?sysparm_query=nameLIKEUsed", .admin).results
            let type = try #require(types.first).string("sys_id")
            // Two relations added at once, concurrently: both are kept.
            async let one = client.send(
                .post, "\(base)/\(id)/relation", json: #"{"outbound_relations":[{"type":"\#(type)","target":"\#(other)"}]}"#,
                headers: .admin
            )
            async let two = client.send(
                .post, "\(base)/\(id)/relation", json: #"{"inbound_relations":[{"type":"\#(type)","target":"\#(other)"}]}"#,
                headers: .admin
            )
            let (a, b) = try await (one, two)
            #expect(a.status == .created && b.status == .created)
            let read = try await client.get("\(base)/\(id)", .admin).result
            let outbound = read["outbound_relations"]?.arrayValue ?? []
            let inbound = read["inbound_relations"]?.arrayValue ?? []
            #expect(outbound.count == 1 && inbound.count == 1)
            #expect(outbound.first?["target"]?.string("value") == other)
            #expect(outbound.first?["target"]?.string("display_value") == "linux100")
            #expect(outbound.first?["type"]?.string("display_value").contains("Used by") == true)
            // The list has the new items, with a total.
            let list = try await client.get("\(base)?sysparm_query=nameSTARTSWITHlinux&sysparm_limit=1", .admin)
            #expect(try list.results.count == 1)
            #expect(list.headers[.xTotalCount] == "2")
            // Deleting a relation through another CI is refused; through its own, it goes.
            let relation = outbound.first?.string("sys_id") ?? ""
            let foreign = try await client.get("\(base)?sysparm_query=name=lnux100", .admin).results.first?.string("sys_id") ?? ""
            #expect(try await client.send(.delete, "\(base)/\(foreign)/relation/\(relation)", json: nil, headers: .admin).status == .notFound)
            #expect(try await client.send(.delete, "\(base)/\(id)/relation/\(relation)", json: nil, headers: .admin).status == .noContent)
            // A relation to a CI that does not exist is refused before anything is written.
            let before = try await client.get("\(base)?sysparm_limit=1", .admin).headers[.xTotalCount]
            let refused = try await client.send(
                .post, base,
                json: #"{"attributes":{"name":"orphan"},"outbound_relations":[{"type":"\#(type)","target":"00000000000000000000000000000000"}]}"#,
                headers: .admin
            )
            #expect(refused.status == .notFound)
            #expect(try await client.get("\(base)?sysparm_limit=1", .admin).headers[.xTotalCount] == before)
            #expect(try await client.send(
                .post, "\(base)/\(id)/relation", json: #"{"outbound_relations":[{"type":"No such type","target":"\#(other)"}]}"#,
                headers: .admin
            ).status == .badRequest)
            // A fulfiller (itil) maintains CIs.
            #expect(try await client.send(.patch, "\(base)/\(other)", json: #"{"attributes":{"cpu_name":"i7"}}"#, headers: .john).status == .ok)
            // Bad input: no class, no attributes, malformed relations.
            #expect(try await client.get("/api/now/cmdb/instance/incident", .admin).status == .badRequest)
            #expect(try await client.send(.post, base, json: #"{"source":"x"}"#, headers: .admin).status == .badRequest)
            #expect(try await client.send(.post, "\(base)/\(id)/relation", json: #"{"outbound_relations":{}}"#, headers: .admin).status == .badRequest)
            #expect(try await client.get("\(base)/00000000000000000000000000000000", .admin).status == .notFound)
            // Access: a user without itil neither reads nor creates CIs.
            #expect(try await client.get("\(base)/\(id)", .abel).status == .notFound)
            #expect(try await client.send(.post, base, json: #"{"attributes":{"name":"x"}}"#, headers: .abel).status == .forbidden)
            // Meta: the class's attributes include inherited ones.
            let meta = try await client.get("/api/now/cmdb/meta/cmdb_ci_server", .admin).result
            #expect(meta.string("parent") == "cmdb_ci_computer")
            #expect(meta["attributes"]?.arrayValue?.contains { $0.string("element") == "ip_address" } == true)
        }
    }

    @Test("a long query is kept as a tiny URL and answered by its token")
    func tinyURL() async throws {
        try await TestApp.withRouter { client throws in
            let query = "sys_id=\(Demo.incident3)" + String(repeating: "^ORsys_id=00000000000000000000000000000000", count: 60)
            let made = try await client.send(
                .post, "/api/now/tinyurl", json: #"{"url":"http://localhost/api/now/table/incident?sysparm_query=\#(query)&sysparm_fields=sys_id"}"#,
                headers: .admin
            )
            #expect(made.status == .ok)
            let path = try made.json.string("result")
            #expect(path.hasPrefix("/api/now/table/incident?sysparm_tiny="))
            let rows = try await client.get(path, .admin).results
            #expect(rows.map { $0.string("sys_id") } == [Demo.incident3])
            #expect(try await client.get("/api/now/table/incident?sysparm_tiny=nosuchtoken", .admin).status == .notFound)
            // A token is matched whole, never read as a query: another's kept query cannot be reached.
            #expect(try await client.get("/api/now/table/incident?sysparm_tiny=x%5EORtiny_urlISNOTEMPTY", .abel).status == .notFound)
            #expect(try await client.send(
                .post, "/api/now/tinyurl", json: #"{"url":"http://localhost//evil.example/x?a=b"}"#, headers: .admin
            ).status == .badRequest)
            // Expanded for a user without roles, the query is answered with that user's access.
            #expect(try await client.get(path, .abel).results.isEmpty)
            #expect(try await client.send(.post, "/api/now/tinyurl", json: #"{}"#, headers: .admin).status == .badRequest)
        }
    }

    @Test("Service Catalog API: browse, order now, cart; bad input, access and concurrent orders")
    func serviceCatalog() async throws {
        try await TestApp.withRouter { client throws in
            let sc = "/api/sn_sc/servicecatalog"
            let catalogs = try await client.get("\(sc)/catalogs", .abel).results
            #expect(Set(catalogs.map { $0.string("title") }).isSuperset(of: ["Service Catalog", "Technical Catalog"]))
            let technical = try #require(catalogs.first { $0.string("title") == "Technical Catalog" }).string("sys_id")
            #expect(try await client.get("\(sc)/catalogs/\(technical)/categories", .abel).results.count >= 1)
            let items = try await client.get("\(sc)/items?sysparm_catalog=\(technical)", .abel).results
            let firstItem = try await client.get("\(sc)/items/\(try #require(items.first).string("sys_id"))", .abel).result
            #expect(firstItem["variables"]?.arrayValue?.isEmpty == false)
            #expect(try await client.get("\(sc)/items?sysparm_text=some_not_existent_field", .abel).results.isEmpty)
            let ipad = try await client.get("\(sc)/items?sysparm_text=Ipad", .abel).results
            #expect(ipad.first?.string("name") == "Apple iPad 3")
            let email = try #require(try await client.get("\(sc)/items?sysparm_text=New+Email+Account", .abel).results.first).string("sys_id")

            // Ordering creates the request, the requested item with its answers, and the task.
            let ordered = try await client.send(
                .post, "\(sc)/items/\(email)/order_now",
                json: #"{"sysparm_quantity":1,"sysparm_requested_for":"abraham.lincoln","variables":{"new_email":"a@example.com"}}"#,
                headers: .abel
            )
            #expect(ordered.status == .ok)
            let requestID = try ordered.result.string("request_id")
            #expect(try ordered.result.string("request_number").hasPrefix("REQ"))
            let request = try await client.get("/api/now/table/sc_request/\(requestID)?sysparm_exclude_reference_link=true", .abel).result
            #expect(request.string("requested_for") == DemoData.userID("abraham.lincoln"))
            let requested = try await client.get("/api/now/table/sc_req_item?request=\(requestID)", .admin).results
            #expect(requested.count == 1)
            let tasks = try await client.get("/api/now/table/sc_task?request=\(requestID)", .admin).results
            #expect(tasks.count == 1)
            let options = try await client.get(
                "/api/now/table/sc_item_option_mtom?request_item=\(requested[0].string("sys_id"))", .admin
            ).results
            #expect(options.count == 1)
            // A fulfiller (itil) sees every request; a catalog user does not see another's.
            #expect(try await client.get("/api/now/table/sc_request/\(requestID)", .beth).status == .ok)
            let adminsOrder = try await client.send(
                .post, "\(sc)/items/\(email)/order_now", json: #"{"variables":{"new_email":"z@example.com"}}"#, headers: .admin
            ).result.string("request_id")
            #expect(try await client.get("/api/now/table/sc_request/\(adminsOrder)", .abel).status == .notFound)
            #expect(try await client.get("/api/now/table/sc_request?sysparm_query=sys_id=\(adminsOrder)", .abel).results.isEmpty)

            // Bad input: a mandatory answer missing, a bad quantity, an unknown user, an inactive item.
            #expect(try await client.send(.post, "\(sc)/items/\(email)/order_now", json: #"{"sysparm_quantity":0}"#, headers: .abel).status == .badRequest)
            #expect(try await client.send(.post, "\(sc)/items/\(email)/order_now", json: #"{"sysparm_quantity":"x"}"#, headers: .abel).status == .badRequest)
            #expect(try await client.send(
                .post, "\(sc)/items/\(email)/order_now", json: #"{"sysparm_requested_for":"nobody^ORuser_name=admin"}"#, headers: .abel
            ).status == .badRequest)
            _ = try await client.send(.patch, "/api/now/table/sc_cat_item/\(email)", json: #"{"active":"false"}"#, headers: .admin)
            #expect(try await client.send(.post, "\(sc)/items/\(email)/order_now", json: #"{}"#, headers: .abel).status == .badRequest)
            _ = try await client.send(.patch, "/api/now/table/sc_cat_item/\(email)", json: #"{"active":"true"}"#, headers: .admin)

            // The cart: lines are the caller's own; submitting orders them and empties it.
            let added = try await client.send(
                .post, "\(sc)/items/\(try #require(ipad.first).string("sys_id"))/add_to_cart", json: #"{"sysparm_quantity":2}"#,
                headers: .abel
            )
            #expect(added.status == .ok)
            let line = try added.result["items"]?.arrayValue?.first?.string("cart_item_id") ?? ""
            #expect(try await client.send(.delete, "\(sc)/cart/\(line)", json: nil, headers: .beth).status == .notFound)
            #expect(try await client.get("/api/now/table/sc_cart_item/\(line)", .beth).status == .notFound)
            // A line cannot be handed to someone else (its owner and cart do not change).
            #expect(try await client.send(
                .patch, "/api/now/table/sc_cart_item/\(line)", json: #"{"user":"\#(DemoData.userID("beth.anglin"))"}"#, headers: .abel
            ).status == .forbidden)
            let submitted = try await client.send(.post, "\(sc)/cart/submit_order", json: nil, headers: .abel)
            #expect(submitted.status == .ok)
            #expect(try await client.get("\(sc)/cart", .abel).result["items"]?.arrayValue?.isEmpty == true)
            #expect(try await client.send(.post, "\(sc)/cart/checkout", json: nil, headers: .abel).status == .badRequest)

            // Two submissions of one cart at once: one orders it, the other is told the cart changed (or is empty).
            _ = try await client.send(.post, "\(sc)/items/\(email)/add_to_cart", json: #"{"variables":{"new_email":"d@example.com"}}"#, headers: .abel)
            async let submitA = client.send(.post, "\(sc)/cart/submit_order", json: nil, headers: .abel)
            async let submitB = client.send(.post, "\(sc)/cart/submit_order", json: nil, headers: .abel)
            let (a, b) = try await (submitA, submitB)
            #expect([a.status, b.status].filter { $0 == .ok }.count == 1)
            #expect([a.status, b.status].allSatisfy { $0 == .ok || $0 == .conflict || $0 == .badRequest })

            // Two orders of one item at once: two requests, each with its own item and task.
            async let one = client.send(.post, "\(sc)/items/\(email)/order_now", json: #"{"variables":{"new_email":"b@example.com"}}"#, headers: .abel)
            async let two = client.send(.post, "\(sc)/items/\(email)/order_now", json: #"{"variables":{"new_email":"c@example.com"}}"#, headers: .abel)
            let (first, second) = try await (one, two)
            #expect(first.status == .ok && second.status == .ok)
            #expect(try first.result.string("request_number") != second.result.string("request_number"))
        }
    }

    @Test("client_credentials acts as the client's application user; refused without one or the grant")
    func clientCredentials() async throws {
        try await TestApp.withRouter { client throws in
            let granted = try await client.form(
                "/oauth_token.do", "grant_type=client_credentials&client_id=docket-demo&client_secret=docket-demo-secret"
            )
            #expect(granted.status == .ok)
            let token = try granted.json.string("access_token")
            #expect(try granted.json["refresh_token"] == nil)
            let me = try await client.get("/api/now/table/sys_user?user_name=admin", .bearer(token))
            #expect(me.status == .ok)
            #expect(try await client.form(
                "/oauth_token.do", "grant_type=client_credentials&client_id=docket-demo&client_secret=wrong"
            ).status == .unauthorized)
            // Without an application user the grant is refused.
            _ = try await client.send(
                .patch, "/api/now/table/oauth_entity/\(SysID.stable("demo.oauth_entity.1"))", json: #"{"user":""}"#, headers: .admin
            )
            #expect(try await client.form(
                "/oauth_token.do", "grant_type=client_credentials&client_id=docket-demo&client_secret=docket-demo-secret"
            ).status == .unauthorized)
        }
    }

    @Test("a problem moves only as its state model allows; the refusal names the move and the possible ones")
    func problemTransitions() async throws {
        try await TestApp.withRouter { client throws in
            let made = try await client.send(
                .post, "/api/now/table/problem", json: #"{"short_description":"p","state":"102"}"#, headers: .admin
            ).result
            #expect(made.string("state") == "102")
            let id = made.string("sys_id")
            let refused = try await client.send(.patch, "/api/now/table/problem/\(id)", json: #"{"state":"106"}"#, headers: .admin)
            #expect(refused.status == .badRequest)
            #expect(refused.text.contains("Problem state transition from state 102 to 106 is not possible"))
            #expect(refused.text.contains("Root Cause Analysis (103)"))
            #expect(try await client.get("/api/now/table/problem/\(id)", .admin).result.string("state") == "102")
            for state in ["103", "104", "106", "107"] {
                let moved = try await client.send(.patch, "/api/now/table/problem/\(id)", json: #"{"state":"\#(state)"}"#, headers: .admin)
                #expect(moved.status == .ok)
                #expect(try moved.result.string("state") == state)
            }
            // Closed is the end; other fields still change, and the state written again is no move.
            #expect(try await client.send(.patch, "/api/now/table/problem/\(id)", json: #"{"state":"101"}"#, headers: .admin).status == .badRequest)
            #expect(try await client.send(
                .patch, "/api/now/table/problem/\(id)", json: #"{"state":"107","close_notes":"done"}"#, headers: .admin
            ).status == .ok)
        }
    }

    @Test("Change Management API: create by type and from a template, read, list by type, tasks; bad input and access")
    func changeManagementAPI() async throws {
        try await TestApp.withRouter { client throws in
            let api = "/api/sn_chg_rest/change"
            let templates = try await client.get("\(api)/standard/template", .john)
            #expect(templates.status == .ok)
            let template = try #require(
                templates.results.first { $0["name"]?.string("value") == "Clear BGP sessions on a Cisco router" }?["sys_id"]?.string("value")
            )
            let standard = try await client.send(.post, "\(api)/standard/\(template)", json: #"{"assignment_group":"Network"}"#, headers: .john)
            #expect(standard.status == .ok)
            #expect(try standard.result["type"]?.string("value") == "standard")
            #expect(try standard.result["short_description"]?.string("value") == "Clear BGP sessions on a Cisco router")
            #expect(try standard.result["assignment_group"]?.string("display_value") == "Network")
            let normal = try await client.send(.post, "\(api)/normal?short_description=hello", json: nil, headers: .john)
            let id = try normal.result["sys_id"]?.string("value") ?? ""
            #expect(try normal.result["short_description"]?.string("value") == "hello")
            #expect(try await client.get("\(api)/normal/\(id)", .john).status == .ok)
            #expect(try await client.get("\(api)/emergency/\(id)", .john).status == .notFound)
            let listed = try await client.get("\(api)/normal?sysparm_query=short_description=HELLO", .john)
            #expect(try listed.results.count == 1)
            #expect(listed.headers[.xTotalCount] == "1")
            let patched = try await client.send(.patch, "\(api)/\(id)", json: #"{"risk":"2","type":"emergency"}"#, headers: .john)
            #expect(try patched.result["risk"]?.string("value") == "2")
            #expect(try patched.result["type"]?.string("value") == "normal")
            let task = try await client.send(.post, "\(api)/\(id)/task", json: #"{"short_description":"step one"}"#, headers: .john)
            let taskID = try task.result["sys_id"]?.string("value") ?? ""
            #expect(try task.result["change_request"]?.string("value") == id)
            #expect(try await client.get("\(api)/\(id)/task", .john).results.count == 1)
            // A task is reached only through its own change.
            let other = try await client.send(.post, "\(api)/emergency", json: #"{"short_description":"x"}"#, headers: .john)
            let otherID = try other.result["sys_id"]?.string("value") ?? ""
            #expect(try await client.get("\(api)/\(otherID)/task/\(taskID)", .john).status == .notFound)
            #expect(try await client.send(.delete, "\(api)/\(id)/task/\(taskID)", json: nil, headers: .john).status == .noContent)
            // Bad input and access.
            #expect(try await client.send(.post, "\(api)", json: #"{"type":"sideways"}"#, headers: .john).status == .badRequest)
            #expect(try await client.send(.post, "\(api)/standard/00000000000000000000000000000000", json: nil, headers: .john).status == .notFound)
            #expect(try await client.get("\(api)?sysparm_query=short_descriptionLIKE", .john).status == .ok)
            #expect(try await client.get("\(api)/\(id)", .abel).status == .notFound)
            #expect(try await client.send(.post, "\(api)/normal", json: #"{"short_description":"x"}"#, headers: .abel).status == .forbidden)
            // Two creates at once: two changes with their own numbers.
            async let one = client.send(.post, "\(api)/normal", json: #"{"short_description":"a"}"#, headers: .john)
            async let two = client.send(.post, "\(api)/normal", json: #"{"short_description":"b"}"#, headers: .john)
            let (a, b) = try await (one, two)
            #expect(try a.result["number"]?.string("value") != b.result["number"]?.string("value"))
        }
    }

    @Test("a REST API key (x-sn-apikey) made by `docketd users api-key` stands for its user while active and unexpired")
    func apiKeys() async throws {
        let directory = TemporaryDirectory()
        let configuration = try await TestApp.demoConfiguration(dataDirectory: directory.path)
        let key = try await UserAdministration.createAPIKey(in: configuration, userName: "itil.user", name: "ansible", expires: nil)
        let expired = try await UserAdministration.createAPIKey(
            in: configuration, userName: "john.doe", name: "old", expires: Date().addingTimeInterval(-60)
        )
        #expect(key.count == 64 && key != expired)
        await #expect(throws: UserAdministration.Failure.self) {
            _ = try await UserAdministration.createAPIKey(in: configuration, userName: "nobody.here", name: "x", expires: nil)
        }
        let app = try await buildApplication(configuration)
        try await app.test(.router) { client in
            func with(_ key: String) -> HTTPFields { HTTPFields([HTTPField(name: HTTPField.Name("x-sn-apikey")!, value: key)]) }
            let made = try await client.send(.post, "/api/now/table/incident", json: #"{"short_description":"by key"}"#, headers: with(key))
            #expect(made.status == .created)
            #expect(try made.result.string("sys_created_by") == "itil.user")
            #expect(made.headers[.setCookie] == nil)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with(expired)).status == .unauthorized)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with("0123")).status == .unauthorized)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with(String(repeating: "k", count: 5000))).status == .unauthorized)
            // A key stands for its user whatever Basic credentials come beside it.
            var both = with(key)
            both[.authorization] = HTTPFields.basic("admin", "admin")[.authorization]
            #expect(try await client.get("/api/now/table/api_key", both).results.isEmpty)
            // The key table is the administrator's; what binds a key to its user is docketd's command line's alone.
            #expect(try await client.get("/api/now/table/api_key", with(key)).results.isEmpty)
            let row = try #require(try await client.get("/api/now/table/api_key?name=ansible", .admin).results.first)
            #expect(row.string("token_hash") != key)
            #expect(try await client.send(
                .patch, "/api/now/table/api_key/\(row.string("sys_id"))", json: #"{"user":"\#(DemoData.adminUserID)"}"#, headers: .admin
            ).status == .badRequest)
            #expect(try await client.send(
                .post, "/api/now/table/api_key", json: #"{"name":"forged","user":"\#(DemoData.adminUserID)","token_hash":"\#(APIKeys.hash("mine"))"}"#,
                headers: .admin
            ).status == .badRequest)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with("mine")).status == .unauthorized)
            // A key of a user who may no longer sign in stands for nobody.
            _ = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("itil.user"))", json: #"{"active":"false"}"#, headers: .admin
            )
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with(key)).status == .unauthorized)
            _ = try await client.send(
                .patch, "/api/now/table/sys_user/\(DemoData.userID("itil.user"))", json: #"{"active":"true"}"#, headers: .admin
            )
            _ = try await client.send(.patch, "/api/now/table/api_key/\(row.string("sys_id"))", json: #"{"active":"false"}"#, headers: .admin)
            #expect(try await client.get("/api/now/table/incident?sysparm_limit=1", with(key)).status == .unauthorized)
        }
    }

    @Test("a submitted request is approved at once (a business rule as data); problem tasks and task fields round-trip")
    func requestsAndProblemTasks() async throws {
        try await TestApp.withRouter { client throws in
            let request = try await client.send(
                .post, "/api/now/table/sc_request", json: #"{"request_state":"draft","short_description":"r"}"#, headers: .admin
            ).result
            #expect(request.string("request_state") == "draft")
            let submitted = try await client.send(
                .patch, "/api/now/table/sc_request/\(request.string("sys_id"))", json: #"{"request_state":"submitted"}"#, headers: .admin
            ).result
            #expect(submitted.string("request_state") == "in_process")
            let task = try await client.send(
                .post, "/api/now/table/problem_task",
                json: #"{"problem":"\#(DemoData.id("problem", 1))","problem_task_type":"rca","short_description":"p","user_input":"notes"}"#,
                headers: .admin
            )
            #expect(task.status == .created)
            #expect(try task.result.string("number").hasPrefix("PTASK"))
            #expect(try task.result.string("state") == "151")
            #expect(try task.result.string("user_input") == "notes")
        }
    }
}
