import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import DocketServer

/// The Compass REST API at /ccmweb/rest as the stock iOS app calls it: repositories without credentials, a login
/// bound to a repository and database, the record type, records by display id and dbid, single fields with
/// choice lists, deletion through the Delete action; errors as `{status, message}`.
@Suite("Compass REST API")
struct CompassAPITests {
    static let base = "/ccmweb/rest/repos/SampleRepository/databases/SAMPL"

    static func login(_ client: any TestClientProtocol, _ user: String = "john.doe", _ password: String = "password") async throws -> HTTPFields {
        let response = try await client.send(
            .post, "/ccmweb/rest/authenticate",
            json: #"{"username":"\#(user)","password":"\#(password)","repo":"SampleRepository","db":"SAMPL"}"#, headers: [:]
        )
        #expect(response.status == .created)
        let token = try #require(try response.json["token"]?.stringValue)
        return [.authorization: "Bearer " + token, .contentType: "application/json"]
    }

    static func expectError(_ response: TestResponse, _ status: HTTPResponse.Status, _ source: SourceLocation = #_sourceLocation) throws {
        #expect(response.status == status, sourceLocation: source)
        let json = try response.json
        #expect(json["status"]?.intValue == status.code, sourceLocation: source)
        #expect(json["message"]?.stringValue?.isEmpty == false, sourceLocation: source)
        #expect(json.objectValue?.keys.elements == ["status", "message"], sourceLocation: source)
    }

