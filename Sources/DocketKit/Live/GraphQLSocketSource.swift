import DocketModel
import Foundation

/// Docket's subscriptions on `/api/now/graphql` over a `graphql-transport-ws` WebSocket:
/// `subscription ($q: String, $since: Long) { <table>(queryConditions: $q, since: $since) { … } }`, each result
/// one change with the record's column wrappers.
final class GraphQLSocketSource: LiveSource {
    private let connection: any WebSocketConnection
    private let table: String
    private var announced: Int?

    private init(connection: any WebSocketConnection, table: String, after: Int) {
        self.connection = connection
        self.table = table
        self.announced = after
    }

    /// The table's columns, from the GraphQL schema (its `GlideRecord_Type_<table>`).
    static func fields(of table: String, session: DocketSession) async throws -> [String] {
        let document = "{ __type(name: \"GlideRecord_Type_\(table)\") { fields { name } } }"
        let body = JSONValue(members: [("query", .string(document))]).serialized()
        let response = try await session.send("POST", "/api/now/graphql", body: Data(body))
        let answer = try JSONValue.parse(Array(response.body))
        guard let fields = answer["data"]?["__type"]?["fields"]?.arrayValue else {
            throw DocketError(kind: .invalidRequest, message: "the instance has no table '\(table)' to follow")
        }
        return fields.compactMap { $0["name"]?.stringValue }
    }

    static func open(
        _ updates: LiveUpdates, table: String, fields: [String], after: Int, connector: any WebSocketConnector
    ) async throws -> GraphQLSocketSource {
        let session = updates.session
        var components = URLComponents(url: session.instance.baseURL, resolvingAgainstBaseURL: false)!
        components.scheme = components.scheme?.lowercased() == "https" ? "wss" : "ws"
        components.percentEncodedPath += "/api/now/graphql"
        guard let url = components.url else { throw DocketError(kind: .invalidRequest, message: "no WebSocket URL for the instance") }
        let (authorization, headers) = try await session.socketCredentials()
        let connection = try await connector.connect(to: url, subprotocol: "graphql-transport-ws", headers: headers)
        let source = GraphQLSocketSource(connection: connection, table: table, after: after)
        do {
            var payload: [(String, JSONValue)] = []
            if let authorization { payload.append(("Authorization", .string(authorization))) }
            try await source.send(JSONValue(members: [("type", .string("connection_init")), ("payload", JSONValue(members: payload))]))
            let wrapped = "{ " + fields.map { "\($0) { value }" }.joined(separator: " ") + " }"
            let document = "subscription ($q: String, $since: Long) { \(table)(queryConditions: $q, since: $since) { sequence change "
                + "operation table sys_id fields user time record \(wrapped) previous \(wrapped) } }"
            try await source.send(JSONValue(members: [
                ("type", .string("subscribe")), ("id", .string("1")),
                ("payload", JSONValue(members: [
                    ("query", .string(document)),
                    ("variables", JSONValue(members: [("q", .string(updates.query ?? "")), ("since", .integer(after))])),
                ])),
            ]))
        } catch {
            await connection.close()
            throw error
        }
        return source
    }

    private func send(_ message: JSONValue) async throws {
        try await connection.send(String(decoding: message.serialized(), as: UTF8.self))
    }

    func next() async throws -> LiveSourceEvent? {
        while true {
            guard let text = try await connection.receive() else {
                // 4401/4403: the credential was refused or ended.
                if let code = await connection.closeCode, code == 4401 || code == 4403 { return .revoked }
                return nil
            }
            guard let message = try? JSONValue.parse(Array(text.utf8)), let type = message["type"]?.stringValue else { continue }
            switch type {
            case "connection_ack":
                if let start = announced {
                    announced = nil
                    return .ready(start)
                }
            case "ping":
                try await send(JSONValue(members: [("type", .string("pong"))]))
            case "next":
                guard let change = message["payload"]?["data"]?[table] else {
                    let reason = message["payload"]?["errors"]?.arrayValue?.first?["message"]?.stringValue
                    throw DocketError(kind: .invalidRequest, message: reason ?? "the subscription failed")
                }
                return .change(try RecordChange(subscription: change))
            case "error":
                let first = message["payload"]?.arrayValue?.first
                if first?["extensions"]?["code"]?.stringValue == "RESYNC_NEEDED" {
                    return .resync(first?["extensions"]?["oldestAvailable"]?.intValue)
                }
                throw DocketError(kind: .invalidRequest, message: first?["message"]?.stringValue ?? "the subscription was refused")
            case "complete":
                return nil
            default:
                continue
            }
        }
    }

    func close() async { await connection.close() }
}

extension RecordChange {
    /// A change as Docket's GraphQL subscription shows it; column values become the stored text (numbers and
    /// booleans as the Table API writes them).
    init(subscription json: JSONValue) throws {
        func row(_ key: String) -> [String: String] {
            (json[key]?.objectValue ?? [:]).reduce(into: [:]) { row, member in
                switch member.value["value"] {
                case .string(let text)?: row[member.key] = text
                case .integer(let number)?: row[member.key] = String(number)
                case .number(let number)?: row[member.key] = String(number)
                case .bool(let flag)?: row[member.key] = flag ? "true" : "false"
                default: row[member.key] = ""
                }
            }
        }
        var members: [(String, JSONValue)] = []
        for key in ["sequence", "change", "operation", "table", "sys_id", "fields", "user", "time"] {
            if let value = json[key] { members.append((key, value)) }
        }
        try self.init(json: JSONValue(members: members))
        record = row("record")
        // Only what the change wrote, as over Server-Sent Events.
        let previousRow = row("previous")
        previous = kind == .changed ? previousRow.filter { fields.contains($0.key) } : [:]
    }
}
