import DocketModel
import Foundation

/// A device or browser that receives a user's notifications while the app is closed.
///
/// ```swift
/// // In the app delegate, with the token APNs gave:
/// let id = try await client.notifications.register(.apns(deviceToken: token, name: UIDevice.current.name))
/// ```
public enum PushRegistration: Sendable, Equatable {
    /// A Web Push subscription as a browser's `PushManager` gives it: its endpoint and keys (base64url).
    case webPush(endpoint: String, p256dh: String, auth: String, name: String? = nil)
    /// A UnifiedPush endpoint from a distributor (ntfy and others), with the keys the connector made.
    case unifiedPush(endpoint: String, p256dh: String, auth: String, name: String? = nil)
    /// An APNs device token, the 32 bytes `didRegisterForRemoteNotificationsWithDeviceToken` gives (sent as hex).
    case apns(deviceToken: Data, name: String? = nil)

    /// The registration as `POST /api/docket/push/subscriptions` takes it.
    var body: JSONValue {
        switch self {
        case .webPush(let endpoint, let p256dh, let auth, let name), .unifiedPush(let endpoint, let p256dh, let auth, let name):
            var members: [(String, JSONValue)] = [
                ("endpoint", .string(endpoint)), ("keys", JSONValue(members: [("p256dh", .string(p256dh)), ("auth", .string(auth))])),
            ]
            if case .unifiedPush = self { members.insert(("kind", .string("unifiedpush")), at: 0) }
            if let name { members.append(("name", .string(name))) }
            return JSONValue(members: members)
        case .apns(let token, let name):
            // Hex, byte by byte: `NSData.description` stopped giving bare hex in iOS 13.
            var members: [(String, JSONValue)] = [("kind", .string("apns")), ("token", .string(token.map { String(format: "%02x", $0) }.joined()))]
            if let name { members.append(("name", .string(name))) }
            return JSONValue(members: members)
        }
    }
}

/// One notification a user received.
public struct DocketNotification: Sendable, Equatable {
    public var sysID: String
    public var subject: String
    public var message: String
    /// The record it is about: its table and sys_id.
    public var table: String
    public var document: String
    public var read: Bool
    /// When it was made (UTC `YYYY-MM-DD HH:MM:SS`).
    public var created: String
}

/// A user's notifications and the devices they reach (docketd's `/api/docket/notifications` and
/// `/api/docket/push/…`).
///
/// ```swift
/// let (items, unread) = try await client.notifications.list(unreadOnly: true)
/// try await client.notifications.markRead()
/// ```
public struct NotificationService: Sendable {
    let session: DocketSession

    /// The server's VAPID public key (base64url), the `applicationServerKey` a Web Push or UnifiedPush subscription
    /// is made with.
    public func vapidPublicKey() async throws -> String {
        let response = try await session.send("GET", "/api/docket/push/vapid")
        guard let key = try TableService.parse(response)["result"]?["public_key"]?.stringValue else {
            throw DocketError(kind: .decoding, message: "the instance gave no VAPID key")
        }
        return key
    }

    /// Registers a device of the signed-in user; returns its sys_id (the same for the same device registered again).
    @discardableResult
    public func register(_ registration: PushRegistration) async throws -> String {
        let response = try await session.send("POST", "/api/docket/push/subscriptions", body: Data(registration.body.serialized()))
        guard let id = try TableService.parse(response)["result"]?["sys_id"]?.stringValue else {
            throw DocketError(kind: .decoding, message: "the instance did not say which subscription it stored")
        }
        return id
    }

    /// Removes one of the user's devices.
    public func unregister(_ sysID: String) async throws {
        _ = try await session.send("DELETE", "/api/docket/push/subscriptions/" + (sysID.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""))
    }

    /// The user's notifications, newest first, and how many are unread in all.
    public func list(unreadOnly: Bool = false, limit: Int = 50) async throws -> (items: [DocketNotification], unread: Int) {
        var query = [("sysparm_limit", String(max(1, min(limit, 1000))))]
        if unreadOnly { query.append(("unread", "true")) }
        let response = try await session.send("GET", "/api/docket/notifications", query: query)
        let items = (try TableService.parse(response)["result"]?.arrayValue ?? []).map { item in
            DocketNotification(
                sysID: item["sys_id"]?.stringValue ?? "", subject: item["subject"]?.stringValue ?? "", message: item["message"]?.stringValue ?? "",
                table: item["table_name"]?.stringValue ?? "", document: item["document"]?.stringValue ?? "",
                read: item["read"]?.stringValue == "true", created: item["sys_created_on"]?.stringValue ?? ""
            )
        }
        return (items, Int(response.header("X-Unread-Count") ?? "") ?? items.filter { !$0.read }.count)
    }

    /// Marks notifications read: all unread ones, or those named; returns how many changed.
    @discardableResult
    public func markRead(_ sysIDs: [String]? = nil) async throws -> Int {
        let body = sysIDs.map { JSONValue(members: [("sys_ids", .array($0.map { .string($0) }))]) } ?? .object([:])
        let response = try await session.send("POST", "/api/docket/notifications/read", body: Data(body.serialized()))
        return try TableService.parse(response)["result"]?["marked_read"]?.intValue ?? 0
    }
}

/// A notification rule and whether it reaches the user: at all, and on which devices not.
public struct NotificationRuleChoice: Sendable, Equatable {
    public var sysID: String
    public var name: String
    /// Whether the rule tells the user at all.
    public var enabled: Bool
    /// The devices (subscription sys_ids) the rule's pushes do not go to.
    public var mutedDevices: [String]
}

extension NotificationService {
    /// The active rules and what the user chose for each (`sys_notification_preference`).
    public func preferences() async throws -> [NotificationRuleChoice] {
        let table = TableService(session: session)
        let rules = try await table.records(
            in: "sysevent_email_action", query: try EncodedQuery("active=true^ORDERBYname"), fields: ["sys_id", "name"], limit: 500
        ).records
        let choices = try await table.records(
            in: "sys_notification_preference", query: try EncodedQuery("enabled=false"), fields: ["notification", "subscription"], limit: 2000
        ).records
        return rules.map { rule in
            let mine = choices.filter { $0["notification"] == rule.sysID }
            return NotificationRuleChoice(
                sysID: rule.sysID, name: rule["name"] ?? "", enabled: !mine.contains { ($0["subscription"] ?? "").isEmpty },
                mutedDevices: mine.compactMap { $0["subscription"] }.filter { !$0.isEmpty }
            )
        }
    }

    /// Turns a rule on or off for the user: altogether, or on one device (a subscription's sys_id).
    public func setEnabled(_ enabled: Bool, rule: String, device: String? = nil) async throws {
        let table = TableService(session: session)
        let query = try EncodedQuery(
            "notification=\(rule)^" + (device.map { "subscription=\($0)" } ?? "subscriptionISEMPTY")
        )
        let existing = try await table.records(in: "sys_notification_preference", query: query, fields: ["sys_id"], limit: 10).records
        if enabled {
            for record in existing { try await table.deleteRecord(record.sysID, in: "sys_notification_preference") }
        } else if let first = existing.first {
            _ = try await table.updateRecord(first.sysID, in: "sys_notification_preference", with: ["enabled": "false"])
        } else {
            _ = try await table.createRecord(
                with: ["notification": rule, "subscription": device ?? "", "enabled": "false"], in: "sys_notification_preference"
            )
        }
    }
}

extension DocketClient {
    /// Notifications and push devices (docketd).
    public var notifications: NotificationService { NotificationService(session: session) }
}
