import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

/// The REST Table API: `/api/now[/v1|/v2]/table/{table}[/{sys_id}]`.
struct TableController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration
    /// 1 for `/v1` (an empty list is a 404 there), otherwise 2.
    let version: Int

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get(":table", use: list)
        routes.post(":table", use: create)
        routes.get(":table/:sys_id", use: read)
        routes.put(":table/:sys_id", use: update)
        routes.patch(":table/:sys_id", use: update)
        routes.delete(":table/:sys_id", use: delete)
        return routes
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let page = try await store.list(
            RecordQuery(
                table: table.name, query: parameters.query, fields: parameters.fields, limit: parameters.limit,
                offset: parameters.offset, count: true
            ),
            caller: caller
        )
        if version == 1, page.records.isEmpty {
            throw ServiceNowError(.notFound, "No Record found", detail: "Records matching query not found")
        }
        let baseURL = baseURL(for: request)
        let renderer = try await renderer(for: page, parameters: parameters, baseURL: baseURL, caller: caller)
        return ListResponse.make(
            page.records, total: page.total, parameters: parameters, baseURL: baseURL, path: request.uri.path,
            bytesPerRecord: 512
        ) { record, writer in renderer.write(record, columns: page.columns, to: &writer) }
    }

    @Sendable func read(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let sysID = try context.parameters.require("sys_id")
        return try await single(sysID, table: table, parameters: parameters, request: request, caller: caller)
    }

    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let values = try await RequestBody.record(from: request, context: context)
        // The answer is the row as this write committed it, read in its transaction.
        let committed = CommittedRow()
        let (store, fields) = (self.store, parameters.fields)
        let sysID = try await store.insert(
            into: table.name, values: values, caller: caller, options: options(parameters, caller: caller),
            within: { db, id in committed.set(try await store.readBack(id, in: table, fields: fields, caller: caller, db: db)) }
        )
        var response = try await single(
            sysID, table: table, parameters: parameters, request: request, caller: caller, status: .created,
            committed: committed.value
        )
        response.headers[.location] = "\(baseURL(for: request))/api/now/table/\(table.name)/\(sysID)"
        return response
    }

    @Sendable func update(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let sysID = try context.parameters.require("sys_id")
        let values = try await RequestBody.record(from: request, context: context)
        let committed = CommittedRow()
        let (store, fields) = (self.store, parameters.fields)
        try await store.update(
            sysID, in: table.name, values: values, caller: caller, options: options(parameters, caller: caller),
            within: { db, id in committed.set(try await store.readBack(id, in: table, fields: fields, caller: caller, db: db)) }
        )
        return try await single(
            sysID, table: table, parameters: parameters, request: request, caller: caller, committed: committed.value
        )
    }

    @Sendable func delete(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, _) = try prepare(request, context: context)
        try await store.delete(try context.parameters.require("sys_id"), from: table.name, caller: caller)
        return Response(status: .noContent)
    }

    // MARK: Helpers

    private func prepare(_ request: Request, context: Context) throws -> (SchemaCatalog.Table, TableParameters) {
        let catalog = store.catalog
        let name = try context.parameters.require("table")
        guard let table = catalog.table(name) else { throw EngineError.invalidTable(name) }
        let parameters = try TableParameters(
            query: request.uri.query, table: table, catalog: catalog, maxPageSize: configuration.maxPageSize
        )
        return (table, parameters)
    }

    private func options(_ parameters: TableParameters, caller: Caller) -> WriteOptions {
        WriteOptions(
            inputDisplayValue: parameters.inputDisplayValue, suppressAutoSysFields: parameters.suppressAutoSysField,
            timeZone: caller.timeZone
        )
    }

    /// One record as the answer: `committed` when the write read it back, else read now.
    private func single(
        _ sysID: String, table: SchemaCatalog.Table, parameters: TableParameters, request: Request, caller: Caller,
        status: HTTPResponse.Status = .ok, committed: (columns: [ResultColumn], record: Record)? = nil
    ) async throws -> Response {
        if request.method != .get, request.headers[.xNoResponseBody]?.lowercased() == "true" {
            return Response(status: status)
        }
        let columns: [ResultColumn]
        let record: Record
        if let committed {
            (columns, record) = committed
        } else {
            (columns, record) = try await store.get(sysID, in: table.name, fields: parameters.fields, caller: caller)
        }
        let page = RecordPage(columns: columns, records: [record], total: nil)
        let renderer = try await renderer(
            for: page, parameters: parameters, baseURL: baseURL(for: request), caller: caller
        )
        var writer = JSONWriter(capacity: 4096)
        writer.beginObject()
        writer.key("result")
        renderer.write(record, columns: columns, to: &writer)
        writer.endObject()
        return Response.json(writer, status: status)
    }

    private func renderer(
        for page: RecordPage, parameters: TableParameters, baseURL: String, caller: Caller
    ) async throws -> RecordRenderer {
        let data = try await store.displayData(for: page, displayValues: parameters.displayMode != .value, caller: caller)
        return RecordRenderer(
            catalog: store.catalog, mode: parameters.displayMode,
            excludeReferenceLink: parameters.excludeReferenceLink, baseURL: baseURL, data: data,
            timeZone: caller.timeZone
        )
    }

    private func baseURL(for request: Request) -> String {
        BaseURL.of(request, configuration: configuration)
    }
}

/// The instance's external base URL, without a trailing slash.
enum BaseURL {
    static func of(_ request: Request, configuration: Configuration) -> String {
        if let url = configuration.publicURL { return url.hasSuffix("/") ? String(url.dropLast()) : url }
        let host = request.head.authority ?? "\(configuration.host):\(configuration.port)"
        return (configuration.usesTLS ? "https://" : "http://") + host
    }
}
