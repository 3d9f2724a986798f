import DocketModel
import Foundation

/// GraphQL over HTTP through the session: ServiceNow's `/api/now/graphql` (as NowData's `NowGraphQLService`
/// does) by default, or another endpoint such as docketd's DataSync `/graphql`.
///
/// ```swift
/// let data = try await client.graphQL.execute("{ GlideRecord_Query { incident { _rowCount } } }")
/// struct Count: Decodable { … }
/// let count = try await client.graphQL.execute(query, variables: ["qc": "active=true"], as: Count.self)
/// ```
public struct GraphQLService: Sendable {
    let session: DocketSession
    /// The endpoint's path on the instance.
    public let path: String

    /// A service on `path` (default: ServiceNow's `/api/now/graphql`).
    public init(session: DocketSession, path: String = "/api/now/graphql") {
        self.session = session
        self.path = path
    }

    /// Posts a document (`{"query", "variables", "operationName"}`) and returns the raw response body, errors
    /// included: GraphQL reports most failures in-band, with HTTP 200. Throws ``DocketError`` for HTTP failures.
    public func execute(
        _ query: String, variables: [String: JSONValue] = [:], operationName: String? = nil
    ) async throws -> Data {
        var members: [(String, JSONValue)] = [("query", .string(query))]
        if !variables.isEmpty { members.append(("variables", JSONValue(members: variables.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }))) }
        if let operationName { members.append(("operationName", .string(operationName))) }
        let response = try await session.send("POST", path, body: Data(JSONValue(members: members).serialized()))
        return response.body
    }

    /// Posts a document and decodes its `data` as `T`; a response with `errors` throws a ``DocketError`` whose
    /// message is the first error's.
    public func execute<T: Decodable>(
        _ query: String, variables: [String: JSONValue] = [:], operationName: String? = nil, as type: T.Type
    ) async throws -> T {
        let body = try await execute(query, variables: variables, operationName: operationName)
        let json: JSONValue
        do {
            json = try JSONValue.parse(body)
        } catch {
            throw DocketError(kind: .decoding, message: "the GraphQL answer is not JSON", underlying: error)
        }
        if let errors = json["errors"]?.arrayValue, let first = errors.first {
            throw DocketError(
                kind: .http, status: 200, message: first["message"]?.stringValue ?? "GraphQL error",
                detail: errors.count > 1 ? "and \(errors.count - 1) more" : nil
            )
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data((json["data"] ?? .null).serialized()))
        } catch {
            throw DocketError(kind: .decoding, message: "the GraphQL data does not match \(T.self)", underlying: error)
        }
    }
}

extension DocketClient {
    /// ServiceNow's GraphQL API (`/api/now/graphql`).
    public var graphQL: GraphQLService { GraphQLService(session: session) }
}
