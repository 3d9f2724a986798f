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
    let documents = DocumentCache()

    /// Bounds checked before a document is executed.
    enum Limits {
        /// UTF-8 bytes of a document.
        static let documentBytes = 100_000
        /// Nesting of selections (fragments included).
        static let depth = 15
        /// Fields selected in a document, fragments counted where they are spread.
        static let fields = 2_000
        /// Brackets of any kind open at once, checked on the text before the (recursive) parser sees it.
        static let nesting = 64
    }

    /// The deepest bracket nesting of a document (`{`, `(`, `[`), outside strings and comments.
    static func nesting(of text: String) -> Int {
        var depth = 0
        var deepest = 0
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "("), UInt8(ascii: "["):
                depth += 1
                deepest = max(deepest, depth)
            case UInt8(ascii: "}"), UInt8(ascii: ")"), UInt8(ascii: "]"):
                depth = max(0, depth - 1)
            case UInt8(ascii: "#"):
                while let next = bytes.first, next != 0x0A, next != 0x0D { bytes.removeFirst() }
            case UInt8(ascii: "\""):
                if bytes.starts(with: [0x22, 0x22]) {
                    // A block string: up to the closing triple quote.
                    bytes.removeFirst(2)
                    while !bytes.isEmpty, !bytes.starts(with: [0x22, 0x22, 0x22]) {
                        if bytes.first == UInt8(ascii: "\\") { bytes.removeFirst() }
                        if !bytes.isEmpty { bytes.removeFirst() }
                    }
                    bytes.removeFirst(min(3, bytes.count))
                } else {
                    while let next = bytes.popFirst(), next != UInt8(ascii: "\"") {
                        if next == UInt8(ascii: "\\") { _ = bytes.popFirst() }
                        if next == 0x0A { break }
                    }
                }
            default: continue
            }
        }
        return deepest
    }

    /// The schema of the current catalog, built once per catalog generation.
    final class SchemaCache: Sendable {
        private let state = Mutex<(generation: Int, schema: GraphQLSchema)?>(nil)

        func schema(for store: RecordStore) throws -> (GraphQLSchema, generation: Int) {
            let (catalog, generation) = store.versionedCatalog
            if let cached = state.withLock({ $0 }), cached.generation == generation { return (cached.schema, generation) }
            let schema = try NowGraphQLSchema.build(catalog)
            state.withLock { $0 = (generation, schema) }
            return (schema, generation)
        }
    }

    /// A parsed document and what validating it against the schema found. Documents are not changed after parsing.
    final class PreparedDocument: @unchecked Sendable {
        let document: Document
        let problems: [GraphQLError]

        init(document: Document, problems: [GraphQLError]) {
            self.document = document
            self.problems = problems
        }
    }

    /// Documents already parsed and validated, by text, for the current schema: clients send the same few again
    /// and again.
    final class DocumentCache: Sendable {
        static let capacity = 256
        private let state = Mutex<(generation: Int, entries: [String: PreparedDocument])>((-1, [:]))

        func document(_ text: String, generation: Int) -> PreparedDocument? {
            state.withLock { $0.generation == generation ? $0.entries[text] : nil }
        }

        func keep(_ document: PreparedDocument, for text: String, generation: Int) {
            state.withLock { state in
                if state.generation != generation || state.entries.count >= Self.capacity { state = (generation, [:]) }
                state.entries[text] = document
            }
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

    /// Runs a document. With `direct`, plain queries skip the library's executor (``NowGraphQLDirect``); tests
    /// turn it off to compare both answers.
    func execute(query: String?, variables: JSONValue?, operationName: String?, caller: Caller, direct: Bool = true)
        async throws -> Response
    {
        Response.json(
            bytes: try await answer(query: query, variables: variables, operationName: operationName, caller: caller, direct: direct),
            status: .ok
        )
    }

    /// The answer's bytes (always served with 200).
    func answer(query: String?, variables: JSONValue?, operationName: String?, caller: Caller, direct: Bool = true)
        async throws -> [UInt8]
    {
        guard let query, !query.isEmpty else { return Self.errorBytes( [("A query is required", "InvalidSyntax")]) }
        guard query.utf8.count <= Limits.documentBytes else {
            return Self.errorBytes( [("The document is larger than \(Limits.documentBytes) bytes", "InvalidSyntax")])
        }
        var variableValues: [String: Map] = [:]
        switch variables {
        case nil, .null?: break
        case .object(let members)?:
            for (name, value) in members { variableValues[name] = Self.map(value) }
        default:
            return Self.errorBytes( [("variables must be a JSON object", "InvalidSyntax")])
        }
        let schema: GraphQLSchema
        let generation: Int
        do {
            (schema, generation) = try schemas.schema(for: store)
        } catch {
            store.logger.error("Could not build the GraphQL schema", metadata: ["error": "\(error)"])
            return Self.errorBytes([("The GraphQL schema could not be built", "DataFetchingException")])
        }
        let prepared: PreparedDocument
        if let cached = documents.document(query, generation: generation) {
            prepared = cached
        } else {
            // Bounded before execution: a document may not nest or fan out without limit.
            guard Self.nesting(of: query) <= Limits.nesting else {
                return Self.errorBytes([("The document nests brackets deeper than \(Limits.nesting) levels", "InvalidSyntax")])
            }
            let document: Document
            do {
                document = try parse(source: query)
            } catch let error as GraphQLError {
                return Self.errorBytes([(error.message, "InvalidSyntax")])
            }
            if let problem = Self.complexity(of: document) { return Self.errorBytes([(problem, "ValidationError")]) }
            // The library validates every document (once per document and schema).
            prepared = PreparedDocument(document: document, problems: validate(schema: schema, ast: document))
            documents.keep(prepared, for: query, generation: generation)
        }
        let document = prepared.document
        if !prepared.problems.isEmpty { return Self.bytes(GraphQLResult(errors: prepared.problems)) }
        let context = NowGraphQLSchema.Context(
            store: store, caller: caller, maxPageSize: configuration.maxPageSize, budget: NowGraphQLSchema.Budget()
        )
        // Valid plain queries run without the library's executor.
        if direct,
            let answer = await NowGraphQLDirect.execute(
                document, operationName: operationName, variables: variableValues, context: context
            )
        {
            return answer
        }
        let result = try await graphql(
            schema: schema, request: query, context: context, variableValues: variableValues, operationName: operationName
        )
        return Self.bytes(result)
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
    static func bytes(_ result: GraphQLResult) -> [UInt8] {
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
        return bytes
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
        Response.json(bytes: errorBytes(errors), status: .ok)
    }

    static func errorBytes(_ errors: [(message: String, type: String)]) -> [UInt8] {
        JSONValue(members: [
            ("data", .null),
            ("errors", .array(errors.map { .object(["message": .string($0.message), "errorType": .string($0.type)]) })),
        ]).serialized()
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
