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

/// Sends the deliveries the notifier recorded (`docket_push_delivery`) as a pipeline, not in batches: a pool of
/// ``width`` senders takes due deliveries as slots free up, so a slow, hanging or failing endpoint holds one slot
/// for at most its send limit and never the deliveries to other endpoints. At most ``perHost`` sends go to one
/// endpoint host (host and port) at once, and a host that keeps failing is backed off as a whole (its deliveries
/// wait in storage until it is tried again). Outcomes are recorded as they come, whatever has accumulated in one
/// transaction while the previous one was written; retries back off (at least what `Retry-After` asked), give up
/// after ``maximumAttempts``, and a subscription its push service says is gone is removed. Runs only on the
/// instance that holds the notifier's lease. A delivery is recorded as sent after the push service accepted it: a
/// crash in between sends it again, and the device shows it once (the message's id); while docketd runs, a
/// delivery in flight or answered but not yet recorded is never taken again.
final class PushDispatcher: Sendable {
    let store: RecordStore
    let channels: [String: any PushChannel]
    let logger: Logger
    /// Deliveries sent at once.
    let width: Int
    /// Deliveries sent to one endpoint host at once.
    let perHost: Int
    /// The longest one send holds its slot (the channels' own timeouts are shorter; this bounds a channel that
    /// ignores its own).
    let sendLimit: Duration
    static let maximumAttempts = 12
    static let batchSize = 256
    /// Failed sends in a row after which a host is backed off as a whole.
    static let hostFailuresBeforeBackoff = 3

    private let state = Mutex<(task: Task<Void, Never>?, events: AsyncStream<Event>.Continuation?)>((nil, nil))
    private let wakePending = Atomic<Bool>(false)
    private let passCount = Atomic<Int>(0)

    /// Where deliveries are counted; nil counts nothing.
    let metrics: ServerMetrics?

    init(
        store: RecordStore, channels: [String: any PushChannel], width: Int = 64, perHost: Int = 32, sendLimit: Duration = .seconds(20),
        logger: Logger, metrics: ServerMetrics? = nil
    ) {
        self.metrics = metrics
        self.store = store
        self.channels = channels
        self.width = max(1, width)
        self.perHost = max(1, min(perHost, width))
        self.sendLimit = sendLimit
        self.logger = logger
    }

    /// How often the dispatcher has looked for due deliveries since it was made (an idle one looks every 30 s).
    var passes: Int { passCount.load(ordering: .relaxed) }

    /// Starts sending (when this instance becomes the notifier).
    func start() {
        state.withLock { state in
            guard state.task == nil else { return }
            let (events, continuation) = AsyncStream<Event>.makeStream()
            state.events = continuation
            wakePending.store(false, ordering: .relaxed)
            state.task = Task { await self.work(events, post: continuation) }
        }
    }

