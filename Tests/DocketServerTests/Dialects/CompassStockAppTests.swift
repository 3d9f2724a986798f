import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing

@testable import DocketServer

/// The Compass iOS app's call sequences of §A.9, replayed in order, each response decoded the way the app decodes it:
/// Swift `Codable` models with no optionals where the app has none (the spec's strict-decoding checklist). A missing
/// key, a null string or a number where a string belongs fails the decode, and with it the test.
@Suite("Compass stock app replay")
struct CompassStockAppTests {
    // The app's models, as strict as the app's.
    struct AuthToken: Decodable { var token: String }
    struct Repo: Decodable { var name: String }
    struct Child: Decodable { var name: String; var dbId: String; var workspaceItemType: String }
    struct Folder: Decodable { var name: String; var dbId: String; var children: [Child] }
    struct QueryFieldDef: Decodable { var fieldPathName: String; var isShown: Bool; var sortType: String }
    struct FieldFilter: Decodable { var fieldPath: String; var compOp: String; var values: [String] }
    struct FilterNode: Decodable { var boolOp: String; var fieldFilters: [FieldFilter] }
    struct QueryDef: Decodable {
        var name: String; var dbId: String; var dbIdParent: String; var primaryEntityDefName: String
        var queryFieldDefs: [QueryFieldDef]; var filterNode: FilterNode
    }
    struct ResultSetID: Decodable { var result_set_id: String }
    struct Row: Decodable { var values: [String] }
    struct ResultSet: Decodable { var rows: [Row] }
    struct Field: Decodable { var name: String; var value: String; var requiredness: String }
    struct ChoiceField: Decodable { var name: String; var value: String; var fieldChoiceList: [String] }
    struct Record: Decodable { var fields: [Field] }
    struct Action: Decodable {
        var name: String; var actionType: String; var actionSourceStateNames: [String]; var actionDestStateName: String
    }
    struct RecordType: Decodable { var actions: [Action] }
    struct ErrorBody: Decodable { var status: Int; var message: String }

    static let base = CompassAPITests.base

    static func decode<T: Decodable>(
        _ type: T.Type, _ response: TestResponse, _ status: HTTPResponse.Status = .ok, _ source: SourceLocation = #_sourceLocation
    ) throws -> T {
        #expect(response.status == status, "\(response.text)", sourceLocation: source)
        return try JSONDecoder().decode(type, from: Data(response.body.readableBytesView))
    }

    static func call(
        _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ path: String, _ headers: HTTPFields, body: String? = nil
    ) async throws -> TestResponse {
        try await client.execute(uri: path, method: method, headers: headers, body: body.map { ByteBuffer(string: $0) })
    }

