import DocketModel
import Foundation

/// The HCL Compass ("Traxiem") REST API at `/ccmweb/rest`, as docketd and Compass servers serve it: records by
/// display id, the Edit → Commit / Revert model, field choice lists, saved queries and their result sets.
///
/// The session must log in with ``Credentials/compass(repository:database:userName:password:)`` (or a saved
/// ``Credentials/compassToken(repository:database:userName:token:)``): the token names the repository and database.
///
/// ```swift
/// let client = try DocketClient(instance: "http://127.0.0.1:8080", credentials: .compass(
///     repository: "SampleRepository", database: "SAMPL", userName: "john.doe", password: "password"))
/// let defect = try await client.compass.record("SAMPL00000001")
/// print(defect["Headline"], defect["State"])
/// ```
public struct CompassService: Sendable {
    let session: DocketSession

    /// The repository and database of the session's login.
    public var repository: String { session.credentials.compassDatabase?.repository ?? "" }
    public var database: String { session.credentials.compassDatabase?.database ?? "" }

    /// The repositories the server offers (`GET /repos`).
    public func repositories() async throws -> [String] {
        struct Repo: Decodable { var name: String }
        return try decode([Repo].self, try await send("GET", "/ccmweb/rest/repos")).map(\.name)
    }

    /// The databases of the login's repository.
    public func databases() async throws -> [CompassDatabase] {
        try decode([CompassDatabase].self, try await send("GET", "/ccmweb/rest/repos/\(Self.segment(repository))/databases"))
    }

    /// A record type with its actions.
    public func recordType(_ type: String = "Defect") async throws -> CompassRecordType {
        try decode(CompassRecordType.self, try await send("GET", records(type)))
    }

    /// A record by display id (`SAMPL00000001`).
    public func record(_ id: String, type: String = "Defect") async throws -> CompassRecord {
        try decode(CompassRecord.self, try await send("GET", records(type, id)))
    }

    /// Creates and commits a record in one call (`POST …?operation=Commit`); a missing mandatory field or a value
    /// outside its choice list fails with the server's message and creates nothing.
    public func createRecord(type: String = "Defect", fields: [(String, String)]) async throws -> CompassRecord {
        try decode(
            CompassRecord.self,
            try await send("POST", records(type), query: [("operation", "Commit")], body: Self.fieldsBody(fields))
        )
    }

    /// Starts creating a record (`POST …?operation=Edit`): it has a provisional id until ``commit(_:type:fields:)``,
    /// and ``revert(_:type:)`` leaves no trace of it.
    public func newRecord(type: String = "Defect") async throws -> CompassRecord {
        try decode(
            CompassRecord.self, try await send("POST", records(type), query: [("operation", "Edit")], body: Data("{}".utf8))
        )
    }

    /// Starts an action on a record (`PATCH …?operation=Edit&actionName=…`), or sets fields in the running edit.
    /// The record is then locked against other sessions' edits until it is committed or reverted.
    public func edit(
        _ id: String, type: String = "Defect", action: String? = nil, fields: [(String, String)] = []
    ) async throws -> CompassRecord {
        var query = [("operation", "Edit")]
        if let action { query.append(("actionName", action)) }
        return try decode(
            CompassRecord.self, try await send("PATCH", records(type, id), query: query, body: Self.fieldsBody(fields))
        )
    }

    /// Commits the running edit with the given fields (only the changed ones are needed).
    public func commit(_ id: String, type: String = "Defect", fields: [(String, String)] = []) async throws -> CompassRecord {
        try decode(
            CompassRecord.self,
            try await send("PATCH", records(type, id), query: [("operation", "Commit")], body: Self.fieldsBody(fields))
        )
    }

    /// Discards the running edit.
    public func revert(_ id: String, type: String = "Defect") async throws {
        _ = try await send("PATCH", records(type, id), query: [("operation", "Revert")], body: Data("{}".utf8))
    }

    /// Runs an action in one go: Edit with the action, Commit with the fields, and Revert when the commit fails
    /// (so that the record is not left locked). The commit's error is what is thrown.
    public func run(
        _ action: String, on id: String, type: String = "Defect", fields: [(String, String)] = []
    ) async throws -> CompassRecord {
        _ = try await edit(id, type: type, action: action)
        do {
            return try await commit(id, type: type, fields: fields)
        } catch {
            try? await revert(id, type: type)
            throw error
        }
    }

