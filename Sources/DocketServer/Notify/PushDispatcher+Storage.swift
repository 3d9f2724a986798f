import DocketModel
import Foundation

/// The dispatcher's reads and writes of `docket_push_delivery`: what is due, and what became of what was sent.
extension PushDispatcher {
    /// Pending deliveries, soonest first (at most `limit`), each with when it is due.
    func dueDeliveries(limit: Int) async throws -> [(Due, Int)] {
        try await store.storage.read { db in
            let rows = try await db.rows(
                "SELECT d.notification AS notification, d.subscription AS subscription, d.attempts AS attempts, d.next_attempt AS next_attempt,"
                    + " n.subject AS subject, n.message AS message, n.table_name AS table_name, n.document AS document, s.sys_id AS target,"
                    + " s.kind AS kind, s.endpoint AS endpoint, s.p256dh AS p256dh, s.auth AS auth, s.token AS token, s.active AS active"
                    + " FROM docket_push_delivery AS d JOIN sys_notification AS n ON n.sys_id = d.notification"
                    + " LEFT JOIN sys_push_subscription AS s ON s.sys_id = d.subscription"
                    + " WHERE d.state = 'pending' ORDER BY d.next_attempt LIMIT " + .bind(limit)
            )
            var due: [(Due, Int)] = []
            for row in rows {
                func text(_ column: String) throws -> String { try row.value(at: column, kind: .text).text ?? "" }
                let subscription = try text("subscription")
                let active = (try row.value(at: "active", kind: .integer).intValue ?? 0) != 0
                let target = try text("target").isEmpty || !active ? nil : PushTarget(
                    subscription: subscription, kind: try text("kind"), endpoint: try text("endpoint"), p256dh: try text("p256dh"),
                    auth: try text("auth"), token: try text("token")
                )
                due.append((Due(
                    notification: try text("notification"), attempts: Int(try row.value(at: "attempts", kind: .integer).intValue ?? 0),
                    message: PushMessage(
                        notification: try text("notification"), subject: try text("subject"), message: try text("message"),
                        table: try text("table_name"), document: try text("document")
                    ),
                    subscription: subscription, target: target, exists: !(try text("target")).isEmpty
                ), Int(try row.value(at: "next_attempt", kind: .integer).intValue ?? 0)))
            }
            return due
        }
    }

    /// Records outcomes in one transaction; then removes the subscriptions found gone (as the system, so that their
    /// owners' pages learn of it).
    func finish(_ results: [Answered]) async throws {
        let now = NotifierLease.now()
        var gone: Set<String> = []
        try await store.storage.write { db in
            for answered in results {
                let due = answered.due
                let key: SQLFragment =
                    " WHERE notification = " + .bind(due.notification) + " AND subscription = " + .bind(answered.subscription)
                    + " AND state = 'pending'"
                let attempts = due.attempts + 1
                switch answered.outcome {
                case .deferred(let until):
                    try await db.run("UPDATE docket_push_delivery SET next_attempt = " + .bind(until) + key)
                case .push(.delivered):
                    try await db.run("UPDATE docket_push_delivery SET state = 'sent', attempts = " + .bind(attempts) + ", last_status = 201" + key)
                case .push(.gone(let status)):
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = 'gone', attempts = " + .bind(attempts) + ", last_status = " + .bind(status) + key
                    )
                case .push(.failed(let status)):
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = 'failed', attempts = " + .bind(attempts) + ", last_status = " + .bind(status) + key
                    )
                case .push(.retry(let status, let after)):
                    let state = attempts >= Self.maximumAttempts ? "failed" : "pending"
                    let next = now + Self.backoff(attempts: attempts, retryAfter: after)
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = " + .bind(state) + ", attempts = " + .bind(attempts) + ", last_status = "
                            + .bind(status) + ", next_attempt = " + .bind(next) + key
                    )
                }
            }
        }
        for answered in results {
            guard case .push(let outcome) = answered.outcome else { continue }
            if case .gone = outcome, !answered.subscription.isEmpty { gone.insert(answered.subscription) }
            let channel = answered.due.target?.kind ?? "none"
            switch outcome {
            case .delivered: metrics?.delivery(channel: channel, outcome: "sent")
            case .gone: metrics?.delivery(channel: channel, outcome: "gone")
            case .failed: metrics?.delivery(channel: channel, outcome: "failed")
            case .retry: metrics?.delivery(channel: channel, outcome: "retry")
            }
        }
        for subscription in gone {
            do {
                try await store.delete(subscription, from: "sys_push_subscription", caller: .system)
                logger.info("Removed a push subscription its push service no longer knows", metadata: ["subscription": "\(subscription)"])
            } catch let error as EngineError where error.code == .notFound {
                continue
            }
        }
    }

    /// Milliseconds before another attempt: 1, 2, 4 … seconds (at most an hour), a little jitter, and never
    /// sooner than the service's `Retry-After`.
    static func backoff(attempts: Int, retryAfter: Int?) -> Int {
        let seconds = min(3600, 1 << min(12, max(0, attempts - 1)))
        let jitter = Int.random(in: 0...max(1, seconds * 100))
        let asked = min(86_400, max(0, retryAfter ?? 0)) * 1000
        return max(seconds * 1000 + jitter, asked)
    }
}
