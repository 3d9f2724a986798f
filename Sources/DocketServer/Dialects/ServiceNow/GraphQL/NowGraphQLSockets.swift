import DocketModel
import Foundation
import GraphQL
import Hummingbird
import Synchronization

/// `/api/now/graphql` over WebSocket: queries and mutations as over HTTP, and Docket's subscriptions
/// (``NowGraphQLSchema``'s `Subscription` type): `subscription { incident(queryConditions: "active=true",
/// since: 120) { sequence change record { number { displayValue } } } }` follows the event log as the caller sees
/// it, resuming after `since` when given.
struct NowGraphQLSocketDialect: GraphQLSocketDialect {
    let controller: NowGraphQLController
    let logins: SocketLogins
    let results = RenderedResults(capacity: 4_096)
    /// Whether plain subscription documents render on the direct path (off only to compare it with the library).
    var direct = true

    func operation(_ request: SocketOperationRequest, caller: Caller) async -> SocketOperation {
        let text: String
        let variables: [String: Map]
        switch (GraphQLOverHTTP.text(request.query), GraphQLOverHTTP.variables(request.variables)) {
        case (.failure(let problem), _), (_, .failure(let problem)):
            return .refused(NowGraphQLController.Refusal(bytes: NowGraphQLController.errorBytes(problem)).errors)
        case (.success(let query), .success(let values)): (text, variables) = (query, values)
        }
        let schema: GraphQLSchema
        let prepared: NowGraphQLController.PreparedDocument
        switch controller.prepare(text) {
        case .failure(let refusal): return .refused(refusal.errors)
        case .success(let ready): (schema, prepared) = ready
        }
        if !prepared.problems.isEmpty {
            return .refused(NowGraphQLController.Refusal(bytes: NowGraphQLController.bytes(GraphQLResult(errors: prepared.problems))).errors)
        }
        guard let operation = GraphQLOverHTTP.operation(in: prepared.document, named: request.operationName),
            operation.operation == .subscription
        else {
            do {
                return .single(try await controller.answer(
                    query: text, variables: request.variables, operationName: request.operationName, caller: caller
                ))
            } catch {
                return .refused([.object(["message": .string("The operation could not be run"), "errorType": .string("DataFetchingException")])])
            }
        }
        guard GraphQLOverHTTP.soleRootField(of: operation, in: prepared.document) != nil else {
            return .refused([.object([
                "message": .string("A subscription selects one field: the table to follow"), "errorType": .string("ValidationError"),
            ])])
        }
        return await subscription(prepared, text: text, schema: schema, variables: variables, request: request, caller: caller)
    }

