import DocketModel
import Foundation
import GraphQL
import Hummingbird
import OrderedCollections
import Synchronization

/// ServiceNow's GraphQL API: `POST` and `GET /api/now/graphql` (spec §7.1). Same authentication and access
/// rules as the Table API; failures of the document (syntax, validation, access, bad arguments) are in-band with
/// HTTP 200 as `{"data": …, "errors": [{"message", "errorType"}]}`; an unauthenticated request is a 401 before
/// anything runs. The schema is built from the catalog and rebuilt when the catalog changes.
struct NowGraphQLController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    let schemas = SchemaCache()

    /// Bounds checked before a document is executed.
    enum Limits {
        /// UTF-8 bytes of a document.
        static let documentBytes = 100_000
        /// Nesting of selections (fragments included).
        static let depth = 15
        /// Fields selected in a document, fragments counted where they are spread.
        static let fields = 2_000
    }

    /// The schema of the current catalog, built once per catalog generation.
    final class SchemaCache: Sendable {
        private let state = Mutex<(generation: Int, schema: GraphQLSchema)?>(nil)

        func schema(for store: RecordStore) throws -> GraphQLSchema {
            let (catalog, generation) = store.versionedCatalog
            if let cached = state.withLock({ $0 }), cached.generation == generation { return cached.schema }
            let schema = try NowGraphQLSchema.build(catalog)
            state.withLock { $0 = (generation, schema) }
            return schema
        }
    }

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.post(use: post)
        routes.get(use: get)
        return routes
    }

    @Sendable func post(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let buffer = try await request.body.collect(upTo: context.maxBodySize)
        guard let body = try? JSONValue.parse(Array(buffer.readableBytesView)), body.objectValue != nil else {
            return Self.answer(errors: [("The request body must be a JSON object with a query", "InvalidSyntax")])
        }
        return try await execute(
            query: body["query"]?.stringValue, variables: body["variables"], operationName: body["operationName"]?.stringValue,
            caller: caller
        )
    }

    @Sendable func get(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let parameters = request.uri.queryParameters
        var variables: JSONValue? = nil
        if let text = parameters["variables"], !text.isEmpty {
            guard let parsed = try? JSONValue.parse(Array(String(text).utf8)) else {
                return Self.answer(errors: [("variables must be a JSON object", "InvalidSyntax")])
            }
            variables = parsed
        }
        return try await execute(
            query: parameters["query"].map(String.init), variables: variables,
            operationName: parameters["operationName"].map(String.init), caller: caller
        )
    }

    private func execute(query: String?, variables: JSONValue?, operationName: String?, caller: Caller) async throws
        -> Response
    {
        guard let query, !query.isEmpty else { return Self.answer(errors: [("A query is required", "InvalidSyntax")]) }
        guard query.utf8.count <= Limits.documentBytes else {
            return Self.answer(errors: [("The document is larger than \(Limits.documentBytes) bytes", "InvalidSyntax")])
        }
        var variableValues: [String: Map] = [:]
        switch variables {
        case nil, .null?: break
        case .object(let members)?:
            for (name, value) in members { variableValues[name] = Self.map(value) }
        default:
            return Self.answer(errors: [("variables must be a JSON object", "InvalidSyntax")])
        }
        // Bounded before execution: a document may not nest or fan out without limit.
        let document: Document
        do {
            document = try parse(source: query)
        } catch let error as GraphQLError {
            return Self.answer(errors: [(error.message, "InvalidSyntax")])
        }
        if let problem = Self.complexity(of: document) { return Self.answer(errors: [(problem, "ValidationError")]) }
        let schema: GraphQLSchema
        do {
            schema = try schemas.schema(for: store)
        } catch {
            store.logger.error("Could not build the GraphQL schema", metadata: ["error": "\(error)"])
            return Self.answer(errors: [("The GraphQL schema could not be built", "DataFetchingException")])
        }
        let context = NowGraphQLSchema.Context(
            store: store, caller: caller, maxPageSize: configuration.maxPageSize, budget: NowGraphQLSchema.Budget()
        )
        let result = try await graphql(
            schema: schema, request: query, context: context, variableValues: variableValues, operationName: operationName
        )
        return Self.response(result)
    }

    /// Why a document is refused before it runs (too deep, too many fields), or nil.
    static func complexity(of document: Document) -> String? {
        var fragments: [String: FragmentDefinition] = [:]
        for definition in document.definitions {
            if let fragment = definition as? FragmentDefinition { fragments[fragment.name.value] = fragment }
        }
        var fields = 0
        var tooDeep = false
        func walk(_ set: SelectionSet, depth: Int, visiting: Set<String>) {
            guard !tooDeep, fields <= Limits.fields else { return }
            if depth > Limits.depth {
                tooDeep = true
                return
            }
            for selection in set.selections {
                if let field = selection as? Field {
                    fields += 1
                    if let inner = field.selectionSet { walk(inner, depth: depth + 1, visiting: visiting) }
                } else if let spread = selection as? FragmentSpread {
                    let name = spread.name.value
                    guard !visiting.contains(name), let fragment = fragments[name] else { continue }
                    walk(fragment.selectionSet, depth: depth, visiting: visiting.union([name]))
                } else if let inline = selection as? InlineFragment {
                    walk(inline.selectionSet, depth: depth, visiting: visiting)
                }
            }
        }
        for definition in document.definitions {
            if let operation = definition as? OperationDefinition { walk(operation.selectionSet, depth: 1, visiting: []) }
        }
        if tooDeep { return "The document nests selections deeper than \(Limits.depth) levels" }
        if fields > Limits.fields { return "The document selects more than \(Limits.fields) fields" }
        return nil
    }

    /// The answer: always 200, the library's encoding of the result (it keeps the order of the selection), and
    /// ServiceNow's `errorType` on each error.
    static func response(_ result: GraphQLResult) -> Response {
        var bytes: [UInt8] = []
        if let encoded = try? GraphQLJSONEncoder().encode(result),
            var json = try? JSONValue.parse(Array(encoded))
        {
            if case .object(var members) = json, let errors = members["errors"]?.arrayValue {
                members["errors"] = .array(errors.map { error in
                    guard case .object(var fields) = error else { return error }
                    fields["errorType"] = .string(errorType(fields["message"]?.stringValue ?? ""))
                    return .object(fields)
                })
                json = .object(members)
            }
            bytes = json.serialized()
        } else {
            bytes = Array(#"{"data":null,"errors":[{"message":"The result could not be encoded","errorType":"DataFetchingException"}]}"#.utf8)
        }
        return Response.json(bytes: bytes, status: .ok)
    }

    private static func errorType(_ message: String) -> String {
        if message.hasPrefix("Syntax Error") { return "InvalidSyntax" }
        if message.contains("Cannot query field") || message.contains("Unknown argument") || message.contains("Unknown type")
            || message.contains("must have a selection") || message.contains("must not have a selection")
            || message.contains("Variable") || message.contains("Expected type") || message.contains("Unknown fragment")
        {
            return "ValidationError"
        }
        return "DataFetchingException"
    }

    static func answer(errors: [(message: String, type: String)]) -> Response {
        let body = JSONValue(members: [
            ("data", .null),
            ("errors", .array(errors.map { .object(["message": .string($0.message), "errorType": .string($0.type)]) })),
        ])
        return Response.json(body)
    }

    /// A JSON value as the library's `Map`.
    static func map(_ value: JSONValue) -> Map {
        switch value {
        case .null: return .null
        case .bool(let flag): return .bool(flag)
        case .integer(let number): return .int(number)
        case .number(let number): return .double(number)
        case .string(let text): return .string(text)
        case .array(let values): return .array(values.map(map))
        case .object(let members): return .dictionary(OrderedDictionary(uniqueKeysWithValues: members.map { ($0.key, map($0.value)) }))
        }
    }
}
