import DocketModel
import Foundation
import HTTPTypes
import Hummingbird

/// Notifications in the browser: the list (`/app/notifications`, the bell's page), marking them read, and push to
/// this browser — the web app manifest and service worker that make the web UI installable and show pushes, and
/// the JSON calls its "Enable notifications" control makes (`/app/push/…`, guarded by the page's CSRF token in
/// `X-CSRF-Token`).
struct WebNotifications {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let pages: WebPages
    let sessions: WebSessions
    let vapid: VAPIDKey
    let subscriptions: PushSubscriptions

    func add(to router: Router<Context>) {
        router.get("/app/notifications") { request, context in try await list(request, context: context) }
        router.post("/app/notifications/read") { request, context in try await readAll(request, context: context) }
        router.post("/app/notifications/preferences") { request, context in try await savePreferences(request, context: context) }
        router.get("/app/notifications/:sys_id") { request, context in try await open(request, context: context) }
        router.get("/app/push/vapid") { _, context in
            _ = try context.requireCaller()
            return Response.json(.object(["public_key": .string(vapid.publicKey)]))
        }
        router.post("/app/push/subscriptions") { request, context in try await subscribe(request, context: context) }
        router.post("/app/push/subscriptions/remove") { request, context in try await unsubscribe(request, context: context) }
        router.get("/app/sw.js") { request, _ in try script("sw.js", request) }
        router.get("/app/manifest.webmanifest") { request, _ in try script("manifest.webmanifest", request) }
    }

    /// The service worker and the manifest: from the assets, at paths whose scope is `/app/`, never cached for long
    /// (a browser checks a service worker for updates against this answer).
    private func script(_ name: String, _ request: Request) throws -> Response {
        guard let ui = pages.ui else { throw WebError(.notFound, "There is no such file.") }
        var response = try ui.asset(request, name: name)
        response.headers[.cacheControl] = "no-cache"
        return response
    }

    @Sendable func list(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let (page, unread) = try await PushSubscriptions.inbox(store, caller: caller, unreadOnly: false, limit: 100, offset: 0)
        let zone = caller.timeZone ?? TimeZone(identifier: "UTC")!
        let items: [[String: Any]] = page.records.map { record in
            [
                "sysID": record.sysID, "subject": record["subject"], "message": record["message"], "unread": record["read"] != "true",
                "when": GlideDateTime.parse(record["sys_created_on"]).map { GlideDateTime.format($0, in: zone) } ?? record["sys_created_on"],
            ]
        }
        let (rules, devices) = try await preferences(caller)
        return pages.page(
            "notifications",
            [
                "title": "Notifications", "items": items, "empty": items.isEmpty, "unread": unread, "anyUnread": unread > 0,
                "onNotifications": true, "live": ["table": "sys_notification", "query": ""], "rules": rules,
                "devices": devices.map { ["name": $0.name] }, "anyRules": !rules.isEmpty, "anyDevices": !devices.isEmpty,
                "saved": request.uri.queryParameters["saved"] != nil,
            ],
            context: context
        )
    }

