import DocketModel
import Foundation
import GraphQL
import Hummingbird
import OrderedCollections

/// The AeroGear DataSync showcase's task API, generation v1 (spec §1.2), at `POST` and `GET /graphql`. Tasks are
/// records of the engine's `datasync_task` table (so the Table API, access rules and the event log see them);
/// a task's `version` is its `sys_mod_count` + 1, and `updateTask`'s version check is the engine's optimistic
/// concurrency. Subscriptions (`taskAdded`, `taskUpdated`, `taskDeleted`) run over a WebSocket on the same path
/// (``DataSyncSocketDialect``); over HTTP they are refused.
struct DataSyncController {
    typealias Context = DocketRequestContext
    static let table = "datasync_task"

    let store: RecordStore
    let configuration: Configuration
    let schema: GraphQLSchema

    init(store: RecordStore, configuration: Configuration) throws {
        self.store = store
        self.configuration = configuration
        self.schema = try Self.buildSchema()
    }

    /// What resolvers need.
    struct ResolverContext: Sendable {
        let store: RecordStore
        let caller: Caller
        let maxPageSize: Int
    }

    /// A task as the API shows it.
    struct TaskValue: Sendable {
        let id: String
        let version: Int
        let title: String
        let description: String
        let status: String

        init(_ record: Record) {
            id = record.sysID
            // sys_mod_count is the engine's; an admin may have written any number there.
            version = min(Int(record["sys_mod_count"]) ?? 0, Int(Int32.max) - 1) + 1
            title = record["title"]
            description = record["description"]
            status = record["status"]
        }

        init(row: [String: String], id: String) {
            self.init(Record(table: DataSyncController.table, sysID: id, values: row))
        }

        var map: Map {
            .dictionary([
                "id": .string(id), "title": .string(title), "description": .string(description),
                "version": .int(version), "status": .string(status),
            ])
        }
    }

    var endpoints: RouteCollection<Context> { GraphQLOverHTTP.endpoints(handle) }