    /// Stops sending (another instance is the notifier, or the server stops): sends in flight are cancelled (they
    /// stay pending and are sent again by the next dispatcher), outcomes already answered are recorded.
    func stop() async {
        let task = state.withLock { state -> Task<Void, Never>? in
            defer { state = (nil, nil) }
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

    /// New deliveries were recorded. Wakes that come while one is pending are one.
    func wake() {
        guard !wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        _ = state.withLock { $0.events?.yield(.wake) }
    }

    /// What the sending pipeline hears about.
    enum Event: Sendable {
        /// New deliveries were recorded.
        case wake
        /// The timer of this generation ran out (a retry is due, or the periodic look).
        case tick(Int)
        /// A send ended.
        case sent(Answered)
        /// Outcomes were recorded (or not: they are kept and written again).
        case recorded([Answered], failed: Bool)
    }

    struct Key: Hashable, Sendable {
        var notification: String
        var subscription: String
    }

    /// What became of a delivery: its push service's answer, or put off without an attempt (its host is backed off
    /// or busy).
    enum Outcome: Sendable {
        case push(PushOutcome)
        case deferred(until: Int)
    }

    struct Answered: Sendable {
        var due: Due
        var subscription: String
        var outcome: Outcome
        var key: Key { Key(notification: due.notification, subscription: due.subscription) }
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
        var key: Key { Key(notification: notification, subscription: subscription) }
        /// What one sender's concurrency and backoff are counted by: the endpoint's host and port (APNs: its gateway).
        var host: String {
            guard let target else { return "" }
            if target.kind == "apns" { return "apns" }
            guard let components = URLComponents(string: target.endpoint), let host = components.host?.lowercased() else { return "" }
            return host + ":" + String(components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443))
        }
    }

    /// A host's recent failures, and until when it is left alone.
    struct HostHealth {
        var failures = 0
        var until = 0
    }

    /// The pipeline's state, owned by ``work(_:post:)`` alone.
    private struct Pipeline {
        var queue: [Due] = []
        var running: [Key: String] = [:]
        var runningPerHost: [String: Int] = [:]
        var unrecorded: [Answered] = []
        var recording: Set<Key> = []
        var hosts: [String: HostHealth] = [:]

        /// Deliveries this dispatcher holds: never taken from storage again while held.
        var held: Set<Key> {
            var keys = recording
            for item in queue { keys.insert(item.key) }
            for key in running.keys { keys.insert(key) }
            for answered in unrecorded { keys.insert(answered.key) }
            return keys
        }
    }

    private func work(_ events: AsyncStream<Event>, post: AsyncStream<Event>.Continuation) async {
        var pipeline = Pipeline()
        var iterator = events.makeAsyncIterator()
        var needFetch = true
        var more = false
        var nextDue: Int? = nil
        var recordAgainAt: Int? = nil
        var timer: (task: Task<Void, Never>, due: Int)? = nil
        var generation = 0
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                let now = NotifierLease.now()
                // More is taken while there are free slots that nothing queued can fill (a queued delivery whose
                // host is at its bound fills none).
                let startable = pipeline.queue.count { pipeline.runningPerHost[$0.host, default: 0] < perHost }
                if needFetch || more, pipeline.running.count + startable < width {
                    needFetch = false
                    do {
                        (more, nextDue) = try await take(into: &pipeline, now: now)
                    } catch is CancellationError {
                        break
                    } catch {
                        if StorageUnavailable.classify(error) == nil {
                            logger.warning("Push deliveries could not be read; trying again", metadata: ["error": "\(error)"])
                        }
                        more = false
                        nextDue = now + 1000
                    }
                }
                startSends(&pipeline, group: &group, post: post, now: NotifierLease.now())
                if pipeline.recording.isEmpty, !pipeline.unrecorded.isEmpty, (recordAgainAt ?? 0) <= now {
                    recordAgainAt = nil
                    let batch = pipeline.unrecorded
                    pipeline.unrecorded.removeAll(keepingCapacity: true)
                    pipeline.recording = Set(batch.map(\.key))
                    group.addTask {
                        do {
                            try await self.finish(batch)
                            post.yield(.recorded(batch, failed: false))
                        } catch {
                            if !(error is CancellationError) {
                                self.logger.warning("Push outcomes could not be recorded; trying again", metadata: ["error": "\(error)"])
                            }
                            post.yield(.recorded(batch, failed: true))
                        }
                    }
                }
                // The timer: the next retry due, a record to write again, or a look now and then (30 s).
                let wanted = [nextDue, recordAgainAt, now + 30_000].compactMap { $0 }.min()!
                if timer?.due != wanted {
                    timer?.task.cancel()
                    generation += 1
                    let (mine, wait) = (generation, max(5, min(30_000, wanted - now)))
                    timer = (Task {
                        do { try await Task.sleep(for: .milliseconds(wait)) } catch { return }
                        post.yield(.tick(mine))
                    }, wanted)
                }
                guard let event = await iterator.next() else { break }
                switch event {
                case .wake:
                    wakePending.store(false, ordering: .relaxed)
                    needFetch = true
                case .tick(let fired):
                    if fired == generation {
                        timer = nil
                        needFetch = true
                    }
                case .sent(let answered):
                    pipeline.running.removeValue(forKey: answered.key)
                    let host = answered.due.host
                    if let count = pipeline.runningPerHost[host] { pipeline.runningPerHost[host] = count > 1 ? count - 1 : nil }
                    judge(host: host, answered.outcome, in: &pipeline)
                    pipeline.unrecorded.append(answered)
                case .recorded(let batch, let failed):
                    pipeline.recording.removeAll()
                    if failed {
                        // Kept (still held, so they are not sent again) and written again a second from now.
                        pipeline.unrecorded.insert(contentsOf: batch, at: 0)
                        recordAgainAt = NotifierLease.now() + 1000
                    } else {
                        // What was recorded may be due again later: look at storage afresh.
                        needFetch = true
                    }
                }
            }
            timer?.task.cancel()
            group.cancelAll()
        }
        // Outcomes already answered are recorded, even though the dispatcher stops (not as part of its cancellation).
        let leftover = pipeline.unrecorded
        if !leftover.isEmpty {
            let recorded = Task { try await self.finish(leftover) }
            if case .failure(let error) = await recorded.result {
                logger.warning("Push outcomes could not be recorded at stop; they are sent again", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Takes due deliveries from storage into the queue (those it holds excepted), at most ``perHost`` twice over per
    /// host: more of a busy host's are put off a second, so that they do not stand in front of other hosts'. Returns
    /// whether more may be due, and when the first later one is.
    private func take(into pipeline: inout Pipeline, now: Int) async throws -> (more: Bool, next: Int?) {
        passCount.add(1, ordering: .relaxed)
        let held = pipeline.held
        let limit = Self.batchSize + held.count
        let rows = try await dueDeliveries(limit: limit)
        var queuedPerHost: [String: Int] = [:]
        for item in pipeline.queue { queuedPerHost[item.host, default: 0] += 1 }
        var next: Int? = nil
        var taken = 0
        for (due, nextAttempt) in rows {
            if held.contains(due.key) { continue }
            if nextAttempt > now {
                next = nextAttempt
                break
            }
            taken += 1
            let host = due.host
            if queuedPerHost[host, default: 0] >= perHost * 2 {
                pipeline.unrecorded.append(Answered(due: due, subscription: due.subscription, outcome: .deferred(until: now + 1000)))
                continue
            }
            queuedPerHost[host, default: 0] += 1
            pipeline.queue.append(due)
        }
        return (rows.count >= limit && next == nil && taken > 0, next)
    }

    /// Starts the queue's sends while slots are free, in order, skipping hosts at their bound; a backed-off host's
    /// deliveries are put off until it is tried again.
    private func startSends(
        _ pipeline: inout Pipeline, group: inout DiscardingTaskGroup, post: AsyncStream<Event>.Continuation, now: Int
    ) {
        var index = 0
        while index < pipeline.queue.count, pipeline.running.count < width {
            let item = pipeline.queue[index]
            guard let target = item.target, let channel = channels[target.kind] else {
                // Nothing to send: a removed or deactivated subscription, or a kind this docketd does not send.
                pipeline.queue.remove(at: index)
                let outcome: PushOutcome = item.target == nil ? (item.exists ? .failed(status: 0) : .gone(status: 0)) : .failed(status: 0)
                pipeline.unrecorded.append(Answered(due: item, subscription: item.target?.subscription ?? item.subscription, outcome: .push(outcome)))
                continue
            }
            let host = item.host
            if let until = pipeline.hosts[host]?.until, until > now {
                pipeline.queue.remove(at: index)
                pipeline.unrecorded.append(Answered(due: item, subscription: target.subscription, outcome: .deferred(until: until)))
                continue
            }
            if pipeline.runningPerHost[host, default: 0] >= perHost {
                index += 1
                continue
            }
            pipeline.queue.remove(at: index)
            pipeline.running[item.key] = host
            pipeline.runningPerHost[host, default: 0] += 1
            let limit = sendLimit
            group.addTask {
                let outcome = await Self.send(item.message, to: target, through: channel, within: limit)
                post.yield(.sent(Answered(due: item, subscription: target.subscription, outcome: .push(outcome))))
            }
        }
    }

    /// One send, which frees its slot after `limit` even when the channel has not answered by then (it is then
    /// tried again later).
    static func send(_ message: PushMessage, to target: PushTarget, through channel: any PushChannel, within limit: Duration) async -> PushOutcome {
        let sending = Task { await channel.send(message, to: target) }
        guard let outcome = await value(of: sending, within: limit, cancellable: true) else {
            sending.cancel()
            return .retry(status: 0, after: nil)
        }
        return outcome
    }

    /// A host's health after an answer: no answer or a server error counts against it, and after
    /// ``hostFailuresBeforeBackoff`` in a row it is left alone for 1, 2, 4 … seconds (at most five minutes); any
    /// answer of the service about the delivery itself clears it.
    private func judge(host: String, _ outcome: Outcome, in pipeline: inout Pipeline) {
        guard case .push(let answer) = outcome, !host.isEmpty else { return }
        switch answer {
        case .retry(let status, _) where status == 0 || status >= 500:
            var health = pipeline.hosts[host] ?? HostHealth()
            health.failures += 1
            if health.failures >= Self.hostFailuresBeforeBackoff {
                let seconds = min(300, 1 << min(9, health.failures - Self.hostFailuresBeforeBackoff))
                health.until = NotifierLease.now() + seconds * 1000
            }
            pipeline.hosts[host] = health
            if pipeline.hosts.count > 10_000 {
                let now = NotifierLease.now()
                pipeline.hosts = pipeline.hosts.filter { $0.value.until > now }
            }
        case .gone(let status) where status == 0:
            return
        default:
            pipeline.hosts.removeValue(forKey: host)
        }
    }

    /// Pending deliveries, soonest first (at most `limit`), each with when it is due.
    private func dueDeliveries(limit: Int) async throws -> [(Due, Int)] {
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
    private func finish(_ results: [Answered]) async throws {
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
