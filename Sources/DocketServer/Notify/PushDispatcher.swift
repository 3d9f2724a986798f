import DocketModel
import Foundation
import Logging
import Synchronization

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

/// Sends the deliveries the notifier recorded (`docket_push_delivery`): due ones in batches, many at once, each
/// through its channel; records what happened in one transaction per batch; retries with backoff (at least what
/// `Retry-After` asked), gives up after ``maximumAttempts``, and removes a subscription its push service says is
/// gone. Runs only on the instance that holds the notifier's lease. A delivery is recorded as sent after the push
/// service accepted it: a crash in between sends it again, and the device shows it once (the message's id).
final class PushDispatcher: Sendable {
    let store: RecordStore
    let channels: [String: any PushChannel]
    let logger: Logger
    /// Deliveries sent at once.
    let width: Int
    static let maximumAttempts = 12
    static let batchSize = 256

    private let state = Mutex<(task: Task<Void, Never>?, wake: AsyncStream<Void>.Continuation?)>((nil, nil))

    /// Where deliveries are counted; nil counts nothing.
    let metrics: ServerMetrics?

    init(store: RecordStore, channels: [String: any PushChannel], width: Int = 64, logger: Logger, metrics: ServerMetrics? = nil) {
        self.metrics = metrics
        self.store = store
        self.channels = channels
        self.width = max(1, width)
        self.logger = logger
    }