    /// Deletes a record (the record type's Delete action).
    public func deleteRecord(_ id: String, type: String = "Defect", action: String = "Delete") async throws {
        _ = try await send("DELETE", records(type, id), query: [("actionName", action)])
    }

    /// One field of a record, with the values its picker offers (`fieldChoiceList`), as they are in the running
    /// edit if there is one.
    public func field(_ name: String, of id: String, type: String = "Defect") async throws -> CompassField {
        try decode(CompassField.self, try await send("GET", records(type, id) + "/fields/" + Self.segment(name)))
    }

    /// The workspace's root folders ("Personal Queries", "Public Queries") with their children.
    public func folders() async throws -> [CompassWorkspaceItem] {
        try decode([CompassWorkspaceItem].self, try await send("GET", base + "/workspace/folders"))
    }

    /// Saves a query definition; returns it with its `dbId`.
    public func createQuery(_ query: CompassQueryDef) async throws -> CompassQueryDef {
        let body = try JSONEncoder().encode(query)
        return try decode(CompassQueryDef.self, try await send("POST", base + "/workspace/queryDefs", body: body))
    }

    /// A saved query definition.
    public func query(_ dbId: String) async throws -> CompassQueryDef {
        try decode(CompassQueryDef.self, try await send("GET", base + "/workspace/queryDefs/" + Self.segment(dbId)))
    }

    /// Deletes a saved query definition.
    public func deleteQuery(_ dbId: String) async throws {
        _ = try await send("DELETE", base + "/workspace/queryDefs/" + Self.segment(dbId))
    }

    /// Runs a saved query: creates a result set and reads its pages (at most `limit` rows).
    public func run(query dbId: String, pageSize: Int = 500, limit: Int = 10_000) async throws -> [CompassRow] {
        let path = base + "/workspace/queryDefs/" + Self.segment(dbId) + "/resultsets"
        let options = JSONValue(members: [
            ("resultSetOptions", JSONValue(members: [("pageSize", .integer(pageSize)), ("maxResultSetRows", .integer(limit))])),
        ])
        struct Handle: Decodable { var result_set_id: String }
        let handle = try decode(Handle.self, try await send("POST", path, body: Data(options.serialized())))
        struct Page: Decodable { var rows: [CompassRow] }
        var rows: [CompassRow] = []
        for number in 1... {
            let page = try decode(
                Page.self,
                try await send("GET", path + "/" + Self.segment(handle.result_set_id), query: [("pageNumber", String(number))])
            )
            rows += page.rows
            if page.rows.count < pageSize || rows.count >= limit { break }
        }
        return Array(rows.prefix(limit))
    }

    /// Ends the login on the server (`POST /authenticate/logoff`) and forgets the token.
    public func logoff() async { await session.logout() }

    // MARK: Requests

    private var base: String { "/ccmweb/rest/repos/\(Self.segment(repository))/databases/\(Self.segment(database))" }

    private func records(_ type: String, _ id: String? = nil) -> String {
        base + "/records/" + Self.segment(type) + (id.map { "/" + Self.segment($0) } ?? "")
    }

    static func segment(_ text: String) -> String { Instance.encode(text) }

    static func fieldsBody(_ fields: [(String, String)]) -> Data {
        Data(JSONValue(members: [
            ("fields", .array(fields.map { JSONValue(members: [("name", .string($0.0)), ("value", .string($0.1))]) })),
        ]).serialized())
    }

    private func send(_ method: String, _ path: String, query: [(String, String)] = [], body: Data? = nil) async throws
        -> HTTPResponseData
    {
        guard session.credentials.compassDatabase != nil else {
            throw DocketError(kind: .invalidRequest, message: "the Compass API needs a Compass login (a repository and a database)")
        }
        return try await session.send(method, path, query: query, body: body)
    }

    private func decode<T: Decodable>(_ type: T.Type, _ response: HTTPResponseData) throws -> T {
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw DocketError(
                kind: .decoding, message: "unexpected response from the instance", detail: "\(error)", underlying: error
            )
        }
    }
}

extension DocketClient {
    /// The Compass REST API (needs a Compass login).
    public var compass: CompassService { CompassService(session: session) }
}
