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

    var endpoints: RouteCollection<Context> { GraphQLOverHTTP.endpoints(handle) }

    @Sendable func handle(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        switch try await GraphQLOverHTTP.read(request, context: context) {
        case .failure(let problem): return Response.json(bytes: Self.errorBytes(problem), status: .ok)
        case .success(let incoming):
            return Response.json(
                bytes: try await answer(
                    query: incoming.query, variables: incoming.variables, operationName: incoming.operationName,
                    caller: caller, allowMutations: request.method == .post
                ),
                status: .ok
            )
        }
    }

    /// The answer's bytes (always served with 200). With `direct`, plain queries skip the library's executor
    /// (``NowGraphQLDirect``); tests turn it off to compare both answers. Without `allowMutations` (a GET, which a
    /// browser sends cross-site with the session cookie) a mutation is refused with a 405.
    func answer(
        query: String?, variables: JSONValue?, operationName: String?, caller: Caller, allowMutations: Bool = true, direct: Bool = true
    ) async throws -> [UInt8] {
        let text: String
        let variableValues: [String: Map]
        switch GraphQLOverHTTP.textAndVariables(.init(query: query, variables: variables, operationName: operationName)) {
        case .failure(let problem): return Self.errorBytes(problem)
        case .success(let read): (text, variableValues) = read
        }
        let schema: GraphQLSchema
        let prepared: PreparedDocument
        switch prepare(text) {
        case .failure(let refusal): return refusal.bytes
        case .success(let ready): (schema, prepared) = ready
        }
        let document = prepared.document
        if !prepared.problems.isEmpty { return Self.bytes(GraphQLResult(errors: prepared.problems)) }
        switch GraphQLOverHTTP.refusal(for: document, operationName: operationName, method: allowMutations ? .post : .get) {
        case .mutationNeedsPost?:
            var error = ServiceNowError(.methodNotAllowed, "Method not Supported", detail: "Send mutations with POST")
            error.headers[.allow] = "POST"
            throw error
        case .subscriptionNeedsSocket?:
            return Self.errorBytes([(GraphQLOverHTTP.Refusal.subscriptionNeedsSocket.message, "ValidationError")])
        case nil: break
        }
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
        let result = try await execute(
            schema: schema, documentAST: document, rootValue: (), context: context, variableValues: variableValues,
            operationName: operationName
        )
        if let unavailable = GraphQLOverHTTP.unavailability(in: result) { throw unavailable }
        return Self.bytes(result)
    }

    /// The current schema and the document parsed and validated against it (both cached); the answer's bytes
    /// when either cannot be had.
    func prepare(_ text: String) -> Result<(GraphQLSchema, PreparedDocument), Refusal> {
        let schema: GraphQLSchema
        let generation: Int
        do {
            (schema, generation) = try schemas.schema(for: store)
        } catch {
            store.logger.error("Could not build the GraphQL schema", metadata: ["error": "\(error)"])
            return .failure(Refusal(bytes: Self.errorBytes([("The GraphQL schema could not be built", "DataFetchingException")])))
        }
        if let cached = documents.document(text, generation: generation) { return .success((schema, cached)) }
        switch GraphQLOverHTTP.document(text) {
        case .failure(let problem): return .failure(Refusal(bytes: Self.errorBytes(problem)))
        case .success(let document):
            // The library validates every document (once per document and schema).
            let prepared = PreparedDocument(document: document, problems: validate(schema: schema, ast: document))
            documents.keep(prepared, for: text, generation: generation)
            return .success((schema, prepared))
        }
    }

    /// An answer of errors only, as its bytes.
    struct Refusal: Error {
        let bytes: [UInt8]
        /// Its error objects.
        var errors: [JSONValue] { (try? JSONValue.parse(bytes))?.objectValue?["errors"]?.arrayValue ?? [] }
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

    static func errorBytes(_ problem: GraphQLOverHTTP.Problem) -> [UInt8] {
        errorBytes([(problem.message, problem.isSyntax ? "InvalidSyntax" : "ValidationError")])
    }

    static func errorBytes(_ errors: [(message: String, type: String)]) -> [UInt8] {
        JSONValue(members: [
            ("data", .null),
            ("errors", .array(errors.map { .object(["message": .string($0.message), "errorType": .string($0.type)]) })),
        ]).serialized()
    }
}