    /// Steps 4a–d: the personal folder, the bundled query created when missing, a result set of 999, its rows.
    static func list(_ client: any TestClientProtocol, _ headers: HTTPFields, _ bundled: String, name: String) async throws -> [Row] {
        let folders = try decode([Folder].self, try await client.get(base + "/workspace/folders", headers))
        let personal = try #require(folders.first { $0.name == "Personal Queries" })
        var queryID = personal.children.first { $0.name == name }?.dbId
        if queryID == nil {
            var body = try JSONValue.parse(Array(bundled.utf8)).objectValue ?? [:]
            body["dbIdParent"] = .string(personal.dbId)
            let created = try await call(client, .post, base + "/workspace/queryDefs", headers, body: String(decoding: JSONValue.object(body).serialized(), as: UTF8.self))
            let echo = try decode(QueryDef.self, created, .created)
            #expect(echo.name == name && echo.dbIdParent == personal.dbId)
            queryID = echo.dbId
        }
        let id = try #require(queryID)
        let handle = try decode(
            ResultSetID.self, try await call(client, .post, base + "/workspace/queryDefs/\(id)/resultsets", headers, body: #"{"pageSize":"999"}"#),
            .created
        )
        return try decode(ResultSet.self, try await client.get(base + "/workspace/queryDefs/\(id)/resultsets/\(handle.result_set_id)", headers)).rows
    }

    @Test("repos, login, both lists, detail, modify with choices, change state, create with Revert and Commit, delete, notifications, logoff")
    func replay() async throws {
        try await TestApp.withRouter { client in
            // 2–3. Repositories without credentials; the login.
            let repos = try Self.decode([Repo].self, try await client.get("/ccmweb/rest/repos", [:]))
            #expect(repos.map(\.name) == ["SampleRepository"])
            let token = try Self.decode(AuthToken.self, try await Self.call(
                client, .post, "/ccmweb/rest/authenticate", [.contentType: "application/json"],
                body: #"{"username":"john.doe","password":"password","repo":"SampleRepository","db":"SAMPL"}"#
            ), .created)
            let john: HTTPFields = [.authorization: "Bearer " + token.token, .contentType: "application/json"]

            // 4. Both tabs (twice: the second time the saved queries are found, not made again).
            let assigned = try await Self.list(client, john, CompassQueryTests.assignedToMe, name: "Assigned To Me")
            #expect(try await Self.list(client, john, CompassQueryTests.assignedToMe, name: "Assigned To Me").count == assigned.count)
            let reported = try await Self.list(client, john, CompassQueryTests.reportedByMe, name: "Reported By Me")
            #expect(!assigned.isEmpty && !reported.isEmpty)
            #expect(assigned.allSatisfy { $0.values.count == 7 && $0.values[0].hasPrefix("SAMPL") })

            // 5. Detail, by the row's first value; the app's positional reads.
            let row = try #require(assigned.first { $0.values[5] == "Opened" })
            let detailPath = Self.base + "/records/defect/" + row.values[0]
            let detail = try Self.decode(Record.self, try await client.get(detailPath, john))
            #expect(detail.fields[5].name == "Headline" && detail.fields[5].value == row.values[1])
            #expect(detail.fields[7].name == "id" && detail.fields[7].value == row.values[0])
            #expect(detail.fields[24].name == "State" && detail.fields[24].value == "Opened")

            // 6. Modify: Edit, a choice list, Commit with the changed field only, read again.
            _ = try Self.decode(Record.self, try await Self.call(client, .patch, detailPath + "?operation=Edit&actionName=Modify", john, body: "{}"))
            let priority = try Self.decode(ChoiceField.self, try await client.get(detailPath + "/fields/Priority", john))
            let newPriority = try #require(priority.fieldChoiceList.first { $0 != priority.value })
            _ = try Self.decode(Record.self, try await Self.call(
                client, .patch, detailPath + "?operation=Commit", john, body: #"{"fields":[{"name":"Priority","value":"\#(newPriority)"}]}"#
            ))
            #expect(try Self.decode(Record.self, try await client.get(detailPath, john)).fields.first { $0.name == "Priority" }?.value == newPriority)
            // Cancel of a modify: Revert.
            _ = try Self.decode(Record.self, try await Self.call(client, .patch, detailPath + "?operation=Edit&actionName=Modify", john, body: "{}"))
            _ = try Self.decode(Record.self, try await Self.call(client, .patch, detailPath + "?operation=Revert", john, body: "{}"))

            // 7. Change state: the transitions the app computes from the record type, then Edit and Commit.
            let recordType = try Self.decode(RecordType.self, try await client.get(Self.base + "/records/defect", john))
            let transitions = recordType.actions.filter { $0.actionType == "_CHANGE_STATE" && $0.actionSourceStateNames.contains("Opened") }
            #expect(Set(transitions.map(\.name)) == ["Resolve", "Postpone"])
            _ = try Self.decode(Record.self, try await Self.call(client, .patch, detailPath + "?operation=Edit&actionName=Postpone", john, body: "{}"))
            let postponed = try Self.decode(Record.self, try await Self.call(client, .patch, detailPath + "?operation=Commit", john, body: "{}"))
            #expect(postponed.fields[24].value == "Postponed")

            // 8. Create: Edit gives a provisional record whose id is fields[7] and whose choice lists work; Revert.
            let draft = try Self.decode(Record.self, try await Self.call(client, .post, Self.base + "/records/defect/?operation=Edit", john, body: "{}"), .created)
            let draftPath = Self.base + "/records/defect/" + draft.fields[7].value
            #expect(!(try Self.decode(ChoiceField.self, try await client.get(draftPath + "/fields/Severity", john))).fieldChoiceList.isEmpty)
            _ = try await Self.call(client, .patch, draftPath + "?operation=Revert", john, body: "{}")
            // The reverted draft left no trace: its provisional id no longer answers.
            _ = try Self.decode(ErrorBody.self, try await client.get(draftPath, john), .notFound)
            // … and again, committed this time (a missing Headline first: an error as the app decodes it).
            let second = try Self.decode(Record.self, try await Self.call(client, .post, Self.base + "/records/defect/?operation=Edit", john, body: "{}"), .created)
            let secondPath = Self.base + "/records/defect/" + second.fields[7].value
            let refused = try Self.decode(ErrorBody.self, try await Self.call(client, .patch, secondPath + "?operation=Commit", john, body: "{}"), .badRequest)
            #expect(refused.status == 400 && refused.message.contains("Headline"))
            let committed = try Self.decode(Record.self, try await Self.call(
                client, .patch, secondPath + "?operation=Commit", john,
                body: #"{"fields":[{"name":"Headline","value":"made like the app"},{"name":"Severity","value":"2-Major"}]}"#
            ))
            let newID = committed.fields[7].value
            #expect(newID.hasPrefix("SAMPL") && newID != second.fields[7].value)
            #expect(committed.fields[24].value == "Submitted")

            // 11. The notification poll (as beth changes one of john's defects): query, result set, page, delete.
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            let since = "2000-01-01 00:00:00"
            _ = try await Self.call(client, .patch, detailPath + "?operation=Edit&actionName=Modify", beth, body: "{}")
            _ = try await Self.call(client, .patch, detailPath + "?operation=Commit", beth, body: #"{"fields":[{"name":"Description","value":"by beth"}]}"#)
            let folders = try Self.decode([Folder].self, try await client.get(Self.base + "/workspace/folders", john))
            let personal = try #require(folders.first { $0.name == "Personal Queries" })
            var body = try JSONValue.parse(Array(try CompassQueryTests.modifiedDefect(since: since).utf8)).objectValue ?? [:]
            body["dbIdParent"] = .string(personal.dbId)
            let query = try Self.decode(QueryDef.self, try await Self.call(
                client, .post, Self.base + "/workspace/queryDefs", john, body: String(decoding: JSONValue.object(body).serialized(), as: UTF8.self)
            ), .created)
            let handle = try Self.decode(ResultSetID.self, try await Self.call(
                client, .post, Self.base + "/workspace/queryDefs/\(query.dbId)/resultsets", john, body: #"{"pageSize":"999"}"#
            ), .created)
            let rows = try Self.decode(ResultSet.self, try await client.get(Self.base + "/workspace/queryDefs/\(query.dbId)/resultsets/\(handle.result_set_id)", john)).rows
            #expect(rows.contains { $0.values[0] == row.values[0] && $0.values[3] == "Modify" })
            #expect(try await client.execute(uri: Self.base + "/workspace/queryDefs/\(query.dbId)", method: .delete, headers: john, body: nil).status.code / 100 == 2)

            // 9. Delete the new defect.
            #expect(try await client.execute(uri: Self.base + "/records/defect/\(newID)?actionName=Delete", method: .delete, headers: john, body: nil).status == .noContent)
            _ = try Self.decode(ErrorBody.self, try await client.get(Self.base + "/records/defect/\(newID)", john), .notFound)

            // 10. Logoff: any 2xx; the token is then refused, as an error the app decodes.
            #expect(try await client.execute(uri: "/ccmweb/rest/authenticate/logoff", method: .post, headers: john, body: nil).status.code / 100 == 2)
            _ = try Self.decode(ErrorBody.self, try await client.get(Self.base + "/workspace/folders", john), .unauthorized)
        }
    }
}
