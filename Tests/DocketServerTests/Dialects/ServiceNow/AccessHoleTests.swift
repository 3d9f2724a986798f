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
}
