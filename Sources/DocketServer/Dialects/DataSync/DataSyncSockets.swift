import DocketModel
import Foundation
import GraphQL
import Hummingbird

/// `/graphql` over WebSocket: the showcase's queries and mutations, and its subscriptions, which follow the
/// engine's event log for `datasync_task` as the caller sees it:
/// - `taskAdded`: a task was created;
/// - `taskUpdated`: a task was changed (or became visible to the caller);
/// - `taskDeleted`: a task was deleted (the whole task as it was), or is no longer visible to the caller.
struct DataSyncSocketDialect: GraphQLSocketDialect {
    let controller: DataSyncController
    let logins: SocketLogins
    let results = RenderedResults(capacity: 4_096)

    func operation(_ request: SocketOperationRequest, caller: Caller) async -> SocketOperation {
        func refused(_ messages: [String]) -> SocketOperation { .refused(messages.map { .object(["message": .string($0)]) }) }
        let document: Document
        let variables: [String: Map]
        switch (GraphQLOverHTTP.text(request.query).flatMap(GraphQLOverHTTP.document), GraphQLOverHTTP.variables(request.variables)) {
        case (.failure(let problem), _), (_, .failure(let problem)): return refused([problem.message])
        case (.success(let parsed), .success(let values)): (document, variables) = (parsed, values)
        }
        let problems = validate(schema: controller.schema, ast: document)
        if !problems.isEmpty { return refused(problems.map(\.message)) }
        guard let operation = GraphQLOverHTTP.operation(in: document, named: request.operationName) else {
            return refused(["Name the operation to run with operationName"])
        }
        guard operation.operation == .subscription else {
            do {
                return .single(try await controller.result(document, variables: variables, operationName: request.operationName, caller: caller))
            } catch {
                return .refused([.object([
                    "message": .string("The database is unavailable; try again shortly"),
                    "extensions": .object(["code": .string("UNAVAILABLE")]),
                ])])
            }
        }
        guard let root = GraphQLOverHTTP.soleRootField(of: operation, in: document) else {
            return refused(["A subscription selects one field: taskAdded, taskUpdated or taskDeleted"])
        }
        let reports: @Sendable (RecordChange) -> Bool
        switch root.name.value {
        case "taskAdded": reports = { $0.event.operation == .insert }
        case "taskUpdated": reports = { $0.event.operation == .update && ($0.kind == .changed || $0.kind == .entered) }
        case "taskDeleted": reports = { $0.kind == .deleted || $0.kind == .left }
        default: return refused(["Unknown subscription \(root.name.value)"])
        }
        let store = controller.store
        guard let table = try? store.table(DataSyncController.table) else { return refused(["Tasks are not available on this server"]) }
        // "From now" is the head of the log; when it cannot be read the subscription is refused (the client retries),
        // never started from the beginning of the log.
        let after: Int
        do {
            after = try await store.latestSequence()
        } catch {
            return .refused([.object([
                "message": .string("The database is unavailable; try again shortly"), "extensions": .object(["code": .string("UNAVAILABLE")]),
            ])])
        }
        let key = RenderedResultKey.document(text: request.query ?? "", variables: request.variables, operationName: request.operationName)
        let (controller, results, operationName) = (controller, results, request.operationName)
        let prepared = NowGraphQLController.PreparedDocument(document: document, problems: [])
        var stream = LiveSubscription(live: LiveQuery(table: table, query: EncodedQuery(), caller: caller), after: after) {
            change, caller in
            guard reports(change) else { return nil }
            // A task's fields do not depend on who reads it: every subscriber of the document shares one result.
            let shared = RenderedResultKey(sequence: change.event.sequence, kind: change.kind.rawValue, document: key, viewer: "")
            return try await results.value(shared) {
                let task = DataSyncController.TaskValue(row: change.record, id: change.event.sysID)
                return try await controller.result(
                    prepared.document, variables: variables, operationName: operationName, caller: caller, root: task
                )
            }
        }
        // Every subscription starts at the head of the log: subscribers of one document ride one group.
        stream.shareable = "datasync\u{0}" + key
        return .stream(stream)
    }
}
