import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// Enterprises keep apart: records of a scoped table (`eto_participant`) of one enterprise reach no user of the other
/// through any API Docket serves (Table, Stats, GraphQL, Attachments, Batch, live events), and cannot be changed
/// or created there. john.doe is staff of the first enterprise, abel.tuter of the second only.
@Suite("Context isolation between enterprises")
struct ContextIsolationTests {
    static let first = DemoData.id("sys_enterprise", 1)
    static let second = DemoData.id("sys_enterprise", 2)
    static let johns = [5001, 5002, 5003].map { DemoData.id("eto_participant", $0) }
    static let abels = [7001, 7002].map { DemoData.id("eto_participant", $0) }

    /// fred.luddy, staff of no site, with a password to log in.
    static func fred(_ client: any TestClientProtocol) async throws -> HTTPFields {
        let patched = try await client.send(
            .patch, "/api/now/table/sys_user/\(DemoData.userID("fred.luddy"))", json: #"{"password":"fred-password"}"#, headers: .admin
        )
        #expect(patched.status == .ok)
        return .basic("fred.luddy", "fred-password")
    }

    static func ids(_ response: TestResponse) throws -> Set<String> {
        Set(try response.results.compactMap { $0["sys_id"]?.stringValue })
    }

    @Test("Table API, Stats, GraphQL and Batch show each user only their enterprise's participants")
    func reads() async throws {
        try await TestApp.withRouter { client in
            for (headers, mine, theirs) in [(HTTPFields.john, Self.johns, Self.abels), (HTTPFields.abel, Self.abels, Self.johns)] {
                // Table API: lists, counts, single records, queries that try to reach across.
                let list = try await client.get("/api/now/table/eto_participant", headers)
                #expect(try Self.ids(list) == Set(mine))
                #expect(list.headers[HTTPField.Name("X-Total-Count")!] == String(mine.count))
                #expect(try await client.get("/api/now/table/eto_participant/\(theirs[0])", headers).status == .notFound)
                let across = try await client.get("/api/now/table/eto_participant?sysparm_query=sys_domain!%3D\(Self.first)%5EORsys_domain%3D\(Self.first)", headers)
                #expect(try Self.ids(across) == Set(mine))
                let dotWalk = try await client.get("/api/now/table/eto_participant?sysparm_query=site.nameISNOTEMPTY", headers)
                #expect(try Self.ids(dotWalk) == Set(mine))
                // Sites, programs and enterprises are scoped too: each user reads their own enterprise's.
                let enterprises = try await client.get("/api/now/table/sys_enterprise?sysparm_fields=sys_id", headers)
                #expect(try Self.ids(enterprises) == [headers == .john ? Self.first : Self.second])
                let sites = try await client.get("/api/now/table/sys_site?sysparm_fields=number", headers).results
                #expect(Set(sites.compactMap { $0["number"]?.stringValue }) == (headers == .john ? ["101", "102"] : ["201"]))
                // Stats.
                let stats = try await client.get("/api/now/stats/eto_participant?sysparm_count=true", headers).json
                #expect(stats["result"]?["stats"]?["count"]?.stringValue == String(mine.count))
                // GraphQL.
                let document = #"{ GlideRecord_Query { eto_participant { _rowCount _results { sys_id { value } } } } }"#
                let graph = try await GraphQLAPITests.graphql(client, document, headers: headers).json
                let rows = graph["data"]?["GlideRecord_Query"]?["eto_participant"]?["_results"]?.arrayValue ?? []
                #expect(Set(rows.compactMap { $0["sys_id"]?["value"]?.stringValue }) == Set(mine))
                // Batch: the other enterprise's record is as missing inside a batch as outside.
                let batch = try await client.send(
                    .post, "/api/now/v1/batch",
                    json: #"{"batch_request_id":"1","rest_requests":[{"id":"x","method":"GET","url":"/api/now/table/eto_participant/\#(theirs[0])"}]}"#,
                    headers: headers
                ).json
                #expect(batch["serviced_requests"]?.arrayValue?.first?["status_code"] == .number(404))
            }
            // A user who is staff nowhere sees no participant; an administrator sees them all.
            #expect(try Self.ids(try await client.get("/api/now/table/eto_participant", .beth)).count == 3)
            let fred = try await Self.fred(client)
            #expect(try await client.get("/api/now/table/eto_participant", fred).results.isEmpty)
            #expect(try await client.get("/api/now/table/sys_site", fred).results.isEmpty)
            #expect(try Self.ids(try await client.get("/api/now/table/eto_participant", .admin)) == Set(Self.johns + Self.abels))
        }
    }

