import DocketModel
import Foundation
import GraphQL
import Hummingbird
import OrderedCollections

/// What GraphQL over HTTP is the same for in every dialect that speaks it (ServiceNow's `/api/now/graphql`,
/// DataSync's `/graphql`): reading `{"query", "variables", "operationName"}` from a POST body or a GET query
/// string, and bounding and parsing the document before the library runs it. Each dialect words the problems.
enum GraphQLOverHTTP {
    /// A request as read, before the document is looked at.
    struct Incoming: Sendable {
        var query: String?
        var variables: JSONValue?
        var operationName: String?
    }

    /// Why a request or a document is refused before it runs: a syntax problem (unreadable request or document)
    /// or a validation problem (a document too deep or too wide).
    struct Problem: Error, Sendable {
        let message: String
        let isSyntax: Bool
    }

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

    /// Reads the request's query, variables and operation name: the JSON body of a POST, or the query string of
    /// a GET (with `variables` as a JSON string).
    static func read(_ request: Request, context: DocketRequestContext) async throws -> Result<Incoming, Problem> {
        if request.method == .post {
            let buffer = try await request.body.collect(upTo: context.maxBodySize)
            guard let body = try? JSONValue.parse(Array(buffer.readableBytesView)), body.objectValue != nil else {
                return .failure(Problem(
                    message: "The request body must be a JSON object: {\"query\", \"variables\", \"operationName\"}", isSyntax: true
                ))
            }
            return .success(Incoming(
                query: body["query"]?.stringValue, variables: body["variables"], operationName: body["operationName"]?.stringValue
            ))
        }
        // Decoded as servlets and Node's query strings decode them: `+` is a space (`{+GlideRecord_Query+{…`).
        let parameters = Dictionary(FormQuery.parse(request.uri.query), uniquingKeysWith: { first, _ in first })
        var variables: JSONValue? = nil
        if let text = parameters["variables"], !text.isEmpty {
            guard let parsed = try? JSONValue.parse(Array(String(text).utf8)) else {
                return .failure(Problem(message: "variables must be a JSON object", isSyntax: true))
            }
            variables = parsed
        }
        return .success(Incoming(
            query: parameters["query"], variables: variables, operationName: parameters["operationName"]
        ))
    }

    /// The query text, when there is one of a size the server takes.
    static func text(_ query: String?) -> Result<String, Problem> {
        guard let query, !query.isEmpty else { return .failure(Problem(message: "A query is required", isSyntax: true)) }
        guard query.utf8.count <= Limits.documentBytes else {
            return .failure(Problem(message: "The document is larger than \(Limits.documentBytes) bytes", isSyntax: true))
        }
        return .success(query)
    }

    /// The variables as the library takes them.
    static func variables(_ value: JSONValue?) -> Result<[String: Map], Problem> {
        switch value {
        case nil, .null?: return .success([:])
        case .object(let members)?:
            return .success(members.reduce(into: [:]) { $0[$1.key] = map($1.value) })
        default: return .failure(Problem(message: "variables must be a JSON object", isSyntax: true))
        }
    }

    /// Parses a document, bounded before and after: bracket nesting before the (recursive) parser sees it,
    /// selection depth and width after.
    static func document(_ query: String) -> Result<Document, Problem> {
        guard nesting(of: query) <= Limits.nesting else {
            return .failure(Problem(message: "The document nests brackets deeper than \(Limits.nesting) levels", isSyntax: true))
        }
        let document: Document
        do {
            document = try parse(source: query)
        } catch let error as GraphQLError {
            return .failure(Problem(message: error.message, isSyntax: true))
        } catch {
            return .failure(Problem(message: "The document cannot be parsed", isSyntax: true))
        }
        if let problem = complexity(of: document) { return .failure(Problem(message: problem, isSyntax: false)) }
        return .success(document)
    }

    /// The operation a request runs: the named one, or the only one.
    /// A GraphQL endpoint's routes: the same handler for POST and GET.
    static func endpoints<Context: RequestContext>(
        _ handle: @escaping @Sendable (Request, Context) async throws -> Response
    ) -> RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.post(use: handle)
        routes.get(use: handle)
        return routes
    }

    /// The request's document text and variables, bounded and converted: the first step of every endpoint.
    static func textAndVariables(_ incoming: Incoming) -> Result<(text: String, variables: [String: Map]), Problem> {
        switch (text(incoming.query), variables(incoming.variables)) {
        case (.failure(let problem), _), (_, .failure(let problem)): return .failure(problem)
        case (.success(let text), .success(let values)): return .success((text, values))
        }
    }

    /// Why a valid document is not run over HTTP, the same in every dialect (each words it in its own shape).
    enum Refusal: Equatable {
        /// A subscription: it needs a WebSocket.
        case subscriptionNeedsSocket
        /// A mutation sent with GET (which a browser sends cross-site with cookies): it needs POST.
        case mutationNeedsPost

        var message: String {
            switch self {
            case .subscriptionNeedsSocket:
                "Subscriptions need a WebSocket: open one to this URL with the graphql-transport-ws or graphql-ws subprotocol"
            case .mutationNeedsPost: "Mutations must be sent with POST"
            }
        }
    }

    /// What refuses the chosen operation of `document` over HTTP with `method`; nil when it may run.
    static func refusal(for document: Document, operationName: String?, method: HTTPRequest.Method) -> Refusal? {
        switch operation(in: document, named: operationName)?.operation {
        case .subscription?: return .subscriptionNeedsSocket
        case .mutation? where method != .post: return .mutationNeedsPost
        default: return nil
        }
    }

    static func operation(in document: Document, named name: String?) -> OperationDefinition? {
        let operations = document.definitions.compactMap { $0 as? OperationDefinition }
        if let name { return operations.first { $0.name?.value == name } }
        return operations.count == 1 ? operations.first : nil
    }

    /// The one root field of a subscription (fragments at the root looked into); nil when it selects none or
    /// several, which GraphQL forbids (the library does not check it).
    static func soleRootField(of operation: OperationDefinition, in document: Document) -> Field? {
        var fragments: [String: FragmentDefinition] = [:]
        for definition in document.definitions {
            if let fragment = definition as? FragmentDefinition { fragments[fragment.name.value] = fragment }
        }
        var found: [Field] = []
        func collect(_ set: SelectionSet, visiting: Set<String>) {
            for selection in set.selections {
                if let field = selection as? Field {
                    found.append(field)
                } else if let inline = selection as? InlineFragment {
                    collect(inline.selectionSet, visiting: visiting)
                } else if let spread = selection as? FragmentSpread, !visiting.contains(spread.name.value),
                    let fragment = fragments[spread.name.value]
                {
                    collect(fragment.selectionSet, visiting: visiting.union([spread.name.value]))
                }
            }
        }
        collect(operation.selectionSet, visiting: [])
        let names = Set(found.map { $0.alias?.value ?? $0.name.value })
        guard names.count == 1, let field = found.first, !field.name.value.hasPrefix("__") else { return nil }
        return field
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

extension GraphQLOverHTTP {
    /// The unavailable database behind a result's errors, if one is: such a result is no answer (a field that
    /// could not be read is not null), so the request is answered 503 instead.
    static func unavailability(in result: GraphQLResult) -> StorageUnavailable? {
        func cause(_ error: (any Error)?) -> StorageUnavailable? {
            guard let error else { return nil }
            if let wrapped = error as? GraphQLError { return cause(wrapped.originalError) }
            return StorageUnavailable.classify(error)
        }
        return result.errors.lazy.compactMap { cause($0) }.first
    }
}