    /// Starts sending (when this instance becomes the notifier).
    func start() {
        state.withLock { state in
            guard state.task == nil else { return }
            let (wakes, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
            state.wake = continuation
            state.task = Task { await self.work(wakes) }
        }
    }

    /// Stops sending (another instance is the notifier, or the server stops); waits for the batch in flight.
    func stop() async {
        let task = state.withLock { state -> Task<Void, Never>? in
            defer { state = (nil, nil) }
            state.wake?.finish()
            state.task?.cancel()
            return state.task
        }
        await task?.value
    }

    /// ``stop()``, waiting at most `limit` for the batch in flight (at shutdown): true when it ended in time.
    func stop(within limit: Duration) async -> Bool {
        let stopping = Task { await self.stop() }
        return await finished(stopping, within: limit)
    }

    /// New deliveries were recorded.
    func wake() {
        _ = state.withLock { $0.wake?.yield() }
    }

    private func work(_ wakes: AsyncStream<Void>) async {
        var iterator = wakes.makeAsyncIterator()
        while !Task.isCancelled {
            do {
                let (due, next) = try await dueDeliveries()
                if due.isEmpty {
                    // Sleep until woken or the next retry is due (and look again now and then regardless).
                    let wait = min(30_000, max(10, (next ?? Int.max / 2) - NotifierLease.now()))
                    let timer = Task { [weak self] in
                        try? await Task.sleep(for: .milliseconds(wait))
                        self?.wake()
                    }
                    let woken: Void? = await iterator.next()
                    timer.cancel()
                    if woken == nil { return }
                    continue
                }
                try await send(due)
            } catch is CancellationError {
                return
            } catch {
                logger.warning("Push deliveries paused after an error; retrying", metadata: ["error": "\(error)"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    struct Due: Sendable {
        var notification: String
        var attempts: Int
        var message: PushMessage
        /// The subscription's sys_id (kept when the subscription itself is gone or inactive).
        var subscription: String
        /// Where to send; nil when the subscription was removed or deactivated.
        var target: PushTarget?
        /// Whether the subscription still exists (deactivated by its owner: nothing is sent, it is not removed).
        var exists: Bool
    }

    /// Deliveries due now (oldest first), and when the next later one is due.
    private func dueDeliveries() async throws -> ([Due], Int?) {
        let now = NotifierLease.now()
        return try await store.storage.read { db in
            let rows = try await db.rows(
                "SELECT d.notification AS notification, d.subscription AS subscription, d.attempts AS attempts, n.subject AS subject,"
                    + " n.message AS message, n.table_name AS table_name, n.document AS document, s.sys_id AS target, s.kind AS kind,"
                    + " s.endpoint AS endpoint, s.p256dh AS p256dh, s.auth AS auth, s.token AS token, s.active AS active"
                    + " FROM docket_push_delivery AS d JOIN sys_notification AS n ON n.sys_id = d.notification"
                    + " LEFT JOIN sys_push_subscription AS s ON s.sys_id = d.subscription"
                    + " WHERE d.state = 'pending' AND d.next_attempt <= " + .bind(now) + " ORDER BY d.next_attempt LIMIT " + .bind(Self.batchSize)
            )
            var due: [Due] = []
            for row in rows {
                func text(_ column: String) throws -> String { try row.value(at: column, kind: .text).text ?? "" }
                let subscription = try text("subscription")
                let active = (try row.value(at: "active", kind: .integer).intValue ?? 0) != 0
                let target = try text("target").isEmpty || !active ? nil : PushTarget(
                    subscription: subscription, kind: try text("kind"), endpoint: try text("endpoint"), p256dh: try text("p256dh"),
                    auth: try text("auth"), token: try text("token")
                )
                due.append(Due(
                    notification: try text("notification"), attempts: Int(try row.value(at: "attempts", kind: .integer).intValue ?? 0),
                    message: PushMessage(
                        notification: try text("notification"), subject: try text("subject"), message: try text("message"),
                        table: try text("table_name"), document: try text("document")
                    ),
                    subscription: subscription, target: target, exists: !(try text("target")).isEmpty
                ))
            }
            let next = try await db.rows("SELECT MIN(next_attempt) AS next FROM docket_push_delivery WHERE state = 'pending'")
                .first?.value(at: "next", kind: .integer).intValue.map { Int($0) }
            return (due, next)
        }
    }

    /// Deliveries whose outcomes are recorded together: a crash repeats at most ``width`` sends in flight and this
    /// many answered but not yet recorded.
    static let recordEvery = 16

    /// Sends a batch, at most ``width`` at a time, recording outcomes as they come (every ``recordEvery``).
    private func send(_ due: [Due]) async throws {
        try await withThrowingTaskGroup(of: (Due, String, PushOutcome).self) { group in
            var answered: [(Due, String, PushOutcome)] = []
            var index = 0
            func add(_ item: Due) {
                group.addTask {
                    guard let target = item.target else { return (item, item.subscription, item.exists ? .failed(status: 0) : .gone(status: 0)) }
                    guard let channel = self.channels[target.kind] else { return (item, target.subscription, .failed(status: 0)) }
                    return (item, target.subscription, await channel.send(item.message, to: target))
                }
            }
            while index < due.count, index < width {
                add(due[index])
                index += 1
            }
            while let result = try await group.next() {
                answered.append(result)
                if answered.count >= Self.recordEvery {
                    try await finish(answered)
                    answered.removeAll(keepingCapacity: true)
                }
                if index < due.count {
                    add(due[index])
                    index += 1
                }
            }
            if !answered.isEmpty { try await finish(answered) }
        }
    }

    /// Records a batch's outcomes in one transaction; then removes the subscriptions found gone (as the system, so
    /// that their owners' pages learn of it).
    private func finish(_ results: [(Due, String, PushOutcome)]) async throws {
        let now = NotifierLease.now()
        var gone: Set<String> = []
        try await store.storage.write { db in
            for (due, subscription, outcome) in results {
                let key: SQLFragment = " WHERE notification = " + .bind(due.notification) + " AND subscription = " + .bind(subscription)
                let attempts = due.attempts + 1
                switch outcome {
                case .delivered:
                    try await db.run("UPDATE docket_push_delivery SET state = 'sent', attempts = " + .bind(attempts) + ", last_status = 201" + key)
                case .gone(let status):
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = 'gone', attempts = " + .bind(attempts) + ", last_status = " + .bind(status) + key
                    )
                case .failed(let status):
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = 'failed', attempts = " + .bind(attempts) + ", last_status = " + .bind(status) + key
                    )
                case .retry(let status, let after):
                    let state = attempts >= Self.maximumAttempts ? "failed" : "pending"
                    let next = now + Self.backoff(attempts: attempts, retryAfter: after)
                    try await db.run(
                        "UPDATE docket_push_delivery SET state = " + .bind(state) + ", attempts = " + .bind(attempts) + ", last_status = "
                            + .bind(status) + ", next_attempt = " + .bind(next) + key
                    )
                }
            }
        }
        for (due, subscription, outcome) in results {
            if case .gone = outcome, !subscription.isEmpty { gone.insert(subscription) }
            let channel = due.target?.kind ?? "none"
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
