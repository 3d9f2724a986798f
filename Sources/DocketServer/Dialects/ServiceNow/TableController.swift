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
    /// Rendered list pages, served again while nothing has been written since (``ListPages``).
    let pages: ListPages

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
        let expanded = try await TinyURLs.expand(request.uri.query, store: store)
        let (table, parameters) = try prepare(request, context: context, query: expanded)
        let baseURL = baseURL(for: request)
        guard pages.isEnabled else {
            return try await listPage(table, parameters: parameters, request: request, baseURL: baseURL, caller: caller).response
        }
        let key = [
            request.uri.path, expanded ?? "", baseURL, ListPages.callerKey(caller), String(store.versionedCatalog.generation),
        ].joined(separator: "\u{0}")
        // Read first: a change that commits after it ends the page at the next request (see ``ListPages``).
        let head = try await store.changeMark()
        let store = self.store
        let page = try await pages.page(key, head: head) {
            let page = try await listPage(table, parameters: parameters, request: request, baseURL: baseURL, caller: caller)
            let keep = store.listIsTimeless(table, query: parameters.query, caller: caller)
            return (ListPages.Page(body: page.body, headers: page.headers, head: head), keep)
        }
        return page.response
    }

    /// A list page read and rendered now.
    private func listPage(
        _ table: SchemaCatalog.Table, parameters: TableParameters, request: Request, baseURL: String, caller: Caller
    ) async throws -> (body: ByteBuffer, headers: HTTPFields, response: Response) {
        // An instance may answer no rows to a query with a term it cannot use (glide.invalid_query.returns_no_rows).
        let noRows = try await store.properties.flag(InstanceProperties.invalidQueryReturnsNoRows, storage: store.storage)
        let page = try await store.list(
            RecordQuery(
                table: table.name, query: parameters.query, fields: parameters.fields, limit: parameters.limit,
                offset: parameters.offset, count: true, invalidTerms: noRows ? .noRows : .ignore
            ),
            caller: caller
        )
        if version == 1, page.records.isEmpty {
            throw ServiceNowError(.notFound, "No Record found", detail: "Records matching query not found")
        }
        let renderer = try await renderer(for: page, parameters: parameters, baseURL: baseURL, caller: caller)
        let (body, headers) = ListResponse.parts(
            page.records, total: page.total, parameters: parameters, baseURL: baseURL, path: request.uri.path,
            bytesPerRecord: 512
        ) { record, writer in renderer.write(record, columns: page.columns, to: &writer) }
        return (body, headers, Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: body)))
    }

    @Sendable func read(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let sysID = try context.parameters.require("sys_id")
        let answer = try await single(sysID, table: table, parameters: parameters, request: request, caller: caller)
        // A client that holds this version (an offline copy) is told nothing changed.
        if let etag = answer.headers[.eTag], RecordVersion.isCurrent(ifNoneMatch: request.headers[.ifNoneMatch], etag: etag) {
            return Response(status: .notModified, headers: [.eTag: etag])
        }
        return answer.response
    }

    @Sendable func create(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let values = try await RequestBody.record(from: request, context: context)
        let (store, fields) = (self.store, parameters.fields)
        return try await IdempotentWrites(store: store).run(
            request, values: values, caller: caller, logger: context.logger,
            write: { claim in
                // The answer is the row as this write committed it: from the insert, or read in its transaction (compiled before it).
                let committed = CommittedRow()
                let plan = try CommittedRow.Plan(table: table, fields: fields, store: store, caller: caller)
                var options = options(parameters, caller: caller)
                options.idempotency = claim
                let sysID = try await store.insert(
                    into: table.name, values: values, caller: caller, options: options,
                    answer: CommittedRow.Answer(row: committed, plan: plan)
                )
                return try await created(sysID, table: table, parameters: parameters, request: request, caller: caller, committed: committed)
            },
            replay: { stored in
                try await created(stored.sysID, table: table, parameters: parameters, request: request, caller: caller, committed: nil)
            }
        )
    }

    private func created(
        _ sysID: String, table: SchemaCatalog.Table, parameters: TableParameters, request: Request, caller: Caller,
        committed: CommittedRow?
    ) async throws -> TableAnswer {
        var answer = try await single(
            sysID, table: table, parameters: parameters, request: request, caller: caller, status: .created, committed: committed
        )
        answer.headers[.location] = "\(baseURL(for: request))/api/now/table/\(table.name)/\(sysID)"
        return answer
    }

    @Sendable func update(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let sysID = try context.parameters.require("sys_id")
        let expected = try RecordVersion.expected(ifMatch: request.headers[.ifMatch])
        let values = try await RequestBody.record(from: request, context: context)
        let (store, fields) = (self.store, parameters.fields)
        return try await IdempotentWrites(store: store).run(
            request, values: values, caller: caller, logger: context.logger,
            write: { claim in
                let committed = CommittedRow()
                let plan = try CommittedRow.Plan(table: table, fields: fields, store: store, caller: caller)
                var options = options(parameters, caller: caller)
                options.expectedModCount = expected
                options.idempotency = claim
                do {
                    // The answer is the row as this write committed it: from the update, or read in its transaction.
                    try await store.update(
                        sysID, in: table.name, values: values, caller: caller, options: options,
                        answer: CommittedRow.Answer(row: committed, plan: plan)
                    )
                } catch let error as EngineError where error.code == .conflict && expected != nil {
                    throw try await preconditionFailed(sysID, table: table, parameters: parameters, request: request, caller: caller)
                }
                return try await single(sysID, table: table, parameters: parameters, request: request, caller: caller, committed: committed)
            },
            replay: { _ in try await single(sysID, table: table, parameters: parameters, request: request, caller: caller) }
        )
    }

    @Sendable func delete(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (table, parameters) = try prepare(request, context: context)
        let sysID = try context.parameters.require("sys_id")
        let expected = try RecordVersion.expected(ifMatch: request.headers[.ifMatch])
        let store = self.store
        return try await IdempotentWrites(store: store).run(
            request, values: [:], caller: caller, logger: context.logger,
            write: { claim in
                var options = WriteOptions()
                options.expectedModCount = expected
                options.idempotency = claim
                do {
                    try await store.delete(sysID, from: table.name, caller: caller, options: options)
                } catch let error as EngineError where error.code == .conflict && expected != nil {
                    throw try await preconditionFailed(sysID, table: table, parameters: parameters, request: request, caller: caller)
                }
                return TableAnswer(status: .noContent)
            },
            replay: { _ in TableAnswer(status: .noContent) }
        )
    }

    /// `412 Precondition Failed` for a write whose `If-Match` names a version the record is no longer at: ServiceNow's
    /// error envelope, with the record as it is now in `result` and its `ETag`, so that the client can merge.
    private func preconditionFailed(
        _ sysID: String, table: SchemaCatalog.Table, parameters: TableParameters, request: Request, caller: Caller
    ) async throws -> ServiceNowError {
        var error = ServiceNowError(
            .preconditionFailed, "Precondition Failed",
            detail: "The record was changed since the version in If-Match; the current record is in result"
        )
        let current = try await single(sysID, table: table, parameters: parameters, request: request, caller: caller, forceBody: true)
        error.result = try JSONValue.parse(current.body)["result"]
        if let etag = current.headers[.eTag] { error.headers[.eTag] = etag }
        return error
    }

    // MARK: Helpers

    private func prepare(_ request: Request, context: Context, query: String?? = nil) throws -> (SchemaCatalog.Table, TableParameters) {
        let catalog = store.catalog
        let name = try context.parameters.require("table")
        guard let table = catalog.table(name) else { throw EngineError.invalidTable(name) }
        let parameters = try TableParameters(
            query: query ?? request.uri.query, table: table, catalog: catalog, maxPageSize: configuration.maxPageSize
        )
        return (table, parameters)
    }

    private func options(_ parameters: TableParameters, caller: Caller) -> WriteOptions {
        WriteOptions(
            inputDisplayValue: parameters.inputDisplayValue, suppressAutoSysFields: parameters.suppressAutoSysField,
            timeZone: caller.timeZone
        )
    }

    /// One record as the answer, with its version as `ETag`: `committed` when the write read it back, else read now.
    private func single(
        _ sysID: String, table: SchemaCatalog.Table, parameters: TableParameters, request: Request, caller: Caller,
        status: HTTPResponse.Status = .ok, committed: CommittedRow? = nil, forceBody: Bool = false
    ) async throws -> TableAnswer {
        let columns: [ResultColumn]
        let record: Record
        var version: String?
        if let row = committed?.value {
            (columns, record) = row
            version = committed?.version
        } else {
            (columns, record) = try await store.get(sysID, in: table.name, fields: parameters.fields, caller: caller)
            version = record.values["sys_mod_count"]
            if version == nil {
                version = try await store.get(sysID, in: table.name, fields: ["sys_mod_count"], caller: caller).record.values["sys_mod_count"]
            }
        }
        var answer = TableAnswer(status: status)
        if let etag = version.flatMap(RecordVersion.etag) { answer.headers[.eTag] = etag }
        if !forceBody, request.method != .get, request.headers[.xNoResponseBody]?.lowercased() == "true" {
            return answer
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
        answer.headers[.contentType] = "application/json;charset=UTF-8"
        answer.body = writer.bytes
        return answer
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
