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
            #expect(try await Self.patch(client, Self.base + "/records/defect/\(otherID)?operation=Revert", john).status == .ok)
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
