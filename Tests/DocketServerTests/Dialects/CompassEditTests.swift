import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DocketServer

/// Compass's Edit → Commit / Revert model as the stock app drives it (§A.9 steps 6 to 8): modify, change state with
/// a mandatory field, create with a provisional id, revert; edits lock records against other sessions.
@Suite("Compass edits")
struct CompassEditTests {
    static let base = CompassAPITests.base
    static let defect1 = base + "/records/defect/SAMPL00000001"

    static func patch(_ client: any TestClientProtocol, _ uri: String, _ headers: HTTPFields, _ body: String = "{}") async throws -> TestResponse {
        try await client.execute(uri: uri, method: .patch, headers: headers, body: ByteBuffer(string: body))
    }

    static func value(_ record: JSONValue, _ name: String) -> String? {
        record["fields"]?.arrayValue?.first { $0["name"]?.stringValue == name }?["value"]?.stringValue
    }

    static func requiredness(_ record: JSONValue, _ name: String) -> String? {
        record["fields"]?.arrayValue?.first { $0["name"]?.stringValue == name }?["requiredness"]?.stringValue
    }

    @Test("modify: Edit, a field's choices inside the edit, Commit with only the changed field")
    func modify() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let edit = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", john)
            #expect(edit.status == .ok)
            let choices = try await client.get(Self.defect1 + "/fields/Priority", john).json
            #expect(choices["fieldChoiceList"]?.arrayValue?.count == 4)
            let commit = try await Self.patch(
                client, Self.defect1 + "?operation=Commit", john, #"{"fields":[{"name":"Headline","value":"Login fails after a password change"},{"name":"Priority","value":"1-Resolve Immediately"}]}"#
            )
            #expect(commit.status == .ok)
            let record = try commit.json
            #expect(Self.value(record, "Headline") == "Login fails after a password change")
            #expect(Self.value(record, "Priority") == "1-Resolve Immediately")
            #expect(Self.value(record, "version") == "1")  // the demo was imported at version 0
            // The app reads it again: committed for everyone.
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            #expect(Self.value(try await client.get(Self.defect1, beth).json, "Headline") == "Login fails after a password change")
        }
    }

    @Test("an edit locks the record against other sessions; Revert leaves no trace")
    func lockAndRevert() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            _ = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", john, #"{"fields":[{"name":"Headline","value":"draft"}]}"#)
            // Inside the edit john sees his value; beth sees the committed one and cannot edit.
            #expect(Self.value(try await client.get(Self.defect1, john).json, "Headline") == "draft")
            #expect(Self.value(try await client.get(Self.defect1, beth).json, "Headline") == "Login fails after changing the password")
            let blocked = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", beth)
            try CompassAPITests.expectError(blocked, .conflict)
            let reverted = try await Self.patch(client, Self.defect1 + "?operation=Revert", john)
            #expect(reverted.status == .ok)
            let after = try reverted.json
            #expect(Self.value(after, "Headline") == "Login fails after changing the password")
            #expect(Self.value(after, "version") == "0")
            #expect(try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", beth).status == .ok)
        }
    }

    @Test("eight sessions starting an edit of one record at once: exactly one holds it, the others are 409s")
    func concurrentEdits() async throws {
        try await TestApp.withRouter { client in
            var sessions: [HTTPFields] = []
            for _ in 0..<8 { sessions.append(try await CompassAPITests.login(client)) }
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for headers in sessions {
                    group.addTask { try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", headers).status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .ok }.count == 1)
            #expect(statuses.filter { $0 == .conflict }.count == 7)
            // Concurrent creates through Commit take distinct numbers.
            let numbers = try await withThrowingTaskGroup(of: String?.self) { group in
                for (index, headers) in sessions.enumerated() {
                    group.addTask {
                        let response = try await client.execute(
                            uri: Self.base + "/records/defect?operation=Commit", method: .post, headers: headers,
                            body: ByteBuffer(string: #"{"fields":[{"name":"Headline","value":"at once \#(index)"},{"name":"Severity","value":"3-Average"}]}"#)
                        )
                        return Self.value(try response.json, "id")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(numbers.compactMap { $0 }).count == 8)
        }
    }

    @Test("change state: Resolve makes Resolution mandatory; a commit without it fails naming it and stays in edit")
    func changeState() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let illegal = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Close", john)
            try CompassAPITests.expectError(illegal, .badRequest)
            #expect(try illegal.json["message"]?.stringValue?.contains("possible: Resolve, Postpone, Duplicate, Modify") == true)
            let edit = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Resolve", john)
            #expect(Self.requiredness(try edit.json, "Resolution") == "MANDATORY")
            let missing = try await Self.patch(client, Self.defect1 + "?operation=Commit", john)
            try CompassAPITests.expectError(missing, .badRequest)
            #expect(try missing.json["message"]?.stringValue?.contains("Resolution") == true)
            #expect(Self.value(try await client.get(Self.defect1, john).json, "State") == "Opened")
            let done = try await Self.patch(client, Self.defect1 + "?operation=Commit", john, #"{"fields":[{"name":"Resolution","value":"Fixed"}]}"#)
            #expect(done.status == .ok)
            let resolved = try done.json
            #expect(Self.value(resolved, "State") == "Resolved" && Self.value(resolved, "Resolution") == "Fixed")
            let bad = try await Self.patch(client, Self.defect1 + "?operation=Edit&actionName=Modify", john, #"{"fields":[{"name":"Severity","value":"9-Worst"}]}"#)
            #expect(bad.status == .ok)
            try CompassAPITests.expectError(try await Self.patch(client, Self.defect1 + "?operation=Commit", john), .badRequest)
        }
    }

    @Test("create: Edit gives a provisional id whose fields work; Commit numbers it; Revert creates nothing; Commit at once")
    func create() async throws {
        try await TestApp.withRouter { client in
            let john = try await CompassAPITests.login(client)
            let started = try await client.execute(uri: Self.base + "/records/defect/?operation=Edit", method: .post, headers: john, body: ByteBuffer(string: "{}"))
            #expect(started.status == .created)
            let fields = try started.json["fields"]?.arrayValue ?? []
            let provisional = try #require(fields[7]["value"]?.stringValue)
            #expect(fields[26]["value"]?.stringValue == "john.doe")  // Submitter
            #expect(Self.requiredness(try started.json, "Headline") == "MANDATORY")
            let severity = try await client.get(Self.base + "/records/defect/\(provisional)/fields/Severity", john)
            #expect(try severity.json["fieldChoiceList"]?.arrayValue?.count == 5)
            // Another session does not see it.
            let beth = try await CompassAPITests.login(client, "beth.anglin")
            try CompassAPITests.expectError(try await client.get(Self.base + "/records/defect/\(provisional)", beth), .notFound)
            let committed = try await Self.patch(
                client, Self.base + "/records/defect/\(provisional)?operation=Commit", john,
                #"{"fields":[{"name":"Headline","value":"Export loses accents"},{"name":"Severity","value":"3-Average"},{"name":"Owner","value":"beth.anglin"}]}"#
            )
            #expect(committed.status == .ok)
            let record = try committed.json
            #expect(Self.value(record, "id") == "SAMPL00000012")
            #expect(Self.value(record, "State") == "Submitted" && Self.value(record, "Owner") == "beth.anglin")
            // A new record reverted leaves nothing; the next number is still free.
            let other = try await client.execute(uri: Self.base + "/records/defect?operation=Edit", method: .post, headers: john, body: nil)
            let otherID = try #require(try other.json["fields"]?.arrayValue?[7]["value"]?.stringValue)
            let reverted = try await Self.patch(client, Self.base + "/records/defect/\(otherID)?operation=Revert", john)
            #expect(reverted.status == .ok)
            #expect(try reverted.json["fields"]?.arrayValue?.count == 30)
            try CompassAPITests.expectError(try await client.get(Self.base + "/records/defect/\(otherID)", john), .notFound)
            let direct = try await client.execute(
                uri: Self.base + "/records/defect?operation=Commit", method: .post, headers: john,
                body: ByteBuffer(string: #"{"fields":[{"name":"Headline","value":"Created at once"},{"name":"Severity","value":"4-Minor"}]}"#)
            )
            #expect(direct.status == .created)
            #expect(Self.value(try direct.json, "id") == "SAMPL00000013")
            let incomplete = try await client.execute(
                uri: Self.base + "/records/defect?operation=Commit", method: .post, headers: john, body: ByteBuffer(string: #"{"fields":[]}"#)
            )
            try CompassAPITests.expectError(incomplete, .badRequest)
            try CompassAPITests.expectError(
                try await client.execute(uri: Self.base + "/records/defect?operation=Commit", method: .post, headers: john,
                                         body: ByteBuffer(string: #"{"fields":[{"name":"Nope","value":"x"}]}"#)),
                .badRequest
            )
        }
    }
}

/// Compass across two docketd on one PostgreSQL database: a token from one works on the other, an edit started on
/// one is seen and locked on the other, a result set made on one pages on the other, logoff ends the token on both.
@Suite("Compass across instances", .enabled(if: TestDatabase.postgres != nil, TestDatabase.postgresHint))
struct CompassSharedTests {
    @Test("tokens, edits, locks and result sets are shared by every instance")
    func shared() async throws {
        try await SharedInstancesTests.withTwoApps { a, b in
            let john = try await CompassAPITests.login(a)
            let beth = try await CompassAPITests.login(b, "beth.anglin")
            let record = CompassEditTests.defect1
            _ = try await CompassEditTests.patch(a, record + "?operation=Edit&actionName=Modify", john, #"{"fields":[{"name":"Headline","value":"draft on A"}]}"#)
            #expect(CompassEditTests.value(try await b.get(record, john).json, "Headline") == "draft on A")
            try CompassAPITests.expectError(try await CompassEditTests.patch(b, record + "?operation=Edit&actionName=Modify", beth), .conflict)
            let committed = try await CompassEditTests.patch(b, record + "?operation=Commit", john)
            #expect(committed.status == .ok)
            #expect(CompassEditTests.value(try await a.get(record, beth).json, "Headline") == "draft on A")
            var body = try JSONValue.parse(Array(CompassQueryTests.assignedToMe.utf8)).objectValue ?? [:]
            body["dbIdParent"] = .string(CompassQueries.personalFolder)
            let created = try await a.execute(
                uri: CompassAPITests.base + "/workspace/queryDefs", method: .post, headers: john,
                body: ByteBuffer(bytes: JSONValue.object(body).serialized())
            )
            let query = try #require(try created.json["dbId"]?.stringValue)
            let set = try await a.execute(
                uri: CompassAPITests.base + "/workspace/queryDefs/\(query)/resultsets", method: .post, headers: john,
                body: ByteBuffer(string: #"{"pageSize":"999"}"#)
            )
            let handle = try #require(try set.json["result_set_id"]?.stringValue)
            let page = try await b.get(CompassAPITests.base + "/workspace/queryDefs/\(query)/resultsets/\(handle)", john).json
            #expect(page["rows"]?.arrayValue?.count == 4)
            #expect(try await a.send(.post, "/ccmweb/rest/authenticate/logoff", json: nil, headers: john).status == .ok)
            try CompassAPITests.expectError(try await b.get(record, john), .unauthorized)
        }
    }
}