    private func subscription(
        _ prepared: NowGraphQLController.PreparedDocument, text: String, schema: GraphQLSchema, variables: [String: Map], request: SocketOperationRequest,
        caller: Caller
    ) async -> SocketOperation {
        let store = controller.store
        let document = prepared.document
        func refused(_ message: String) -> SocketOperation {
            .refused([.object(["message": .string(message), "errorType": .string("ValidationError")])])
        }
        // The library reads the arguments (variables included) by running the root field once against a probe.
        let probe = ArgumentProbe()
        let context = NowGraphQLSchema.Context(
            store: store, caller: caller, maxPageSize: controller.configuration.maxPageSize, budget: NowGraphQLSchema.Budget()
        )
        let probed = try? await execute(
            schema: schema, documentAST: document, rootValue: probe, context: context, variableValues: variables,
            operationName: request.operationName
        )
        if let errors = probed?.errors, !errors.isEmpty {
            return .refused(NowGraphQLController.Refusal(bytes: NowGraphQLController.bytes(GraphQLResult(errors: errors))).errors)
        }
        guard let (tableName, args) = probe.value, let table = try? store.table(tableName) else {
            return refused("Subscribe to one table: subscription { incident(queryConditions: \"…\") { sequence change } }")
        }
        var query = EncodedQuery()
        if let conditions = args["queryConditions"].string, !conditions.isEmpty {
            do {
                query = try EncodedQuery(conditions)
                // Refused now when it cannot be compiled, rather than at the first change.
                _ = try await store.list(
                    RecordQuery(table: table.name, query: query, fields: ["sys_id"], limit: 0, count: false), caller: caller
                )
            } catch let error as EncodedQueryError {
                return refused("Invalid queryConditions: \(error.message)")
            } catch let error as EngineError {
                let wording = ServiceNowError(error)
                return refused(wording.detail.map { "\(wording.message): \($0)" } ?? wording.message)
            } catch {
                return refused("Invalid queryConditions")
            }
        }
        let after: Int
        let since = args["since"]
        let fromNow = since.isNull || since.isUndefined
        if fromNow {
            // The head of the log; when it cannot be read the subscription is refused (the client retries), never
            // started from the beginning of the log.
            do {
                after = try await store.latestSequence()
            } catch {
                return .refused([.object([
                    "message": .string("The database is unavailable; try again shortly"), "errorType": .string("Unavailable"),
                ])])
            }
        } else if let number = since.int, number >= 0 {
            after = number
        } else {
            return refused("since must be an event sequence number (0 or more)")
        }
        let key = RenderedResultKey.document(text: text, variables: request.variables, operationName: request.operationName)
        let results = results
        let maxPageSize = controller.configuration.maxPageSize
        // Plain documents render without the library's executor (see ``NowGraphQLDirect``).
        let plan = direct ? NowGraphQLDirect.subscriptionPlan(document, operationName: request.operationName, catalog: store.catalog) : nil
        var stream = LiveSubscription(live: LiveQuery(table: table, query: query, caller: caller), after: after) { change, caller in
            // Followers who see alike (the same document and visibility) share one rendering of each change.
            let shared = RenderedResultKey(
                sequence: change.event.sequence, kind: change.kind.rawValue, document: key,
                viewer: store.visibility(of: caller, reaching: table)
            )
            return try await results.value(shared) {
                let value = try await LiveChange.make(change, table: table, store: store, caller: caller)
                if let plan, let bytes = NowGraphQLDirect.render(plan, value) { return bytes }
                let context = NowGraphQLSchema.Context(
                    store: store, caller: caller, maxPageSize: maxPageSize, budget: NowGraphQLSchema.Budget()
                )
                let result = try await execute(
                    schema: schema, documentAST: prepared.document, rootValue: value, context: context, variableValues: variables,
                    operationName: request.operationName
                )
                return NowGraphQLController.bytes(result)
            }
        }
        if fromNow { stream.shareable = "now\u{0}" + key }
        return .stream(stream)
    }
}

/// Finds the table and arguments of a subscription's root field (see ``NowGraphQLSocketDialect``).
final class ArgumentProbe: Sendable {
    private let state = Mutex<(table: String, args: Map)?>(nil)

    func found(table: String, args: Map) { state.withLock { $0 = (table, args) } }
    var value: (table: String, args: Map)? { state.withLock { $0 } }
}

/// One change as the subscription's result shows it: the record (the row after it; before it when it left or
/// was deleted) and, for a change, the record as it was before.
struct LiveChange: Sendable {
    let change: RecordChange
    let record: NowGraphQLSchema.Row?
    let previous: NowGraphQLSchema.Row?

    static func make(_ change: RecordChange, table: SchemaCatalog.Table, store: RecordStore, caller: Caller) async throws -> LiveChange {
        let eventClass = store.catalog.table(change.event.table) ?? table
        let columns = eventClass.readableColumns.filter { $0.field.type != .password }
        let record = Record(table: eventClass.name, sysID: change.event.sysID, values: change.record)
        var records = [record]
        if change.kind == .changed {
            records.append(Record(
                table: eventClass.name, sysID: change.event.sysID, values: change.record.merging(change.previous) { _, old in old }
            ))
        }
        let page = RecordPage(columns: columns, records: records, total: records.count)
        let data = try await NowGraphQLSchema.engine { try await store.displayData(for: page, displayValues: true, caller: caller) }
        let renderer = RecordRenderer(
            catalog: store.catalog, mode: .all, excludeReferenceLink: true, baseURL: "", data: data, timeZone: caller.timeZone
        )
        let byName = Dictionary(columns.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let rows = records.map { NowGraphQLSchema.Row(record: $0, columns: byName, renderer: renderer) }
        return LiveChange(change: change, record: rows.first, previous: rows.count > 1 ? rows[1] : nil)
    }
}

/// Subscription results by change and document: a thousand subscribers of one document are rendered once per
/// change.
typealias RenderedResults = SharedWork<RenderedResultKey, [UInt8]?>

struct RenderedResultKey: SequencedKey {
    let sequence: Int
    let kind: String
    /// The document's identity: its text, variables and operation name.
    let document: String
    /// Who the result was rendered for, when it depends on that ("" when it does not).
    let viewer: String

    static func document(text: String, variables: JSONValue?, operationName: String?) -> String {
        text + "\u{0}" + String(decoding: (variables ?? .null).serialized(), as: UTF8.self) + "\u{0}" + (operationName ?? "")
    }
}
