import Crypto
import DocketModel
import Foundation
import HTTPTypes
import Hummingbird

/// Docket's own notification API, under `/api/docket/` with the Table API's credentials and error shape:
///
/// - `GET push/vapid`: the public key browsers subscribe with (`applicationServerKey`).
/// - `POST push/subscriptions`: registers a device of the caller — a Web Push subscription as `PushManager` gives
///   it (`{"endpoint", "keys": {"p256dh", "auth"}}`), a UnifiedPush endpoint (the same, `"kind": "unifiedpush"`),
///   or an APNs device (`{"kind": "apns", "token": HEX}`); `"name"` labels it. Answers 201 with the stored
///   subscription; the same endpoint or token again updates that one (200) instead of adding another.
/// - `DELETE push/subscriptions/{sys_id}`: removes one of the caller's devices (204).
/// - `GET notifications`: the caller's notifications, newest first (`unread=true`, `sysparm_limit`,
///   `sysparm_offset`); marking one read is a Table API `PATCH` of `sys_notification` (`{"read": "true"}`).
struct NotificationController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let vapid: VAPIDKey
    let endpoints: EndpointGuard

    var routes: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("push/vapid", use: publicKey)
        routes.post("push/subscriptions", use: subscribe)
        routes.delete("push/subscriptions/:sys_id", use: unsubscribe)
        routes.get("notifications", use: notifications)
        return routes
    }

    @Sendable func publicKey(_ request: Request, context: Context) async throws -> Response {
        _ = try context.requireCaller()
        return Response.json(.object(["result": .object(["public_key": .string(vapid.publicKey)])]))
    }

    @Sendable func subscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let body = try await RequestBody.json(from: request, context: context)
        guard body.objectValue != nil else { throw ServiceNowError.badRequest("The body must be a JSON object") }
        let kind = body["kind"]?.stringValue ?? "webpush"
        let name = String((body["name"]?.stringValue ?? "").prefix(100))
        var values: [String: String] = ["kind": kind, "name": name, "active": "true", "user": caller.userID]
        let identity: (field: String, value: String)
        switch kind {
        case "webpush", "unifiedpush":
            guard let endpoint = body["endpoint"]?.stringValue, !endpoint.isEmpty else {
                throw ServiceNowError.badRequest("A subscription needs an endpoint", detail: "{\"endpoint\": URL, \"keys\": {\"p256dh\", \"auth\"}}")
            }
            let p256dh = body["keys"]?["p256dh"]?.stringValue ?? ""
            let auth = body["keys"]?["auth"]?.stringValue ?? ""
            do {
                _ = try WebPush.SubscriptionKeys(p256dh: p256dh, auth: auth)
            } catch {
                throw ServiceNowError.badRequest("The subscription's keys cannot be used", detail: error.description)
            }
            do {
                _ = try await endpoints.check(endpoint)
            } catch {
                throw ServiceNowError.badRequest("The endpoint is not accepted", detail: error.description)
            }
            values["endpoint"] = endpoint
            values["p256dh"] = p256dh
            values["auth"] = auth
            identity = ("endpoint", endpoint)
        case "apns":
            let token = (body["token"]?.stringValue ?? "").lowercased()
            guard (64...200).contains(token.count), token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
                throw ServiceNowError.badRequest("An APNs device token is 64 to 200 hexadecimal digits")
            }
            values["token"] = token
            identity = ("token", token)
        default:
            throw ServiceNowError.badRequest("Unknown kind \(kind.prefix(40))", detail: "webpush, unifiedpush or apns")
        }
        // One device, one subscription: its sys_id follows from the user and the endpoint (or token), so that the
        // same device registered again — also by two requests at once — is the same record, updated (its keys may
        // have changed). If another user registered it before, it now belongs to this one.
        let digest = SHA256.hash(data: Array((caller.userID + "\u{0}" + identity.field + "\u{0}" + identity.value).utf8))
        let sysID = String(digest.map { String(format: "%02x", $0) }.joined().prefix(32))
        var status = HTTPResponse.Status.created
        do {
            values["sys_id"] = sysID
            try await store.insert(into: "sys_push_subscription", values: values, caller: .system)
        } catch let error as EngineError where error.code == .badRequest {
            let current = try await store.list(
                RecordQuery(
                    table: "sys_push_subscription", query: Self.query([("sys_id", sysID)]), fields: ["sys_id", "user", identity.field],
                    limit: 1, count: false
                ),
                caller: .system
            ).records.first
            guard let current, current["user"] == caller.userID, current[identity.field] == identity.value else { throw error }
            values.removeValue(forKey: "user")
            values.removeValue(forKey: "sys_id")
            try await store.update(sysID, in: "sys_push_subscription", values: values, caller: .system)
            status = .ok
        }
        let others = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: Self.query([(identity.field, identity.value)]), fields: ["sys_id"], limit: 100,
                count: false
            ),
            caller: .system
        ).records
        for other in others where other.sysID != sysID {
            do {
                try await store.delete(other.sysID, from: "sys_push_subscription", caller: .system)
            } catch let error as EngineError where error.code == .notFound {
                continue
            }
        }
        let fields = ["sys_id", "kind", "name", "endpoint", "token", "active", "sys_created_on"]
        let stored = try await store.get(sysID, in: "sys_push_subscription", fields: fields, caller: caller).record
        return Response.json(.object(["result": Self.json(stored, fields: fields)]), status: status)
    }

    @Sendable func unsubscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try context.parameters.require("sys_id")
        guard SysID.isValid(sysID) else { throw ServiceNowError(.notFound, "No Record found") }
        // Only the caller's own devices, also for an admin (another user's are removed through the Table API).
        let own = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: Self.query([("sys_id", sysID), ("user", caller.userID)]),
                fields: ["sys_id"], limit: 1, count: false
            ),
            caller: caller
        )
        guard !own.records.isEmpty else { throw ServiceNowError(.notFound, "No Record found", detail: "No such device of yours") }
        try await store.delete(sysID, from: "sys_push_subscription", caller: caller)
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
        var conditions = [("user", caller.userID)]
        if let unread = parameters["unread"] {
            guard unread == "true" || unread == "false" else { throw ServiceNowError.badRequest("unread must be true or false") }
            if unread == "true" { conditions.append(("read", "false")) }
        }
        let query = Self.query(conditions, newestFirst: true)
        let fields = ["sys_id", "subject", "message", "table_name", "document", "read", "sys_created_on"]
        let page = try await store.list(
            RecordQuery(table: "sys_notification", query: query, fields: fields, limit: limit, offset: offset, count: true),
            caller: caller
        )
        let unreadCount = try await store.list(
            RecordQuery(
                table: "sys_notification", query: Self.query([("user", caller.userID), ("read", "false")]),
                fields: ["sys_id"], limit: 1, count: true
            ),
            caller: caller
        ).total ?? 0
        var response = Response.json(.object(["result": .array(page.records.map { record in
            JSONValue(members: fields.map { ($0, .string(record[$0])) } + [("url", .string("/app/item/\(record["table_name"])/\(record["document"])"))])
        })]))
        if let total = HTTPField.Name("X-Total-Count") { response.headers[total] = String(page.total ?? page.records.count) }
        if let unread = HTTPField.Name("X-Unread-Count") { response.headers[unread] = String(unreadCount) }
        return response
    }

    /// Equality conditions, ANDed; newest first when asked.
    static func query(_ conditions: [(String, String)], newestFirst: Bool = false) -> EncodedQuery {
        EncodedQuery(
            all: conditions.map { QueryCondition($0.0, .equals, $0.1) },
            orderBy: newestFirst ? [OrderTerm("sys_created_on", descending: true), OrderTerm("event", descending: true)] : []
        )
    }

    static func json(_ record: Record, fields: [String]) -> JSONValue {
        JSONValue(members: fields.map { ($0, .string(record[$0])) })
    }
}