    /// The active rules and, for each, whether it reaches the caller at all and on each of their devices.
    private func preferences(_ caller: Caller) async throws -> (rules: [[String: Any]], devices: [(id: String, name: String)]) {
        let rules = try await store.list(
            RecordQuery(table: "sysevent_email_action", query: try EncodedQuery("active=true^ORDERBYname"), fields: ["sys_id", "name"], limit: 200, count: false),
            caller: caller
        ).records
        let devices = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: PushSubscriptions.query([("user", caller.userID)]), fields: ["sys_id", "name", "kind"],
                limit: 50, count: false
            ),
            caller: caller
        ).records.map { (id: $0.sysID, name: $0["name"].isEmpty ? $0["kind"] : $0["name"]) }
        let muted = Set(try await store.list(
            RecordQuery(
                table: "sys_notification_preference", query: PushSubscriptions.query([("user", caller.userID), ("enabled", "false")]),
                fields: ["notification", "subscription"], limit: 2000, count: false
            ),
            caller: caller
        ).records.map { $0["notification"] + "/" + $0["subscription"] })
        let values: [[String: Any]] = rules.map { rule in
            [
                "sysID": rule.sysID, "name": rule["name"], "on": !muted.contains(rule.sysID + "/"),
                "devices": devices.map { device in
                    ["field": "device:\(rule.sysID):\(device.id)", "name": device.name, "on": !muted.contains(rule.sysID + "/" + device.id)]
                },
            ]
        }
        return (values, devices)
    }

    /// Saves what reaches the caller: every rule or rule-and-device not ticked is turned off, the rest on.
    @Sendable func savePreferences(_ request: Request, context: Context) async throws -> Response {
        let form = try await WebForm.read(request, context: context, sessions: sessions)
        let caller = try context.requireCaller()
        let (rules, devices) = try await preferences(caller)
        var wanted = Set<String>()
        for rule in rules {
            guard let id = rule["sysID"] as? String else { continue }
            if form["rule:\(id)"] == nil { wanted.insert(id + "/") }
            for device in devices where form["device:\(id):\(device.id)"] == nil { wanted.insert(id + "/" + device.id) }
        }
        let existing = try await store.list(
            RecordQuery(
                table: "sys_notification_preference", query: PushSubscriptions.query([("user", caller.userID)]),
                fields: ["sys_id", "notification", "subscription", "enabled"], limit: 2000, count: false
            ),
            caller: caller
        ).records
        var kept = Set<String>()
        for record in existing {
            let key = record["notification"] + "/" + record["subscription"]
            if wanted.contains(key), !kept.contains(key) {
                kept.insert(key)
                if record["enabled"] != "false" {
                    try await store.update(record.sysID, in: "sys_notification_preference", values: ["enabled": "false"], caller: caller)
                }
            } else {
                try await store.delete(record.sysID, from: "sys_notification_preference", caller: caller)
            }
        }
        for key in wanted.subtracting(kept) {
            let parts = key.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
            try await store.insert(into: "sys_notification_preference", values: [
                "user": caller.userID, "notification": parts[0], "subscription": parts.count > 1 ? parts[1] : "", "enabled": "false",
            ], caller: caller)
        }
        return WebAPI.redirect("/app/notifications?saved=1")
    }

    @Sendable func readAll(_ request: Request, context: Context) async throws -> Response {
        _ = try await WebForm.read(request, context: context, sessions: sessions)
        _ = try await PushSubscriptions.markRead(store, caller: try context.requireCaller())
        return WebAPI.redirect("/app/notifications")
    }

    /// Opening a notification marks it read and shows its item.
    @Sendable func open(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        let sysID = try context.parameters.require("sys_id")
        guard SysID.isValid(sysID) else { throw WebError(.notFound, "There is no such notification.") }
        let found = try await store.list(
            RecordQuery(
                table: "sys_notification", query: PushSubscriptions.query([("sys_id", sysID), ("user", caller.userID)]),
                fields: ["sys_id", "table_name", "document", "read"], limit: 1, count: false
            ),
            caller: caller
        ).records.first
        guard let found else { throw WebError(.notFound, "There is no such notification.") }
        if found["read"] != "true" { _ = try await PushSubscriptions.markRead(store, caller: caller, ids: [sysID]) }
        guard store.catalog.table(found["table_name"]) != nil, SysID.isValid(found["document"]) else { return WebAPI.redirect("/app/work") }
        return WebAPI.redirect("/app/item/\(found["table_name"])/\(found["document"])")
    }

    @Sendable func subscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try checked(request, context: context)
        let body = try await json(request, context: context)
        do {
            let (record, created) = try await subscriptions.register(body, caller: caller)
            return Response.json(.object(["sys_id": .string(record.sysID)]), status: created ? .created : .ok)
        } catch let invalid as PushSubscriptions.Invalid {
            throw WebError(.badRequest, [invalid.message, invalid.detail].compactMap { $0 }.joined(separator: ": "))
        }
    }

    /// Removes this browser's subscription (named by its endpoint, which the browser knows).
    @Sendable func unsubscribe(_ request: Request, context: Context) async throws -> Response {
        let caller = try checked(request, context: context)
        let body = try await json(request, context: context)
        guard let endpoint = body["endpoint"]?.stringValue, !endpoint.isEmpty, endpoint.utf8.count <= EndpointGuard.maximumLength else {
            throw WebError(.badRequest, "Name the subscription's endpoint.")
        }
        let mine = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: PushSubscriptions.query([("endpoint", endpoint), ("user", caller.userID)]),
                fields: ["sys_id"], limit: 10, count: false
            ),
            caller: caller
        ).records
        for record in mine { _ = try await subscriptions.remove(record.sysID, caller: caller) }
        return Response.json(.object(["removed": .integer(mine.count)]))
    }

    /// The caller of a JSON call from a page: signed in, and bearing the page's CSRF token.
    private func checked(_ request: Request, context: Context) throws -> Caller {
        let caller = try context.requireCaller()
        guard case .session(let session) = context.credential, let token = request.headers[HTTPField.Name("X-CSRF-Token")!],
            sessions.isValid(token, session: session)
        else { throw WebError.csrf }
        return caller
    }

    private func json(_ request: Request, context: Context) async throws -> JSONValue {
        guard (request.headers[.contentType] ?? "").lowercased().hasPrefix("application/json") else {
            throw WebError(.unsupportedMediaType, "Send JSON.")
        }
        let body = try await request.body.collect(upTo: 16 * 1024)
        do {
            return try JSONValue.parse(Array(body.readableBytesView))
        } catch {
            throw WebError(.badRequest, "The body is not valid JSON.")
        }
    }
}
