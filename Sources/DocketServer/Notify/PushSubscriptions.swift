import Crypto
import DocketModel
import Foundation

/// Registering and removing a user's devices (`sys_push_subscription`), for every way in (the API, the web UI).
struct PushSubscriptions: Sendable {
    /// Why a registration is refused: a message and a detail, which each dialect words its own way.
    struct Invalid: Error, Equatable {
        let message: String
        let detail: String?
        init(_ message: String, detail: String? = nil) {
            self.message = message
            self.detail = detail
        }
    }

    let store: RecordStore
    let endpoints: EndpointGuard
    /// Checks that a UnifiedPush endpoint is one (`GET` answers `{"unifiedpush":{"version":1}}`); nil skips it.
    var unifiedPushProbe: (@Sendable (EndpointGuard.Checked) async -> Bool)?
    /// Whether APNs tokens are taken (docketd was given an APNs key).
    var acceptsAPNs = false

    /// The fields a registration answers with.
    static let fields = ["sys_id", "kind", "name", "endpoint", "token", "active", "sys_created_on"]

    /// Registers a device of `caller` from a JSON body: a Web Push subscription as `PushManager` gives it
    /// (`{"endpoint", "keys": {"p256dh", "auth"}}`), a UnifiedPush endpoint (the same with `"kind": "unifiedpush"`), or
    /// an APNs device (`{"kind": "apns", "token": HEX}`); `"name"` labels it. Returns the stored subscription and
    /// whether it is new. The same endpoint or token again is the same device (its sys_id follows from the user and
    /// it, so that two registrations at once make one record); one that another user registered becomes this one's.
    func register(_ body: JSONValue, caller: Caller) async throws -> (record: Record, created: Bool) {
        guard body.objectValue != nil else { throw Invalid("The body must be a JSON object") }
        guard let kind = body["kind"].map({ $0.stringValue }) ?? "webpush" else { throw Invalid("kind must be a string") }
        if let name = body["name"], name.stringValue == nil, name != .null { throw Invalid("name must be a string") }
        var values: [String: String] = [
            "kind": kind, "name": String((body["name"]?.stringValue ?? "").prefix(100)), "active": "true", "user": caller.userID,
        ]
        let identity: (field: String, value: String)
        switch kind {
        case "webpush", "unifiedpush":
            guard let endpoint = body["endpoint"]?.stringValue, !endpoint.isEmpty else {
                throw Invalid("A subscription needs an endpoint", detail: "{\"endpoint\": URL, \"keys\": {\"p256dh\", \"auth\"}}")
            }
            let p256dh = body["keys"]?["p256dh"]?.stringValue ?? ""
            let auth = body["keys"]?["auth"]?.stringValue ?? ""
            do {
                _ = try WebPush.SubscriptionKeys(p256dh: p256dh, auth: auth)
            } catch {
                throw Invalid("The subscription's keys cannot be used", detail: error.description)
            }
            let checked: EndpointGuard.Checked
            do {
                checked = try await endpoints.pin(endpoint)
            } catch {
                throw Invalid("The endpoint is not accepted", detail: error.description)
            }
            if kind == "unifiedpush", let probe = unifiedPushProbe, await !probe(checked) {
                throw Invalid(
                    "The endpoint is not a UnifiedPush endpoint", detail: "A GET on it must answer {\"unifiedpush\":{\"version\":1}}"
                )
            }
            values["endpoint"] = endpoint
            values["p256dh"] = p256dh
            values["auth"] = auth
            identity = ("endpoint", endpoint)
        case "apns":
            guard acceptsAPNs else {
                throw Invalid("This docketd does not send to Apple's push service", detail: "Its administrator starts it with --apns-key-file, --apns-key-id, --apns-team-id and --apns-topic")
            }
            let token = (body["token"]?.stringValue ?? "").lowercased()
            guard (64...200).contains(token.count), token.count % 2 == 0, token.allSatisfy(\.isHexDigit) else {
                throw Invalid("An APNs device token is 64 to 200 hexadecimal digits")
            }
            values["token"] = token
            identity = ("token", token)
        default:
            throw Invalid("Unknown kind \(kind.prefix(40))", detail: "webpush, unifiedpush or apns")
        }
        let digest = SHA256.hash(data: Array((caller.userID + "\u{0}" + identity.field + "\u{0}" + identity.value).utf8))
        let sysID = String(digest.map { String(format: "%02x", $0) }.joined().prefix(32))
        var created = true
        do {
            values["sys_id"] = sysID
            try await store.insert(into: "sys_push_subscription", values: values, caller: .system)
        } catch let error as EngineError where error.code == .badRequest {
            // Registered before (or by a request a moment ago): the same device of the same user, updated.
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
            created = false
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
        return (try await store.get(sysID, in: "sys_push_subscription", fields: Self.fields, caller: caller).record, created)
    }

    /// Removes one of the caller's own devices (also for an admin: another user's go through the Table API);
    /// false when the caller has no such device.
    func remove(_ sysID: String, caller: Caller) async throws -> Bool {
        guard SysID.isValid(sysID) else { return false }
        let own = try await store.list(
            RecordQuery(
                table: "sys_push_subscription", query: Self.query([("sys_id", sysID), ("user", caller.userID)]), fields: ["sys_id"],
                limit: 1, count: false
            ),
            caller: caller
        )
        guard !own.records.isEmpty else { return false }
        do {
            try await store.delete(sysID, from: "sys_push_subscription", caller: caller)
        } catch let error as EngineError where error.code == .notFound {
            return false
        }
        return true
    }

    /// Equality conditions, ANDed; newest first when asked.
    static func query(_ conditions: [(String, String)], newestFirst: Bool = false) -> EncodedQuery {
        EncodedQuery(
            all: conditions.map { QueryCondition($0.0, .equals, $0.1) },
            orderBy: newestFirst ? [OrderTerm("sys_created_on", descending: true), OrderTerm("event", descending: true)] : []
        )
    }

    /// A user's notifications, newest first, and how many are unread.
    static func inbox(
        _ store: RecordStore, caller: Caller, unreadOnly: Bool, limit: Int, offset: Int
    ) async throws -> (page: RecordPage, unread: Int) {
        var conditions = [("user", caller.userID)]
        if unreadOnly { conditions.append(("read", "false")) }
        let page = try await store.list(
            RecordQuery(
                table: "sys_notification", query: query(conditions, newestFirst: true),
                fields: ["sys_id", "subject", "message", "table_name", "document", "read", "sys_created_on"], limit: limit, offset: offset,
                count: true
            ),
            caller: caller
        )
        return (page, try await unreadCount(store, caller: caller))
    }

    static func unreadCount(_ store: RecordStore, caller: Caller) async throws -> Int {
        try await store.list(
            RecordQuery(
                table: "sys_notification", query: query([("user", caller.userID), ("read", "false")]), fields: ["sys_id"], limit: 1,
                count: true
            ),
            caller: caller
        ).total ?? 0
    }

    /// Marks notifications of the caller read (all unread ones when `ids` is nil, at most 1,000 at a time); returns
    /// how many changed.
    static func markRead(_ store: RecordStore, caller: Caller, ids: [String]? = nil) async throws -> Int {
        var conditions = [("user", caller.userID), ("read", "false")]
        if let ids, ids.count == 1 { conditions.append(("sys_id", ids[0])) }
        let unread = try await store.list(
            RecordQuery(table: "sys_notification", query: query(conditions), fields: ["sys_id"], limit: 1000, count: false),
            caller: caller
        ).records.filter { ids == nil || ids?.contains($0.sysID) == true }
        for record in unread {
            try await store.update(record.sysID, in: "sys_notification", values: ["read": "true"], caller: caller)
        }
        return unread.count
    }
}
