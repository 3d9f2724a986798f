import DocketModel
import Foundation
import HTTPTypes
import Hummingbird

/// Docket's own notification API, under `/api/docket/` with the Table API's credentials and error shape:
///
/// - `GET push/vapid`: the public key browsers subscribe with (`applicationServerKey`).
/// - `POST push/subscriptions`: registers a device of the caller (``PushSubscriptions/register(_:caller:)``); 201
///   with the stored subscription, 200 when the same device was registered before.
/// - `DELETE push/subscriptions/{sys_id}`: removes one of the caller's devices (204).
/// - `GET notifications`: the caller's notifications, newest first (`unread=true`, `sysparm_limit`,
///   `sysparm_offset`), with `X-Total-Count` and `X-Unread-Count`; `POST notifications/read` marks them all read
///   (or those named in `{"sys_ids": […]}`); one is also marked read by a Table API `PATCH {"read": "true"}`.
struct NotificationController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let vapid: VAPIDKey
    let subscriptions: PushSubscriptions

    var routes: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("push/vapid", use: publicKey)
        routes.post("push/subscriptions", use: subscribe)
        routes.delete("push/subscriptions/:sys_id", use: unsubscribe)
        routes.get("notifications", use: notifications)
        routes.post("notifications/read", use: markRead)
        return routes
    }

    @Sendable func publicKey(_ request: Request, context: Context) async throws -> Response {
        _ = try context.requireCaller()
        return Response.json(.object(["result": .object(["public_key": .string(vapid.publicKey)])]))
    }

    @Sendable func subscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let body = try await RequestBody.json(from: request, context: context)
        do {
            let (record, created) = try await subscriptions.register(body, caller: caller)
            return Response.json(.object(["result": Self.json(record, fields: PushSubscriptions.fields)]), status: created ? .created : .ok)
        } catch let invalid as PushSubscriptions.Invalid {
            throw ServiceNowError.badRequest(invalid.message, detail: invalid.detail)
        }
    }

    @Sendable func unsubscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        guard try await subscriptions.remove(try context.parameters.require("sys_id"), caller: caller) else {
            throw ServiceNowError(.notFound, "No Record found", detail: "No such device of yours")
        }
        return Response(status: .noContent)
    }

    @Sendable func notifications(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let parameters = request.uri.queryParameters
        var limit = 50
        if let text = parameters["sysparm_limit"] {
            guard let value = Int(text), value > 0 else { throw ServiceNowError.badRequest("sysparm_limit must be a positive number") }
            limit = min(value, 1000)
        }
        var offset = 0
        if let text = parameters["sysparm_offset"] {
            guard let value = Int(text), value >= 0, value <= 1_000_000 else {
                throw ServiceNowError.badRequest("sysparm_offset must be a number from 0 to 1000000")
            }
            offset = value
        }
        var unreadOnly = false
        if let unread = parameters["unread"] {
            guard unread == "true" || unread == "false" else { throw ServiceNowError.badRequest("unread must be true or false") }
            unreadOnly = unread == "true"
        }
        let (page, unread) = try await PushSubscriptions.inbox(store, caller: caller, unreadOnly: unreadOnly, limit: limit, offset: offset)
        let fields = ["sys_id", "subject", "message", "table_name", "document", "read", "sys_created_on"]
        var response = Response.json(.object(["result": .array(page.records.map { record in
            JSONValue(members: fields.map { ($0, .string(record[$0])) } + [("url", .string("/app/item/\(record["table_name"])/\(record["document"])"))])
        })]))
        if let total = HTTPField.Name("X-Total-Count") { response.headers[total] = String(page.total ?? page.records.count) }
        if let count = HTTPField.Name("X-Unread-Count") { response.headers[count] = String(unread) }
        return response
    }

    @Sendable func markRead(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let body = try await RequestBody.json(from: request, context: context)
        var ids: [String]? = nil
        if let named = body["sys_ids"] {
            guard let list = named.arrayValue, list.count <= 1000 else {
                throw ServiceNowError.badRequest("sys_ids must be a list of at most 1000 sys_ids")
            }
            ids = list.compactMap(\.stringValue).filter(SysID.isValid)
        }
        let changed = ids?.isEmpty == true ? 0 : try await PushSubscriptions.markRead(store, caller: caller, ids: ids)
        return Response.json(.object(["result": .object(["marked_read": .integer(changed)])]))
    }

    static func json(_ record: Record, fields: [String]) -> JSONValue {
        JSONValue(members: fields.map { ($0, .string(record[$0])) })
    }
}
