import Foundation
import DocketModel
import Hummingbird

/// The "My Work" scripted REST API of ServiceNow's example apps (spec §6):
/// `GET /api/x_snc_my_work/v1/tracker/task` and `POST …/task/{task_id}/comment`.
struct MyWorkController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let configuration: Configuration

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("task", use: tasks)
        routes.post("task/:task_id/comment", use: comment)
        return routes
    }

    /// The caller's active tasks, grouped by class label in order of first appearance, oldest first.
    @Sendable func tasks(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let query = try EncodedQuery("assigned_to=javascript:gs.getUserID()^active=true^ORDERBYsys_created_on")
        let page = try await store.list(
            RecordQuery(
                table: "task", query: query, fields: ["number", "short_description", "sys_id", "sys_created_on"],
                limit: Int.max / 2, count: false
            ),
            caller: caller
        )
        let base = BaseURL.of(request, configuration: configuration)
        let catalog = store.catalog
        var groups: [(String, [JSONValue])] = []
        for record in page.records {
            let label = catalog.table(record.table)?.label ?? record.table
            // getValue() yields null, not "", for empty fields.
            func value(_ field: String) -> JSONValue { record[field].isEmpty ? .null : .string(record[field]) }
            let item = JSONValue.object([
                "number": value("number"), "short_desc": value("short_description"),
                "sys_id": .string(record.sysID),
                "link": .string("\(base)/api/now/v2/table/\(record.table)/\(record.sysID)"),
                "snowui": .string("\(base)/\(record.table).do?sys_id=\(record.sysID)"),
                "created": value("sys_created_on")])
            if let index = groups.firstIndex(where: { $0.0 == label }) {
                groups[index].1.append(item)
            } else {
                groups.append((label, [item]))
            }
        }
        return Response.json(.object(["result": JSONValue(members: groups.map { ($0.0, .array($0.1)) })]))
    }

    /// Adds the comment as a work note on the task; 201 `{"data":"Successfully inserted"}` (no result wrapper).
    @Sendable func comment(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let taskID = try context.parameters.require("task_id")
        let body = try await RequestBody.json(from: request, context: context)
        guard let comment = body["comment"]?.stringValue,
            !comment.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
        else {
            throw ServiceNowError.badRequest(
                "Valid inputs not present in request. Comments data not present. Request body must be like {'comments':'My comments here'}"
            )
        }
        do {
            try await store.update(taskID, in: "task", values: ["work_notes": comment], caller: caller)
        } catch let error as EngineError where error.code == .notFound {
            throw ServiceNowError(.notFound, "Task with Record Id not found")
        } catch let error as EngineError where error.code == .forbidden || error.code == .badRequest {
            throw ServiceNowError.badRequest("Error updating comments", detail: "May be ACL restricted updating comments")
        }
        return Response(
            status: .created, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: #"{"data":"Successfully inserted"}"#))
        )
    }
}