    @Sendable func handle(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let incoming: GraphQLOverHTTP.Incoming
        let variableValues: [String: Map]
        let document: Document
        switch try await GraphQLOverHTTP.read(request, context: context) {
        case .failure(let problem): return Self.errors([problem.message], status: .badRequest)
        case .success(let read): incoming = read
        }
        switch GraphQLOverHTTP.textAndVariables(incoming).flatMap({ read in GraphQLOverHTTP.document(read.text).map { ($0, read.variables) } }) {
        case .failure(let problem): return Self.errors([problem.message], status: .badRequest)
        case .success(let parsed): (document, variableValues) = parsed
        }
        let problems = validate(schema: schema, ast: document)
        if !problems.isEmpty { return Self.errors(problems.map(\.message), status: .badRequest) }
        switch GraphQLOverHTTP.refusal(for: document, operationName: incoming.operationName, method: request.method) {
        case .subscriptionNeedsSocket?:
            return Self.errors([GraphQLOverHTTP.Refusal.subscriptionNeedsSocket.message], status: .badRequest)
        case .mutationNeedsPost?:
            var response = Self.errors([GraphQLOverHTTP.Refusal.mutationNeedsPost.message], status: .methodNotAllowed)
            response.headers[.allow] = "POST"
            return response
        case nil: break
        }
        let bytes = try await result(document, variables: variableValues, operationName: incoming.operationName, caller: caller)
        // Resolver errors (a conflict, a refused write) are answered with 200: Apollo iOS drops the body of any
        // other status.
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes))
        )
    }

    /// Runs a validated query or mutation: the answer's bytes (`{"data", "errors"}`). Throws
    /// ``StorageUnavailable`` when the database could not be used: that is no answer.
    func result(_ document: Document, variables: [String: Map], operationName: String?, caller: Caller, root: any Sendable = ())
        async throws(StorageUnavailable) -> [UInt8]
    {
        let context = ResolverContext(store: store, caller: caller, maxPageSize: configuration.maxPageSize)
        let result: GraphQLResult
        do {
            result = try await execute(
                schema: schema, documentAST: document, rootValue: root, context: context, variableValues: variables,
                operationName: operationName
            )
        } catch {
            if let unavailable = StorageUnavailable.classify(error) { throw unavailable }
            result = GraphQLResult(errors: [GraphQLError(message: "The operation could not be run")])
        }
        if let unavailable = GraphQLOverHTTP.unavailability(in: result) { throw unavailable }
        return (try? GraphQLJSONEncoder().encode(Self.withConflictExtensions(result))).map { Array($0) }
            ?? Array(#"{"errors":[{"message":"The result could not be encoded"}]}"#.utf8)
    }

    /// An update that lost to another write: Offix's conflict, carried to the answer as
    /// `extensions.exception.conflictInfo` (spec §1.6.1).
    struct OffixConflict: Error, CustomStringConvertible {
        let serverState: Map
        let clientState: Map
        var description: String { "OffixConflict" }
    }

    /// The result with each conflict's `extensions` in the shape Offix clients read.
    static func withConflictExtensions(_ result: GraphQLResult) -> GraphQLResult {
        var result = result
        result.errors = result.errors.map { error in
            guard let conflict = error.originalError as? OffixConflict else { return error }
            return GraphQLError(
                message: "OffixConflict", locations: error.locations, path: error.path,
                extensions: [
                    "code": .string("INTERNAL_SERVER_ERROR"),
                    "exception": .dictionary([
                        "conflictInfo": .dictionary(["serverState": conflict.serverState, "clientState": conflict.clientState])
                    ]),
                ]
            )
        }
        return result
    }

    static func errors(_ messages: [String], status: HTTPResponse.Status) -> Response {
        let body = JSONValue(members: [("errors", .array(messages.map { .object(["message": .string($0)]) }))])
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body.serialized()))
        )
    }

    // MARK: Schema

    static func buildSchema() throws -> GraphQLSchema {
        let status = try GraphQLEnumType(
            name: "TaskStatus",
            values: [
                "OPEN": GraphQLEnumValue(value: .string("OPEN")), "ASSIGNED": GraphQLEnumValue(value: .string("ASSIGNED")),
                "COMPLETE": GraphQLEnumValue(value: .string("COMPLETE")),
            ]
        )
        let task = try GraphQLObjectType(
            name: "Task",
            fields: [
                "id": GraphQLField(type: GraphQLNonNull(GraphQLID)) { source, _, _, _ in (source as? TaskValue)?.id },
                "version": GraphQLField(type: GraphQLInt) { source, _, _, _ in (source as? TaskValue)?.version },
                "title": GraphQLField(type: GraphQLNonNull(GraphQLString)) { source, _, _, _ in (source as? TaskValue)?.title },
                "description": GraphQLField(type: GraphQLNonNull(GraphQLString)) { source, _, _, _ in
                    (source as? TaskValue)?.description
                },
                "status": GraphQLField(type: status) { source, _, _, _ in
                    // A status written through another API that the enum does not know reads as null.
                    guard let value = (source as? TaskValue)?.status, ["OPEN", "ASSIGNED", "COMPLETE"].contains(value) else {
                        return nil
                    }
                    return value
                },
            ]
        )
        let query = try GraphQLObjectType(
            name: "Query",
            fields: [
                "allTasks": GraphQLField(
                    type: GraphQLList(task),
                    args: ["first": GraphQLArgument(type: GraphQLInt), "after": GraphQLArgument(type: GraphQLString)],
                    resolve: { _, args, context, _ in try await allTasks(args, context: context) }
                ),
                "getTask": GraphQLField(
                    type: task, args: ["id": GraphQLArgument(type: GraphQLNonNull(GraphQLID))],
                    resolve: { _, args, context, _ in try await getTask(args["id"].string ?? "", context: context) }
                ),
            ]
        )
        let mutation = try GraphQLObjectType(
            name: "Mutation",
            fields: [
                "createTask": GraphQLField(
                    type: task,
                    args: [
                        "title": GraphQLArgument(type: GraphQLNonNull(GraphQLString)),
                        "description": GraphQLArgument(type: GraphQLNonNull(GraphQLString)),
                        "status": GraphQLArgument(type: status),
                    ],
                    resolve: { _, args, context, _ in try await createTask(args, context: context) }
                ),
                "updateTask": GraphQLField(
                    type: task,
                    args: [
                        "id": GraphQLArgument(type: GraphQLNonNull(GraphQLID)),
                        "title": GraphQLArgument(type: GraphQLString),
                        "description": GraphQLArgument(type: GraphQLString),
                        "version": GraphQLArgument(type: GraphQLNonNull(GraphQLInt)),
                        "status": GraphQLArgument(type: status),
                    ],
                    resolve: { _, args, context, _ in try await updateTask(args, context: context) }
                ),
                "deleteTask": GraphQLField(
                    type: GraphQLID, args: ["id": GraphQLArgument(type: GraphQLNonNull(GraphQLID))],
                    resolve: { _, args, context, _ in try await deleteTask(args["id"].string ?? "", context: context) }
                ),
            ]
        )
        let subscription = try GraphQLObjectType(
            name: "Subscription",
            fields: [
                "taskAdded": GraphQLField(type: task) { source, _, _, _ in source as? TaskValue },
                "taskDeleted": GraphQLField(type: task) { source, _, _, _ in source as? TaskValue },
                "taskUpdated": GraphQLField(type: task) { source, _, _, _ in source as? TaskValue },
            ]
        )
        return try GraphQLSchema(query: query, mutation: mutation, subscription: subscription)
    }

    // MARK: Resolvers

    /// An engine refusal in this dialect's words.
    static func wording(_ error: EngineError) -> GraphQLError {
        switch error.reason {
        case .accessDenied: return GraphQLError(message: "Not allowed to \(error.operation?.rawValue ?? "change") this task")
        case .recordMissing: return GraphQLError(message: "No such task")
        case .unknownTable: return GraphQLError(message: "Tasks are not available on this server")
        default: return GraphQLError(message: error.detail.map { "\(error.message): \($0)" } ?? error.message)
        }
    }

    /// Runs engine work, wording its refusals as this dialect's GraphQL errors.
    static func engine<T>(_ work: () async throws -> T) async throws -> T {
        do {
            return try await work()
        } catch let error as EngineError {
            throw wording(error)
        }
    }

    static func engine<T>(_ work: () throws -> T) throws -> T {
        do {
            return try work()
        } catch let error as EngineError {
            throw wording(error)
        }
    }

    private static func context(_ value: any Sendable) throws -> ResolverContext {
        guard let context = value as? ResolverContext else { throw GraphQLError(message: "No context") }
        return context
    }

    /// `first` is a LIMIT and `after` an OFFSET (as a string), only together with `first`; no ordering but the
    /// table's.
    static func allTasks(_ args: Map, context value: any Sendable) async throws -> [TaskValue] {
        let context = try context(value)
        var limit = context.maxPageSize
        var offset = 0
        if let first = args["first"].int {
            guard first >= 0 else { throw GraphQLError(message: "first must not be negative") }
            limit = min(first, context.maxPageSize)
            if let after = args["after"].string {
                guard let number = Int(after), number >= 0 else { throw GraphQLError(message: "after must be a row offset") }
                offset = number
            }
        }
        let page = try await engine {
            try await context.store.list(
                RecordQuery(table: table, fields: nil, limit: limit, offset: offset, count: false), caller: context.caller
            )
        }
        return page.records.map(TaskValue.init)
    }

    static func getTask(_ id: String, context value: any Sendable) async throws -> TaskValue? {
        let context = try context(value)
        do {
            return TaskValue(try await context.store.get(id, in: table, caller: context.caller).record)
        } catch let error as EngineError where error.code == .notFound {
            return nil
        } catch let error as EngineError {
            throw Self.wording(error)
        }
    }

    /// Creates a task: always `OPEN`, version 1, whatever the arguments say.
    static func createTask(_ args: Map, context value: any Sendable) async throws -> TaskValue? {
        let context = try context(value)
        let values = ["title": args["title"].string ?? "", "description": args["description"].string ?? "", "status": "OPEN"]
        let (store, caller) = (context.store, context.caller)
        let target = try engine { try store.table(table) }
        let committed = CommittedRow()
        let id = try await engine {
            try await store.insert(into: table, values: values, caller: caller, within: { db, id in
                committed.set(try await store.readBack(id, in: target, fields: nil, caller: caller, db: db))
            })
        }
        // The task as this write committed it (read in its transaction).
        if let (_, record) = committed.value { return TaskValue(record) }
        return try await getTask(id, context: context)
    }

    /// Changes a task whose version the client read; another write since is a conflict in Offix's shape.
    static func updateTask(_ args: Map, context value: any Sendable) async throws -> TaskValue? {
        let context = try context(value)
        let id = args["id"].string ?? ""
        guard let version = args["version"].int else { throw GraphQLError(message: "Supplied object is missing version field") }
        guard (try await getTask(id, context: context)) != nil else {
            throw GraphQLError(message: "Invalid ID for task object: \(id)")
        }
        var values: [String: String] = [:]
        for name in ["title", "description", "status"] {
            if let text = args[name].string { values[name] = text }
        }
        var options = WriteOptions()
        options.expectedModCount = version - 1
        let (store, caller) = (context.store, context.caller)
        let target = try engine { try store.table(table) }
        let committed = CommittedRow()
        do {
            try await store.update(id, in: table, values: values, caller: caller, options: options, within: { db, id in
                committed.set(try await store.readBack(id, in: target, fields: nil, caller: caller, db: db))
            })
        } catch let error as EngineError where error.code == .conflict {
            var client: OrderedDictionary<String, Map> = ["id": .string(id), "version": .int(version)]
            for (name, text) in values.sorted(by: { $0.key < $1.key }) { client[name] = .string(text) }
            let server = TaskValue(row: error.current ?? [:], id: id)
            // Not a GraphQLError, so that the executor adds its path and location; its extensions are put back
            // when the result is written (``withConflictExtensions(_:)``).
            throw OffixConflict(serverState: server.map, clientState: .dictionary(client))
        } catch let error as EngineError {
            throw Self.wording(error)
        }
        if let (_, record) = committed.value { return TaskValue(record) }
        return try await getTask(id, context: context)
    }

    /// Deletes a task (no version check) and answers its id.
    static func deleteTask(_ id: String, context value: any Sendable) async throws -> String {
        let context = try context(value)
        do {
            try await context.store.delete(id, from: table, caller: context.caller)
        } catch let error as EngineError where error.code == .notFound {
            throw GraphQLError(message: "Cannot delete object \(id)")
        } catch let error as EngineError {
            throw Self.wording(error)
        }
        return id
    }
}
