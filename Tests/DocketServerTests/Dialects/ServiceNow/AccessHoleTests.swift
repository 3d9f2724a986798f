import DocketModel
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

@Suite("Access rules hold for attachments and sys_ fields")
struct AccessHoleTests {
    @Test("adding an attachment needs write access to the record; a refused upload writes nothing")
    func attachmentNeedsWrite() async throws {
        try await TestApp.withRouter { client throws in
            let adminRecord = DemoData.userID("admin")
            let refused = try await client.execute(
                uri: "/api/now/attachment/file?table_name=sys_user&table_sys_id=\(adminRecord)&file_name=x.txt",
                method: .post, headers: [.authorization: HTTPFields.abel[.authorization]!, .contentType: "text/plain"],
                body: ByteBuffer(string: "hello")
            )
            #expect(refused.status == .forbidden)
            let listed = try await client.get("/api/now/attachment?sysparm_query=table_sys_id=\(adminRecord)", .admin)
            #expect(try listed.results.isEmpty)
            // abel is the caller of INC0010001 and may comment on it, so he may attach files to it.
            let allowed = try await client.execute(
                uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=x.txt",
                method: .post, headers: [.authorization: HTTPFields.abel[.authorization]!, .contentType: "text/plain"],
                body: ByteBuffer(string: "hello")
            )
            #expect(allowed.status == .created)
        }
    }

