import DocketModel
import Foundation

/// A notification as a device receives it.
struct PushMessage: Sendable, Equatable {
    /// The `sys_notification` record: a device shows one notification per id, however often it arrives.
    var notification: String
    var subject: String
    var message: String
    var table: String
    var document: String

    /// The JSON a service worker or app reads (`id`, `title`, `body`, `table`, `sys_id`, `url`), at most `limit`
    /// bytes: a long message is shortened (on a character boundary, with an ellipsis) rather than refused.
    func payload(limit: Int) -> [UInt8] {
        func encode(_ body: String) -> [UInt8] {
            let members: [(String, JSONValue)] = [
                ("id", .string(notification)), ("title", .string(subject)), ("body", .string(body)), ("table", .string(table)),
                ("sys_id", .string(document)), ("url", .string("/app/item/\(table)/\(document)")),
            ]
            return JSONValue(members: members).serialized()
        }
        var body = message
        var encoded = encode(body)
        while encoded.count > limit, !body.isEmpty {
            let excess = encoded.count - limit
            body = String(body.dropLast(max(1, excess) + 1)) + "…"
            if body == "…" { body = "" }
            encoded = encode(body)
        }
        return encoded
    }
}

/// Where a delivery goes: one `sys_push_subscription`.
struct PushTarget: Sendable, Equatable {
    var subscription: String
    var kind: String
    var endpoint: String
    var p256dh: String
    var auth: String
    var token: String
}

/// What a push service answered.
enum PushOutcome: Sendable, Equatable {
    /// Accepted (2xx).
    case delivered
    /// The subscription is gone (404/410, an unusable endpoint or key): it is removed.
    case gone(status: Int)
    /// Try again later (429, 5xx, no answer), after `after` seconds when the service said so.
    case retry(status: Int, after: Int?)
    /// Refused for good (another 4xx).
    case failed(status: Int)
}

/// A way to a device: Web Push (and UnifiedPush, which is Web Push to another endpoint), APNs.
protocol PushChannel: Sendable {
    func send(_ message: PushMessage, to target: PushTarget) async -> PushOutcome
}

extension PushOutcome {
    /// Whether the push service answered at all (a timeout or a connection that failed is no answer).
    var isAnswer: Bool {
        switch self {
        case .retry(let status, _): status != 0
        case .gone(let status), .failed(let status): status != 0
        case .delivered: true
        }
    }
}
