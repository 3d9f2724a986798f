import DocketModel
import Foundation
import Hummingbird

/// The Change Management REST API (`/api/sn_chg_rest/change`, also under `/v1`): change requests of every type or
/// of one (`normal`, `emergency`, `standard`), a standard change made from a template version, the templates, and a
/// change's tasks. Records are answered with every field as `{"value", "display_value"}` (references add `link`), as
/// this API does; writes take field values in the body (and, as ServiceNow allows, as name-value query parameters).
/// Everything goes through the engine, as the Table API's requests do.
struct ChangeManagementController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration

    static let types = ["normal", "emergency", "standard"]

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("change", use: { try await list($0, $1, type: nil) })
        routes.post("change", use: { try await create($0, $1, type: nil) })
        for type in Self.types {
            routes.get(RouterPath("change/\(type)"), use: { try await list($0, $1, type: type) })
            routes.get(RouterPath("change/\(type)/:sys_id"), use: { try await read($0, $1, type: type) })
            routes.patch(RouterPath("change/\(type)/:sys_id"), use: { try await update($0, $1, type: type) })
            routes.delete(RouterPath("change/\(type)/:sys_id"), use: { try await delete($0, $1, type: type) })
        }
        routes.post("change/normal", use: { try await create($0, $1, type: "normal") })
        routes.post("change/emergency", use: { try await create($0, $1, type: "emergency") })
        routes.get("change/standard/template", use: templates)
        routes.post("change/standard/:sys_id", use: createStandard)
        routes.get("change/:sys_id", use: { try await read($0, $1, type: nil) })
        routes.patch("change/:sys_id", use: { try await update($0, $1, type: nil) })
        routes.delete("change/:sys_id", use: { try await delete($0, $1, type: nil) })
        routes.get("change/:sys_id/task", use: tasks)
        routes.post("change/:sys_id/task", use: createTask)
        routes.get("change/:sys_id/task/:task_id", use: { try await task($0, $1, method: .get) })
        routes.patch("change/:sys_id/task/:task_id", use: { try await task($0, $1, method: .patch) })
        routes.delete("change/:sys_id/task/:task_id", use: { try await task($0, $1, method: .delete) })
        return routes
    }

    // MARK: Changes

    func list(_ request: Request, _ context: Context, type: String?) async throws -> Response {
        let caller = try context.requireCaller()
        let parameters = FormQuery.parse(request.uri.query)
        var query = try encodedQuery(parameters)
        if let type { query = try EncodedQuery("type=\(type)").and(query) }
        return try await listResponse("change_request", query: query, parameters: parameters, request: request, caller: caller)
    }

    func read(_ request: Request, _ context: Context, type: String?) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: type, caller: caller)
        return try await single(sysID, table: "change_request", request: request, caller: caller)
    }

    func create(_ request: Request, _ context: Context, type: String?) async throws -> Response {
        let caller = try context.requireCaller()
        var values = try await fields(request, context: context)
        if let type { values["type"] = type; values["chg_model"] = values["chg_model"] ?? type }
        if let given = values["type"], !Self.types.contains(given) {
            throw ServiceNowError.badRequest("Invalid type", detail: "type is one of normal, emergency, standard")
        }
        let sysID = try await store.insert(into: "change_request", values: values, caller: caller)
        return try await single(sysID, table: "change_request", request: request, caller: caller, status: .ok)
    }

    /// A standard change from a template: a `std_change_producer_version` sys_id, or a template's
    /// (`std_change_record_producer`), whose newest version is used.
    @Sendable func createStandard(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let template = try context.parameters.require("sys_id")
        guard SysID.isValid(template), !template.contains(".") else {
            throw ServiceNowError.badRequest("Invalid template", detail: "Give a standard change template's sys_id")
        }
        let versions = try await store.list(
            RecordQuery(
                table: "std_change_producer_version",
                query: try EncodedQuery("sys_id=\(template)^ORstd_change_producer=\(template)^ORDERBYDESCversion"),
                fields: ["sys_id"], limit: 1, count: false
            ),
            caller: caller
        )
        guard let version = versions.records.first?.values["sys_id"] else {
            throw ServiceNowError(.notFound, "No Record found", detail: "No standard change template \(template)")
        }
        var values = try await fields(request, context: context)
        values["type"] = "standard"
        values["chg_model"] = "standard"
        values["std_change_producer_version"] = version
        let sysID = try await store.insert(into: "change_request", values: values, caller: caller)
        return try await single(sysID, table: "change_request", request: request, caller: caller, status: .ok)
    }

    func update(_ request: Request, _ context: Context, type: String?) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: type, caller: caller)
        var values = try await fields(request, context: context)
        values["type"] = nil
        values["sys_class_name"] = nil
        if !values.isEmpty { try await store.update(sysID, in: "change_request", values: values, caller: caller) }
        return try await single(sysID, table: "change_request", request: request, caller: caller)
    }

    func delete(_ request: Request, _ context: Context, type: String?) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: type, caller: caller)
        try await store.delete(sysID, from: "change_request", caller: caller)
        return Response(status: .noContent)
    }

    @Sendable func templates(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let parameters = FormQuery.parse(request.uri.query)
        var query = try encodedQuery(parameters)
        query = try EncodedQuery("active=true").and(query)
        return try await listResponse("std_change_record_producer", query: query, parameters: parameters, request: request, caller: caller)
    }

    // MARK: Tasks

    @Sendable func tasks(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: nil, caller: caller)
        let parameters = FormQuery.parse(request.uri.query)
        let query = try EncodedQuery("change_request=\(sysID)").and(try encodedQuery(parameters))
        return try await listResponse("change_task", query: query, parameters: parameters, request: request, caller: caller)
    }

    @Sendable func createTask(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: nil, caller: caller)
        var values = try await fields(request, context: context)
        values["change_request"] = sysID
        let taskID = try await store.insert(into: "change_task", values: values, caller: caller)
        return try await single(taskID, table: "change_task", request: request, caller: caller, status: .ok)
    }

    func task(_ request: Request, _ context: Context, method: HTTPRequest.Method) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try await change(context, type: nil, caller: caller)
        let taskID = try context.parameters.require("task_id")
        let task = try await store.get(taskID, in: "change_task", fields: ["change_request"], caller: caller).record
        guard task.values["change_request"] == sysID else {
            throw ServiceNowError(.notFound, "No Record found", detail: "The task \(taskID) is not one of change \(sysID)'s")
        }
        switch method {
        case .delete:
            try await store.delete(taskID, from: "change_task", caller: caller)
            return Response(status: .noContent)
        case .patch:
            var values = try await fields(request, context: context)
            values["change_request"] = nil
            values["sys_class_name"] = nil
            if !values.isEmpty { try await store.update(taskID, in: "change_task", values: values, caller: caller) }
            return try await single(taskID, table: "change_task", request: request, caller: caller)
        default:
            return try await single(taskID, table: "change_task", request: request, caller: caller)
        }
    }

    // MARK: Helpers

    /// The change named in the path, which the caller may read and which is of `type` when one is given.
    private func change(_ context: Context, type: String?, caller: Caller) async throws -> String {
        let sysID = try context.parameters.require("sys_id")
        let record = try await store.get(sysID, in: "change_request", fields: ["sys_id", "type"], caller: caller).record
        if let type, record.values["type"] != type {
            throw ServiceNowError(.notFound, "No Record found", detail: "\(sysID) is not a change of type \(type)")
        }
        return sysID
    }

    private func encodedQuery(_ parameters: [(String, String)]) throws -> EncodedQuery {
        let text = parameters.first { $0.0 == "sysparm_query" }?.1 ?? ""
        do {
            return try EncodedQuery(text)
        } catch {
            throw ServiceNowError.badRequest("Invalid query", detail: error.description)
        }
    }

    /// Field values from the JSON body and from name-value query parameters (not `sysparm_…` ones).
    private func fields(_ request: Request, context: Context) async throws -> [String: String] {
        var values: [String: String] = [:]
        for (name, value) in FormQuery.parse(request.uri.query) where !name.hasPrefix("sysparm_") { values[name] = value }
        let body = try await RequestBody.bytes(of: request, context: context)
        if body.readableBytes > 0 {
            let given = try RequestBody.record(body, request: request)
            values.merge(given) { _, body in body }
        }
        return values
    }

    private func listResponse(
        _ table: String, query: EncodedQuery, parameters: [(String, String)], request: Request, caller: Caller
    ) async throws -> Response {
        func number(_ name: String) -> Int? { parameters.first { $0.0 == name }.flatMap { Int($0.1) } }
        let limit = min(max(number("sysparm_limit") ?? 500, 1), configuration.maxPageSize)
        let offset = max(number("sysparm_offset") ?? 0, 0)
        let page = try await store.list(
            RecordQuery(table: table, query: query, limit: limit, offset: offset, count: true), caller: caller
        )
        var writer = JSONWriter(capacity: 4096)
        writer.beginObject()
        writer.key("result")
        writer.beginArray()
        let renderer = try await renderer(for: page, request: request, caller: caller)
        for record in page.records { renderer.write(record, columns: page.columns, to: &writer) }
        writer.endArray()
        writer.endObject()
        var response = Response.json(writer)
        if let total = page.total { response.headers[.xTotalCount] = String(total) }
        return response
    }

    private func single(
        _ sysID: String, table: String, request: Request, caller: Caller, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let (columns, record) = try await store.get(sysID, in: table, caller: caller)
        let page = RecordPage(columns: columns, records: [record], total: nil)
        var writer = JSONWriter(capacity: 4096)
        writer.beginObject()
        writer.key("result")
        try await renderer(for: page, request: request, caller: caller).write(record, columns: columns, to: &writer)
        writer.endObject()
        return Response.json(writer, status: status)
    }

    private func renderer(for page: RecordPage, request: Request, caller: Caller) async throws -> RecordRenderer {
        let data = try await store.displayData(for: page, displayValues: true, caller: caller)
        return RecordRenderer(
            catalog: store.catalog, mode: .all, excludeReferenceLink: false,
            baseURL: BaseURL.of(request, configuration: configuration), data: data, timeZone: caller.timeZone
        )
    }
}