    @Test("repos without credentials; a login answers 201 with an HS512 JWT bound to repo and db; logoff ends it")
    func loginAndLogoff() async throws {
        try await TestApp.withRouter { client in
            let repos = try await client.execute(uri: "/ccmweb/rest/repos", method: .get, headers: [:], body: nil)
            #expect(repos.status == .ok)
            #expect(try repos.json == .array([.object(["name": .string("SampleRepository")])]))
            let headers = try await Self.login(client)
            let token = String(headers[.authorization]!.dropFirst("Bearer ".count))
            let parts = token.split(separator: ".")
            #expect(parts.count == 3)
            let payload = try JSONValue.parse(try #require(Base64URL.decode(parts[1])))
            #expect(payload["sub"]?.stringValue == "john.doe" && payload["repo"]?.stringValue == "SampleRepository")
            #expect(payload["db"]?.stringValue == "SAMPL")
            #expect((payload["exp"]?.intValue ?? 0) - (payload["iat"]?.intValue ?? 0) == 86_400)
            let header = try JSONValue.parse(try #require(Base64URL.decode(parts[0])))
            #expect(header["alg"]?.stringValue == "HS512")
            #expect(header["kid"]?.stringValue?.hasPrefix("hs512-") == true)
            #expect(try await client.get(Self.base + "/records/defect/SAMPL00000001", headers).status == .ok)
            #expect(try await client.send(.post, "/ccmweb/rest/authenticate/logoff", json: nil, headers: headers).status == .ok)
            try Self.expectError(try await client.get(Self.base + "/records/defect/SAMPL00000001", headers), .unauthorized)
        }
    }

    @Test("a Compass token follows Docket's event stream, and nothing else below /api; logoff ends it", .timeLimit(.minutes(3)))
    func eventStream() async throws {
        try await TestApp.withRouter(configure: {
            $0.liveHeartbeat = .milliseconds(50)
            $0.liveStreamsPerUser = 1
        }) { client in
            let john = try await Self.login(client)
            let beth = try await Self.login(client, "beth.anglin")
            _ = try await client.send(.patch, Self.base + "/records/defect/SAMPL00000001?operation=Edit&actionName=Modify", json: "{}", headers: beth)
            _ = try await client.send(
                .patch, Self.base + "/records/defect/SAMPL00000001?operation=Commit",
                json: #"{"fields":[{"name":"Description","value":"by beth"}]}"#, headers: beth
            )
            let bearer: HTTPFields = [.authorization: john[.authorization]!]
            let replay = try await client.get("/api/docket/events?table=defect&query=assigned_to%3Djavascript:gs.getUserID()&since=0&follow=false", bearer)
            #expect(replay.status == .ok)
            let changes = LiveEventsTests.messages(replay.text).filter { $0["event"] == nil }
            #expect(changes.contains { ($0["data"] ?? "").contains("\"by beth\"") })
            // The token is for the event stream only: the Table API and GraphQL refuse it.
            #expect(try await client.get("/api/now/table/incident", bearer).status == .unauthorized)
            #expect(try await client.get("/api/now/graphql", bearer).status == .unauthorized)
            #expect(try await client.get("/api/docket/events?follow=false", [.authorization: "Bearer a.b.c"]).status == .unauthorized)
            // Logoff ends an open stream (revoked) and the token.
            let stream = try await LiveEventsTests.openStream(client, headers: bearer, probe: .john)
            _ = try await client.execute(uri: "/ccmweb/rest/authenticate/logoff", method: .post, headers: john, body: nil)
            #expect(LiveEventsTests.messages(try await stream.value.text).map { $0["event"] } == ["ready", "revoked"])
            #expect(try await client.get("/api/docket/events?follow=false", bearer).status == .unauthorized)
        }
    }

    @Test("bad logins and bad tokens are {status, message} errors")
    func refusals() async throws {
        try await TestApp.withRouter { client in
            let wrong = try await client.send(
                .post, "/ccmweb/rest/authenticate",
                json: #"{"username":"john.doe","password":"nope","repo":"SampleRepository","db":"SAMPL"}"#, headers: [:]
            )
            try Self.expectError(wrong, .unauthorized)
            for body in [#"{"username":"john.doe","password":"password","repo":"Other","db":"SAMPL"}"#,
                         #"{"username":"john.doe","password":"password","repo":"SampleRepository","db":"NOPE"}"#,
                         #"{"password":"password"}"#, "[1,2]", "not json"] {
                try Self.expectError(try await client.send(.post, "/ccmweb/rest/authenticate", json: body, headers: [:]), .badRequest)
            }
            for authorization in ["", "Bearer forged", "Bearer a.b.c", "Basic am9objpwYXNzd29yZA=="] {
                let headers: HTTPFields = authorization.isEmpty ? [:] : [.authorization: authorization]
                try Self.expectError(try await client.get(Self.base + "/records/defect", headers), .unauthorized)
            }
            // A token signed with another key is refused although well formed.
            let other = CompassTokens(keys: try await TokenKeys.make(secret: Array(repeating: 7, count: 64)), sessions: SessionStore(storage: NoStorage()))
            let forged = try await other.sign(.init(user: "admin", repo: "SampleRepository", database: "SAMPL", issuedAt: 0, expires: Int(Int32.max), session: "x"))
            try Self.expectError(try await client.get(Self.base + "/records/defect", [.authorization: "Bearer " + forged]), .unauthorized)
            let headers = try await Self.login(client)
            try Self.expectError(try await client.get("/ccmweb/rest/repos/Other/databases/SAMPL/records/defect", headers), .notFound)
            // The repository's databases: only with a token, and only the token's repository.
            let databases = try await client.get("/ccmweb/rest/repos/SampleRepository/databases/", headers)
            #expect(databases.status == .ok)
            #expect(try databases.json.arrayValue?.map { $0["name"]?.stringValue } == ["SAMPL"])
            try Self.expectError(try await client.get("/ccmweb/rest/repos/SampleRepository/databases", [:]), .unauthorized)
            try Self.expectError(try await client.get("/ccmweb/rest/repos/Other/databases", headers), .notFound)
            try Self.expectError(try await client.get(Self.base + "/records/nothing", headers), .notFound)
            try Self.expectError(try await client.get(Self.base + "/records/defect/SAMPL99999999", headers), .notFound)
            try Self.expectError(try await client.get(Self.base + "/records/defect/1?useDbid=true", headers), .notFound)
            try Self.expectError(try await client.get(Self.base + "/no/such/path", headers), .notFound)
        }
    }

    @Test("the record type lists every action with source and destination states; names are case-insensitive")
    func recordType() async throws {
        try await TestApp.withRouter { client in
            let headers = try await Self.login(client)
            for path in ["/records/defect", "/records/Defect/", "/records/DEFECT"] {
                let response = try await client.get(Self.base + path, headers)
                #expect(response.status == .ok, "\(path)")
                let json = try response.json
                #expect(json["name"]?.stringValue == "Defect" && json["type"]?.stringValue == "_REQ_ENTITY")
                let actions = json["actions"]?.arrayValue ?? []
                #expect(actions.count == 12)
                for action in actions {
                    #expect(action.objectValue?.keys.elements == ["name", "actionType", "actionSourceStateNames", "actionDestStateName"])
                    #expect(action["actionSourceStateNames"]?.arrayValue != nil && action["actionDestStateName"]?.stringValue != nil)
                }
                let resolve = actions.first { $0["name"]?.stringValue == "Resolve" }
                #expect(resolve?["actionType"]?.stringValue == "_CHANGE_STATE")
                #expect(resolve?["actionSourceStateNames"] == .array([.string("Assigned"), .string("Opened")]))
                #expect(resolve?["actionDestStateName"]?.stringValue == "Resolved")
            }
        }
    }

    @Test("a record: fields in Compass's order (Headline 5, id 7, State 24), strings never null, legal actions; by dbid too")
    func record() async throws {
        try await TestApp.withRouter { client in
            let headers = try await Self.login(client)
            let response = try await client.get(Self.base + "/records/defect/SAMPL00000001", headers)
            #expect(response.status == .ok)
            let json = try response.json
            let fields = json["fields"]?.arrayValue ?? []
            #expect(fields.count == 30)
            #expect(fields[5]["name"]?.stringValue == "Headline")
            #expect(fields[5]["value"]?.stringValue == "Login fails after changing the password")
            #expect(fields[7]["value"]?.stringValue == "SAMPL00000001")
            #expect(fields[24]["name"]?.stringValue == "State" && fields[24]["value"]?.stringValue == "Opened")
            let names = fields.compactMap { $0["name"]?.stringValue }
            #expect(names == names.sorted { $0.lowercased() < $1.lowercased() })
            for field in fields {
                for key in ["name", "value", "valueStatus", "validationStatus", "requiredness", "requirednessForUser", "type", "messageText"] {
                    #expect(field[key]?.stringValue != nil, "\(field["name"] ?? .null).\(key)")
                }
            }
            func value(_ name: String) -> String? { fields.first { $0["name"]?.stringValue == name }?["value"]?.stringValue }
            #expect(value("Owner") == "john.doe" && value("Submitter") == "beth.anglin")
            #expect(value("Severity") == "2-Major" && value("Project") == "Docket Mobile")
            #expect(fields.first { $0["name"]?.stringValue == "Headline" }?["requiredness"]?.stringValue == "MANDATORY")
            #expect(fields.first { $0["name"]?.stringValue == "State" }?["requiredness"]?.stringValue == "READONLY")
            #expect(json["legalActions"]?.arrayValue?.compactMap { $0["actionName"]?.stringValue }
                == ["Resolve", "Postpone", "Duplicate", "Modify", "Delete"])
            let dbid = try #require(json["dbId"]?.stringValue)
            #expect(dbid == "33554433")
            let byDbid = try await client.get(Self.base + "/records/defect/\(dbid)?useDbid=true", headers)
            #expect(try byDbid.json["displayName"]?.stringValue == "SAMPL00000001")
        }
    }

    @Test("a field with its choice list: severities, users for Owner")
    func fieldChoices() async throws {
        try await TestApp.withRouter { client in
            let headers = try await Self.login(client)
            let severity = try await client.get(Self.base + "/records/defect/SAMPL00000001/fields/Severity", headers).json
            #expect(severity["fieldChoiceList"] == .array(["1-Critical", "2-Major", "3-Average", "4-Minor", "5-Enhancement"].map(JSONValue.string)))
            let owner = try await client.get(Self.base + "/records/defect/SAMPL00000001/fields/owner", headers).json
            #expect(owner["fieldChoiceList"]?.arrayValue?.contains(.string("beth.anglin")) == true)
            try Self.expectError(try await client.get(Self.base + "/records/defect/SAMPL00000001/fields/Nope", headers), .notFound)
        }
    }

    @Test("delete runs the Delete action: itil may, a user without it may not; the record and its history say so")
    func delete() async throws {
        try await TestApp.withRouter { client in
            let abel = try await Self.login(client, "abel.tuter")
            try Self.expectError(
                try await client.execute(uri: Self.base + "/records/defect/SAMPL00000002?actionName=Delete", method: .delete, headers: abel, body: nil),
                .forbidden
            )
            let john = try await Self.login(client)
            try Self.expectError(
                try await client.execute(uri: Self.base + "/records/defect/SAMPL00000002?actionName=Modify", method: .delete, headers: john, body: nil),
                .badRequest
            )
            let deleted = try await client.execute(uri: Self.base + "/records/defect/SAMPL00000002/?actionName=Delete", method: .delete, headers: john, body: nil)
            #expect(deleted.status == .noContent)
            try Self.expectError(try await client.get(Self.base + "/records/defect/SAMPL00000002", john), .notFound)
        }
    }
}

/// A storage that is never reached (for tokens checked before any session lookup).
struct NoStorage: Storage {
    var dialect: StorageDialect { .sqlite }
    func read<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T { throw CancellationError() }
    func write<T: Sendable>(scope: WriteScope, _ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T { throw CancellationError() }
    func writeUnordered<T: Sendable>(_ body: @Sendable (SQLExecutor) async throws -> T) async throws -> T { throw CancellationError() }
    func close() async throws {}
    func logSignals(ignoring: @escaping @Sendable (Int) -> Bool) -> AsyncStream<Void>? { nil }
    var faults: StatementFaults { StatementFaults() }
}
