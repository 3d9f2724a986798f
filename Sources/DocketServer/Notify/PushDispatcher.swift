import DocketModel
import Foundation
import Logging
import Synchronization

/// Sends the deliveries the notifier recorded (`docket_push_delivery`) as a pipeline, not in batches: a pool of
/// ``width`` senders takes due deliveries as slots free up, so a slow, hanging or failing endpoint holds one slot
/// for at most its send limit and never the deliveries to other endpoints. A host (host and port) that has answered
/// (a push service) takes at most ``perHost`` senders; hosts that have not answered yet (any address a user chose)
/// take at most ``unprovenPerHost`` each and ``unprovenShare`` together, so that endpoints that never answer cannot
/// hold the pool. A host that keeps failing is backed off as a whole (its deliveries wait in storage until it is
/// tried again). Outcomes are recorded as they come, whatever has accumulated in one
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
    /// Deliveries sent at once to one endpoint host that has answered before.
    let perHost: Int
    /// Deliveries sent at once to one host that has not answered yet, and to all such hosts together.
    let unprovenPerHost: Int
    let unprovenShare: Int
    /// Deliveries held in memory, waiting for a slot (the rest wait in storage).
    static let queueLimit = 4096
    /// Of those, at most this many for one host (its further deliveries stay in storage, in order); a host that
    /// makes no progress (left alone, or nothing answered for ``stalledAfter`` ms while sends wait on it) keeps a
    /// short backlog, the rest put off by ``stalledDelay`` ms.
    static let backlogPerHost = 512
    static let stalledAfter = 2000
    static let stalledDelay = 5000
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
        store: RecordStore, channels: [String: any PushChannel], width: Int = 64, perHost: Int = 48, sendLimit: Duration = .seconds(20),
        logger: Logger, metrics: ServerMetrics? = nil
    ) {
        self.metrics = metrics
        self.store = store
        self.channels = channels
        self.width = max(1, width)
        self.perHost = max(1, min(perHost, width))
        unprovenShare = max(1, min(self.width, max(2, self.width / 2)))
        unprovenPerHost = max(1, min(self.perHost, 4, unprovenShare / 2))
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

    /// ``stop()``, waiting at most `limit` for the sends in flight to be cancelled and what was answered to be
    /// recorded (at shutdown): true when it ended in time.
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
        /// Whether it was sent while its host had not answered yet (counted in ``unprovenShare``).
        var unproven = false
        var key: Key { Key(notification: due.notification, subscription: due.subscription) }
        /// Whether recording it makes the delivery due again later (a retry, a postponement).
        var changesWhenDue: Bool {
            switch outcome {
            case .deferred, .push(.retry): return true
            default: return false
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
        var key: Key { Key(notification: notification, subscription: subscription) }
        /// What one sender's concurrency and backoff are counted by: the endpoint's host and port (APNs: its
        /// gateway). Worked out once, when the delivery is read.
        let host: String

        init(notification: String, attempts: Int, message: PushMessage, subscription: String, target: PushTarget?, exists: Bool) {
            self.notification = notification
            self.attempts = attempts
            self.message = message
            self.subscription = subscription
            self.target = target
            self.exists = exists
            host = Self.host(of: target)
        }

        static func host(of target: PushTarget?) -> String {
            guard let target else { return "" }
            if target.kind == "apns" { return "apns" }
            guard let components = URLComponents(string: target.endpoint), let host = components.host?.lowercased() else { return "" }
            return host + ":" + String(components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443))
        }
    }

    /// What a host has shown: whether it ever answered, its failures in a row, how far its backoff has gone and until
    /// when it is left alone.
    struct HostHealth {
        var proven = false
        var failures = 0
        var level = 0
        var until = 0
    }

    /// The pipeline's state, owned by ``work(_:post:)`` alone.
    private struct Pipeline {
        var queue: [Due] = []
        var running: [Key: String] = [:]
        var runningPerHost: [String: Int] = [:]
        var unrecorded: [Answered] = []
        var recording: [Answered] = []
        var hosts: [String: HostHealth] = [:]
        /// Sends in flight to hosts that have not answered yet.
        var unprovenRunning = 0
        /// When each host last made progress: a send to it began while none was waiting on it, or it answered.
        var progress: [String: Int] = [:]
        /// Deliveries queued per host, and the hosts whose further due deliveries were left in storage for want of
        /// room (taken again once their backlog is half gone).
        var queuedPerHost: [String: Int] = [:]
        var refill: Set<String> = []

        mutating func enqueue(_ due: Due) {
            queue.append(due)
            queuedPerHost[due.host, default: 0] += 1
        }

        mutating func dequeue(at index: Int) -> Due {
            let due = queue.remove(at: index)
            if let count = queuedPerHost[due.host] { queuedPerHost[due.host] = count > 1 ? count - 1 : nil }
            return due
        }

        /// Whether sends wait on a host that has not answered for ``PushDispatcher/stalledAfter`` ms.
        func isStalled(_ host: String, now: Int) -> Bool {
            guard runningPerHost[host, default: 0] > 0, let since = progress[host] else { return false }
            return now - since > PushDispatcher.stalledAfter
        }

        /// Deliveries this dispatcher holds: never taken from storage again while held.
        var held: Set<Key> {
            var keys = Set(recording.map(\.key))
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
        // Whether the last look at storage filled its page: more may be due behind it.
        var more = false
        var nextDue: Int? = nil
        var recordAgainAt: Int? = nil
        var timer: (task: Task<Void, Never>, due: Int)? = nil
        var generation = 0
        await withDiscardingTaskGroup { group in
            while !Task.isCancelled {
                var now = NotifierLease.now()
                // A retry that is due now is looked for as soon as a slot can take it (not by a timer that would
                // fire again and again while every slot is busy).
                if let due = nextDue, due <= now {
                    needFetch = true
                    nextDue = nil
                }
                // More is taken while there are free slots that nothing queued can fill (a queued delivery whose
                // host is at its bound fills none), and while the queue has room.
                let startable = pipeline.queue.count { canStart($0.host, pipeline) }
                if needFetch, pipeline.running.count + startable < width, pipeline.queue.count < Self.queueLimit {
                    needFetch = false
                    do {
                        let taken = try await take(into: &pipeline, now: now)
                        nextDue = taken.next
                        // (A full page of what is held already or over its host's backlog brings nothing: the next
                        // look waits until the queue runs low, or a wake.)
                        more = taken.full && taken.added > 0
                        // A full page that brought something new: more may be due right behind it.
                        if taken.full && taken.added > 0 { needFetch = true }
                    } catch is CancellationError {
                        break
                    } catch {
                        if StorageUnavailable.classify(error) == nil {
                            logger.warning("Push deliveries could not be read; trying again", metadata: ["error": "\(error)"])
                        }
                        nextDue = NotifierLease.now() + 1000
                    }
                    now = NotifierLease.now()
                }
                startSends(&pipeline, group: &group, post: post, now: now)
                if pipeline.recording.isEmpty, !pipeline.unrecorded.isEmpty, (recordAgainAt ?? 0) <= now {
                    recordAgainAt = nil
                    let batch = pipeline.unrecorded
                    pipeline.unrecorded.removeAll(keepingCapacity: true)
                    pipeline.recording = batch
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
                    if answered.unproven { pipeline.unprovenRunning -= 1 }
                    if case .push(let outcome) = answered.outcome, outcome.isAnswer {
                        pipeline.progress[host] = NotifierLease.now()
                    }
                    if pipeline.runningPerHost[host] == nil { pipeline.progress.removeValue(forKey: host) }
                    judge(host: host, answered.outcome, in: &pipeline)
                    pipeline.unrecorded.append(answered)
                    // A slot is free: what is due behind the queue (the last page was full, the queue ran low, or this
                    // host's backlog, which left more of its deliveries in storage, is half gone) is taken as slots
                    // free up, not when the next wake or timer comes.
                    if more || pipeline.queue.count < width { needFetch = true }
                    if pipeline.refill.contains(host), pipeline.queuedPerHost[host, default: 0] < Self.backlogPerHost / 2 {
                        pipeline.refill.remove(host)
                        needFetch = true
                    }
                case .recorded(let batch, let failed):
                    pipeline.recording.removeAll()
                    if failed {
                        // Kept (still held, so they are not sent again) and written again a second from now.
                        pipeline.unrecorded.insert(contentsOf: batch, at: 0)
                        recordAgainAt = NotifierLease.now() + 1000
                    } else if batch.contains(where: \.changesWhenDue) {
                        // A retry or a postponement is due again later: look at storage afresh for when.
                        needFetch = true
                    }
                }
            }
            timer?.task.cancel()
            group.cancelAll()
        }
        // Outcomes already answered (and a record cut short by the stop) are recorded, even though the dispatcher
        // stops: in a task of its own, since this one is cancelled.
        let leftover = pipeline.recording + pipeline.unrecorded
        if !leftover.isEmpty {
            let recorded = Task { try await self.finish(leftover) }
            if case .failure(let error) = await recorded.result {
                logger.warning("Push outcomes could not be recorded at stop; they are sent again", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Whether a delivery to `host` may start now: the host is under its bound (a host that never answered has a
    /// smaller one, and such hosts together a share of the pool).
    private func canStart(_ host: String, _ pipeline: Pipeline) -> Bool {
        let proven = pipeline.hosts[host]?.proven ?? false
        let running = pipeline.runningPerHost[host, default: 0]
        return proven ? running < perHost : running < unprovenPerHost && pipeline.unprovenRunning < unprovenShare
    }

    /// Takes due deliveries from storage into the queue (those it holds excepted), at most ``backlogPerHost`` per
    /// host and ``queueLimit`` in all: the rest stay in storage, untouched, until there is room. Returns how many it
    /// added, whether the page was full, and when the first later delivery is due.
    private func take(into pipeline: inout Pipeline, now: Int) async throws -> (added: Int, full: Bool, next: Int?) {
        passCount.add(1, ordering: .relaxed)
        let held = pipeline.held
        let limit = Self.batchSize + held.count
        let rows = try await dueDeliveries(limit: limit)
        var next: Int? = nil
        var added = 0
        for (due, nextAttempt) in rows {
            if held.contains(due.key) { continue }
            if nextAttempt > now {
                next = nextAttempt
                break
            }
            let host = due.host
            let until = pipeline.hosts[host]?.until ?? 0
            guard !(until > now || pipeline.isStalled(host, now: now)) || pipeline.queuedPerHost[host, default: 0] < unprovenPerHost * 4 else {
                // A host that makes no progress (left alone, or its sends go unanswered): its deliveries past a short
                // backlog are put off a few seconds, so that they do not stand in front of everyone else's.
                pipeline.unrecorded.append(Answered(due: due, subscription: due.subscription, outcome: .deferred(until: max(until, now + Self.stalledDelay))))
                continue
            }
            guard pipeline.queuedPerHost[host, default: 0] < Self.backlogPerHost, pipeline.queue.count < Self.queueLimit else {
                pipeline.refill.insert(host)
                continue
            }
            pipeline.enqueue(due)
            added += 1
        }
        return (added, rows.count >= limit, next)
    }

    /// Starts the queue's sends while slots are free, in order, skipping hosts at their bound; a backed-off host's
    /// deliveries are put off until it is tried again.
    private func startSends(
        _ pipeline: inout Pipeline, group: inout DiscardingTaskGroup, post: AsyncStream<Event>.Continuation, now: Int
    ) {
        var index = 0
        var blocked: Set<String> = []
        while index < pipeline.queue.count, pipeline.running.count < width {
            let item = pipeline.queue[index]
            guard let target = item.target, let channel = channels[target.kind] else {
                // Nothing to send: a removed or deactivated subscription, or a kind this docketd does not send.
                _ = pipeline.dequeue(at: index)
                let outcome: PushOutcome = item.target == nil ? (item.exists ? .failed(status: 0) : .gone(status: 0)) : .failed(status: 0)
                pipeline.unrecorded.append(Answered(due: item, subscription: item.target?.subscription ?? item.subscription, outcome: .push(outcome)))
                continue
            }
            let host = item.host
            if let until = pipeline.hosts[host]?.until, until > now {
                _ = pipeline.dequeue(at: index)
                pipeline.unrecorded.append(Answered(due: item, subscription: target.subscription, outcome: .deferred(until: until)))
                continue
            }
            if blocked.contains(host) || !canStart(host, pipeline) {
                blocked.insert(host)
                index += 1
                continue
            }
            _ = pipeline.dequeue(at: index)
            let unproven = !(pipeline.hosts[host]?.proven ?? false)
            if pipeline.runningPerHost[host, default: 0] == 0 { pipeline.progress[host] = now }
            pipeline.running[item.key] = host
            pipeline.runningPerHost[host, default: 0] += 1
            if unproven { pipeline.unprovenRunning += 1 }
            let limit = sendLimit
            group.addTask {
                let outcome = await Self.send(item.message, to: target, through: channel, within: limit)
                post.yield(.sent(Answered(due: item, subscription: target.subscription, outcome: .push(outcome), unproven: unproven)))
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

    /// A host's health after an answer. No answer or a server error counts against it; after
    /// ``hostFailuresBeforeBackoff`` in a row it is left alone for 1 s, then 2, 4 … (at most five minutes) each time it
    /// fails so again after its wait. Failures of sends that were in flight while it was already left alone do not
    /// count again. Any other answer proves the host (it is a push service) and clears its backoff.
    private func judge(host: String, _ outcome: Outcome, in pipeline: inout Pipeline) {
        guard case .push(let answer) = outcome, !host.isEmpty else { return }
        let now = NotifierLease.now()
        var health = pipeline.hosts[host] ?? HostHealth()
        switch answer {
        case .retry(let status, _) where status == 0 || status >= 500:
            guard health.until <= now else { return }
            health.failures += 1
            if health.failures >= Self.hostFailuresBeforeBackoff {
                health.level += 1
                health.failures = 0
                health.until = now + min(300, 1 << min(9, health.level - 1)) * 1000
            }
        case .gone(let status) where status == 0:
            return
        default:
            health = HostHealth(proven: true)
        }
        pipeline.hosts[host] = health
        if pipeline.hosts.count > 10_000 {
            // Forget hosts that are neither known push services nor left alone now.
            pipeline.hosts = pipeline.hosts.filter { $0.value.proven || $0.value.until > now }
            if pipeline.hosts.count > 10_000 { pipeline.hosts = pipeline.hosts.filter { $0.value.until > now } }
        }
    }
}