    @Test("writes stay in the caller's enterprise: new records land there, the other's cannot be changed, deleted or named")
    func writes() async throws {
        try await TestApp.withRouter { client in
            let created = try await client.send(
                .post, "/api/now/table/eto_participant?sysparm_exclude_reference_link=true", json: #"{"first_name":"New","last_name":"Person"}"#
            )
            #expect(created.status == .created)
            #expect(try created.result.string("sys_domain") == Self.first)
            let foreign = try await client.send(
                .post, "/api/now/table/eto_participant", json: #"{"last_name":"Elsewhere","sys_domain":"\#(Self.second)"}"#
            )
            #expect(foreign.status == .forbidden)
            #expect(try await client.send(.patch, "/api/now/table/eto_participant/\(Self.abels[0])", json: #"{"last_name":"x"}"#).status.code >= 400)
            #expect(try await client.execute(uri: "/api/now/table/eto_participant/\(Self.abels[0])", method: .delete, headers: .john, body: nil).status.code >= 400)
            let moved = try await client.send(
                .patch, "/api/now/table/eto_participant/\(Self.johns[0])", json: #"{"sys_domain":"\#(Self.second)"}"#
            )
            #expect(moved.status == .badRequest)
            // abel's records are as they were.
            #expect(try await client.get("/api/now/table/eto_participant/\(Self.abels[0])", .abel).result.string("last_name") == "Becker")
            // A caller staff of no enterprise cannot create one at all.
            let nowhere = try await client.send(
                .post, "/api/now/table/eto_participant", json: #"{"last_name":"x"}"#, headers: try await Self.fred(client)
            )
            #expect(nowhere.status == .badRequest)
        }
    }

    @Test("attachments and live events of one enterprise's records do not reach the other", .timeLimit(.minutes(3)))
    func attachmentsAndEvents() async throws {
        try await TestApp.withRouter { client in
            let upload = try await client.execute(
                uri: "/api/now/attachment/file?table_name=eto_participant&table_sys_id=\(Self.abels[0])&file_name=intake.txt",
                method: .post, headers: [.authorization: HTTPFields.abel[.authorization]!, .contentType: "text/plain"],
                body: ByteBuffer(string: "intake notes")
            )
            #expect(upload.status == .created)
            let attachment = try upload.result.string("sys_id")
            #expect(try await client.get("/api/now/attachment?sysparm_query=table_name=eto_participant", .abel).results.count == 1)
            #expect(try await client.get("/api/now/attachment?sysparm_query=table_name=eto_participant", .john).results.isEmpty)
            #expect(try await client.get("/api/now/attachment/\(attachment)", .john).status == .notFound)
            #expect(try await client.get("/api/now/attachment/\(attachment)/file", .john).status == .notFound)
            // john cannot attach to abel's participant either.
            let refused = try await client.execute(
                uri: "/api/now/attachment/file?table_name=eto_participant&table_sys_id=\(Self.abels[0])&file_name=x.txt",
                method: .post, headers: [.authorization: HTTPFields.john[.authorization]!, .contentType: "text/plain"],
                body: ByteBuffer(string: "x")
            )
            #expect(refused.status.code >= 400)
            // The event log replays each user's own enterprise only.
            for (headers, theirs) in [(HTTPFields.john, Self.abels), (HTTPFields.abel, Self.johns)] {
                let replay = try await client.get("/api/docket/events?table=eto_participant&since=0&follow=false", headers).text
                #expect(!replay.isEmpty)
                #expect(!theirs.contains { replay.contains($0) })
            }
            let johnsReplay = try await client.get("/api/docket/events?table=eto_participant&since=0&follow=false", .john).text
            #expect(Self.johns.allSatisfy { johnsReplay.contains($0) })
        }
    }

    @Test("a GraphQL subscription to a scoped table replays and follows only the subscriber's enterprise", .timeLimit(.minutes(3)))
    func subscriptions() async throws {
        try await GraphQLSocketTests.withServer { client, port in
            let john = try await TestSocket.open(port)
            try await john.initialize()
            try await john.subscribe("p", "subscription { eto_participant(since: 0) { sequence change sys_id } }")
            // Written after the subscription: one participant in each enterprise (by an administrator).
            let theirs = try await client.send(
                .post, "/api/now/table/eto_participant", json: #"{"last_name":"Other","sys_domain":"\#(Self.second)"}"#, headers: .admin
            ).result.string("sys_id")
            let mine = try await client.send(
                .post, "/api/now/table/eto_participant", json: #"{"last_name":"Mine","sys_domain":"\#(Self.first)"}"#, headers: .admin
            ).result.string("sys_id")
            var seen: [String] = []
            while !seen.contains(mine), let message = try await john.receive() {
                #expect(message["type"]?.stringValue == "next")
                if let id = message["payload"]?["data"]?["eto_participant"]?["sys_id"]?.stringValue { seen.append(id) }
            }
            #expect(Set(Self.johns).isSubset(of: Set(seen)))
            #expect(!seen.contains(theirs))
            #expect(Set(seen).isDisjoint(with: Self.abels))
        }
    }
}