    @Test("non-admins cannot set sys_ fields, even with sysparm_suppress_auto_sys_field")
    func sysFields() async throws {
        try await TestApp.withRouter { client throws in
            let before = try await client.get("/api/now/table/incident/\(Demo.incident1)", .admin).result
            // abel.tuter, with no role, may comment on his own incident: the sys_ values must not come along.
            let patched = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident1)?sysparm_suppress_auto_sys_field=true",
                json: #"{"comments":"hi","sys_created_by":"abel.tuter","sys_mod_count":"99"}"#, headers: .abel
            )
            #expect(patched.status == .ok)
            let after = try await client.get("/api/now/table/incident/\(Demo.incident1)", .admin).result
            #expect(after.string("sys_created_by") == before.string("sys_created_by"))
            #expect(after.string("sys_mod_count") == String((Int(before.string("sys_mod_count")) ?? 0) + 1))
            #expect(after.string("sys_updated_by") == "abel.tuter")
        }
    }

    @Test(
        "writes a browser could forge cross-site are refused with 415 and write nothing",
        arguments: ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
    )
    func forgedWrites(type: String) async throws {
        try await TestApp.withRouter { client throws in
            var headers = HTTPFields.john
            if !type.isEmpty { headers[.contentType] = type }
            let before = try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count
            let created = try await client.execute(
                uri: "/api/now/table/incident", method: .post, headers: headers,
                body: ByteBuffer(string: #"{"short_description":"forged"}"#)
            )
            #expect(created.status == .unsupportedMediaType)
            let patched = try await client.execute(
                uri: "/api/now/table/incident/\(Demo.incident1)", method: .patch, headers: headers,
                body: ByteBuffer(string: #"{"short_description":"forged"}"#)
            )
            #expect(patched.status == .unsupportedMediaType)
            let batch = try await client.execute(
                uri: "/api/now/v1/batch", method: .post, headers: headers, body: ByteBuffer(string: #"{"rest_requests":[]}"#)
            )
            #expect(batch.status == .unsupportedMediaType)
            #expect(try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .admin).results.count == before)
            let record = try await client.get("/api/now/table/incident/\(Demo.incident1)", .admin).result
            #expect(record.string("short_description") != "forged")
        }
    }

    @Test("a POST with no body and no content type creates a record with defaults (pysnc's insert of an empty record); from another site it is refused")
    func emptyUntypedInsert() async throws {
        try await TestApp.withRouter { client throws in
            let before = try await client.get("/api/now/table/problem?sysparm_fields=sys_id", .admin).results.count
            for length: String? in [nil, "0"] {
                var headers = HTTPFields.admin
                if let length { headers[.contentLength] = length }
                let created = try await client.execute(
                    uri: "/api/now/table/problem?sysparm_exclude_reference_link=true", method: .post, headers: headers, body: nil
                )
                #expect(created.status == .created)
                #expect(try created.result.string("number").hasPrefix("PRB"))
                #expect(try created.result.string("opened_by") == DemoData.adminUserID)
            }
            for extra: HTTPFields in [[.origin: "https://evil.example"], [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"]] {
                var headers = HTTPFields.admin
                headers.append(contentsOf: extra)
                let refused = try await client.execute(uri: "/api/now/table/problem", method: .post, headers: headers, body: nil)
                #expect(refused.status == .unsupportedMediaType)
            }
            // A body still needs its type.
            let typeless = try await client.execute(
                uri: "/api/now/table/problem", method: .post, headers: .admin, body: ByteBuffer(string: "{}")
            )
            #expect(typeless.status == .unsupportedMediaType)
            #expect(try await client.get("/api/now/table/problem?sysparm_fields=sys_id", .admin).results.count == before + 2)
        }
    }

    @Test("a record's visibility is the same whichever table of its hierarchy is queried (defects through task)")
    func hierarchyVisibility() async throws {
        try await TestApp.withRouter { client throws in
            for user: HTTPFields in [.abel, .john] {
                let defects = try await client.get("/api/now/table/defect?sysparm_fields=sys_id&sysparm_limit=500", user).results
                    .compactMap { $0["sys_id"]?.stringValue }
                #expect(!defects.isEmpty)
                let throughTask = try await client.get(
                    "/api/now/table/task?sysparm_query=sys_class_name%3Ddefect&sysparm_fields=sys_id&sysparm_limit=500", user
                ).results.compactMap { $0["sys_id"]?.stringValue }
                #expect(Set(throughTask) == Set(defects))
                // One record, both ways.
                let one = defects[0]
                #expect(try await client.get("/api/now/table/task/\(one)", user).status == .ok)
                #expect(try await client.get("/api/now/table/defect/\(one)", user).status == .ok)
                // Counts agree (the Aggregate API compiles the same filter).
                let counted = try await client.get("/api/now/stats/task?sysparm_count=true&sysparm_query=sys_class_name%3Ddefect", user)
                #expect(try counted.json["result"]?["stats"]?["count"]?.stringValue == String(defects.count))
            }
            // abel still sees no incident he is not involved in, through task or incident.
            let incidents = try await client.get("/api/now/table/incident?sysparm_fields=sys_id", .abel).results.count
            let throughTask = try await client.get(
                "/api/now/table/task?sysparm_query=sys_class_name%3Dincident&sysparm_fields=sys_id", .abel
            ).results.count
            #expect(incidents == throughTask)
            #expect(incidents < 22)
        }
    }

    @Test("JSON media types with parameters and +json suffixes are accepted")
    func jsonTypes() async throws {
        try await TestApp.withRouter { client throws in
            for type in ["application/json; charset=utf-8", "application/vnd.api+json", "Application/JSON"] {
                var headers = HTTPFields.john
                headers[.contentType] = type
                let created = try await client.execute(
                    uri: "/api/now/table/incident", method: .post, headers: headers,
                    body: ByteBuffer(string: #"{"short_description":"typed"}"#)
                )
                #expect(created.status == .created, "\(type)")
            }
        }
    }

    @Test("a cross-origin attachment upload of a type a page may send unasked is refused; API clients are not")
    func crossOriginUpload() async throws {
        try await TestApp.withRouter { client throws in
            let uri = "/api/now/attachment/file?table_name=incident&table_sys_id=\(Demo.incident1)&file_name=x.txt"
            for extra: HTTPFields in [[.origin: "https://evil.example"], [HTTPField.Name("Sec-Fetch-Site")!: "cross-site"]] {
                var headers = HTTPFields.john
                headers[.contentType] = "text/plain"
                headers.append(contentsOf: extra)
                let refused = try await client.execute(uri: uri, method: .post, headers: headers, body: ByteBuffer(string: "x"))
                #expect(refused.status == .unsupportedMediaType)
            }
            let listed = try await client.get("/api/now/attachment?sysparm_query=table_sys_id=\(Demo.incident1)", .admin)
            #expect(try listed.results.isEmpty)
            // An image needs a preflight from another origin, so it may come from anywhere.
            var image = HTTPFields.john
            image[.contentType] = "image/png"
            image[.origin] = "https://elsewhere.example"
            #expect(try await client.execute(uri: uri, method: .post, headers: image, body: ByteBuffer(string: "x")).status == .created)
        }
    }

    @Test("a reference to a record the caller cannot read shows its sys_id but not its display value")
    func referenceDisplayFiltered() async throws {
        try await TestApp.withRouter { client throws in
            let linked = try await client.send(
                .patch, "/api/now/table/incident/\(Demo.incident1)",
                json: #"{"problem_id":"\#(DemoData.id("problem", 1))","parent":"\#(Demo.incident3)"}"#, headers: .admin
            )
            #expect(linked.status == .ok)
            let url = "/api/now/table/incident/\(Demo.incident1)?sysparm_display_value=all&sysparm_fields=problem_id,parent,caller_id"
            let asAbel = try await client.get(url, .abel).result
            #expect(asAbel["problem_id"]?.string("value") == DemoData.id("problem", 1))
            #expect(asAbel["problem_id"]?.string("display_value") == "")
            #expect(asAbel["parent"]?.string("display_value") == "")
            #expect(asAbel["caller_id"]?.string("display_value") == "Abel Tuter")
            let asJohn = try await client.get(url, .john).result
            #expect(asJohn["problem_id"]?.string("display_value").hasPrefix("PRB") == true)
            #expect(asJohn["parent"]?.string("display_value").hasPrefix("INC") == true)
            // The same through the list and in grouped stats.
            let listed = try await client.get(
                "/api/now/table/incident?sysparm_query=sys_id=\(Demo.incident1)&sysparm_display_value=true&sysparm_fields=problem_id", .abel
            )
            #expect(try listed.results.first?.string("problem_id") == "")
            let grouped = try await client.get(
                "/api/now/stats/incident?sysparm_count=true&sysparm_group_by=problem_id&sysparm_display_value=true&sysparm_query=sys_id=\(Demo.incident1)",
                .abel
            )
            #expect(grouped.status == .ok)
            #expect(!grouped.text.contains("PRB"))
        }
    }

    @Test("attachment quotas per record and per user are enforced in the writing transaction; admins skip the user quota")
    func attachmentQuota() async throws {
        try await TestApp.withRouter(configure: { $0.attachmentQuotaPerRecord = 100; $0.attachmentQuotaPerUser = 150 }) { client throws in
            func upload(_ record: String, _ bytes: Int, _ headers: HTTPFields = .john) async throws -> HTTPResponse.Status {
                var fields = headers
                fields[.contentType] = "application/octet-stream"
                return try await client.execute(
                    uri: "/api/now/attachment/file?table_name=incident&table_sys_id=\(record)&file_name=f.bin",
                    method: .post, headers: fields, body: ByteBuffer(bytes: [UInt8](repeating: 7, count: bytes))
                ).status
            }
            #expect(try await upload(Demo.incident1, 60) == .created)
            #expect(try await upload(Demo.incident1, 41) == .contentTooLarge)
            #expect(try await upload(Demo.incident1, 40) == .created)
            #expect(try await upload(Demo.incident3, 60) == .contentTooLarge) // john's total would be 160
            #expect(try await upload(Demo.incident3, 50) == .created)
            #expect(try await upload(Demo.incident3, 50, .admin) == .created)
            let listed = try await client.get("/api/now/attachment?sysparm_query=table_sys_id=\(Demo.incident1)", .admin)
            #expect(try listed.results.count == 2)
        }
    }
}
