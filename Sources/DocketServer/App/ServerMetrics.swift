import Foundation
import Prometheus
import Synchronization

/// docketd's metrics, served as Prometheus's text format (`GET /metrics`, ``MetricsController``). Each
/// application has a registry of its own (tests build many in one process). Every metric is declared once here,
/// with its help text; values that are states rather than events (streams open, the event log's head, the
/// password queue) are read from their owners when the metrics are scraped.
final class ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let samplers = Mutex<[@Sendable (ServerMetrics) async -> Void]>([])

    /// The request instruments of each label set, found again without the registry's name checks.
    private struct RequestKey: Hashable {
        let dialect: String, route: String, method: String, status: Int
    }
    private let requestInstruments = Mutex<[RequestKey: (Counter, DurationHistogram)]>([:])
    /// The storage instruments of reads and writes: wait, hold, statement.
    private let storageInstruments: [String: (wait: DurationHistogram, held: DurationHistogram, statement: DurationHistogram)]
    private let fanoutInstruments: (time: DurationHistogram, deliveries: Counter)
    private let listPageCounters: [String: Counter]

    init() {
        let registry = PrometheusCollectorRegistry()
        self.registry = registry
        var storage: [String: (DurationHistogram, DurationHistogram, DurationHistogram)] = [:]
        for kind in ["read", "write"] {
            storage[kind] = (
                registry.makeDurationHistogram(descriptor: Name.storageWait, labels: [("kind", kind)], buckets: Self.storageBuckets),
                registry.makeDurationHistogram(descriptor: Name.storageTransaction, labels: [("kind", kind)], buckets: Self.storageBuckets),
                registry.makeDurationHistogram(descriptor: Name.statement, labels: [("kind", kind)], buckets: Self.storageBuckets)
            )
        }
        storageInstruments = storage
        listPageCounters = Dictionary(uniqueKeysWithValues: ["kept", "shared", "read"].map { outcome in
            (outcome, registry.makeCounter(descriptor: Name.listPages, labels: [("outcome", outcome)]))
        })
        fanoutInstruments = (
            registry.makeDurationHistogram(descriptor: Name.liveFanout, buckets: Self.storageBuckets),
            registry.makeCounter(descriptor: Name.liveFanoutDeliveries)
        )
    }

    /// Seconds: from a millisecond to a minute (long polls and slow reports).
    static let requestBuckets: [Duration] = [
        .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5),
        .seconds(10), .seconds(30), .seconds(60),
    ]
    /// Seconds: from 50 µs (a cached read) to 10 s.
    static let storageBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
        .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(10),
    ]

    /// Every metric's name and help text (descriptors are not Sendable, so each use makes one).
    enum Name {
        static var requests: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "http", metricName: "requests", unitName: "total",
                helpText: "HTTP requests answered, by dialect, route pattern, method and status."
            )
        }
        static var requestDuration: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "http", metricName: "request_duration", unitName: "seconds",
                helpText: "Time from a request's arrival to its response head, by dialect, route pattern and method."
            )
        }
        static var storageWait: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "storage", metricName: "wait", unitName: "seconds",
                helpText: "Time a read or a write waited for a database connection (and, for writes, the write lock)."
            )
        }
        static var storageTransaction: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "storage", metricName: "transaction", unitName: "seconds",
                helpText: "Time a read or a write held its database connection."
            )
        }
        static var statement: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "storage", metricName: "statement", unitName: "seconds",
                helpText: "Time of one SQL statement, from sending it to its last row, by read or write."
            )
        }
        static var storageFailures: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "storage", metricName: "unavailable", unitName: "total",
                helpText: "Reads and writes that failed because the database could not be used (answered 503)."
            )
        }
        static var eventHead: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "event_log", metricName: "head", unitName: "",
                helpText: "The newest sequence number of the event log that this process has published to its followers."
            )
        }
        static var eventLag: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "event_log", metricName: "lag", unitName: "",
                helpText: "Events other instances committed that this process has not yet published (0 on SQLite)."
            )
        }
        static var liveStreams: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "live", metricName: "streams_open", unitName: "",
                helpText: "Live event streams (SSE) and GraphQL subscriptions open."
            )
        }
        static var liveFanout: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "live", metricName: "fanout", unitName: "seconds",
                helpText: "Time a live group took to judge and render one change once and hand it to every member's socket."
            )
        }
        static var liveFanoutDeliveries: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "live", metricName: "fanout_deliveries", unitName: "total",
                helpText: "Results live groups handed to their members' sockets (one change to a group of n members counts n)."
            )
        }
        static var listPages: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "table", metricName: "list_pages", unitName: "total",
                helpText: "Table API list pages answered, by how: kept (served again unchanged), shared (another request's read at the same moment), read."
            )
        }
        static var followerLag: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "event_log", metricName: "follower_lag", unitName: "",
                helpText: "Events the furthest behind follower of each kind (live: streams, subscriptions and groups; notifier) has yet to take from the event log."
            )
        }
        static var liveFollowers: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "live", metricName: "followers", unitName: "",
                helpText: "Followers of the event log in this process (streams, subscriptions, socket groups, the notifier)."
            )
        }
        static var loginFailures: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "auth", metricName: "login_failures", unitName: "total",
                helpText: "Sign-ins refused for a wrong user name or password."
            )
        }
        static var loginThrottled: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "auth", metricName: "logins_throttled", unitName: "total",
                helpText: "Sign-ins refused without a password check because of earlier failures (429)."
            )
        }
        static var hashQueue: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "auth", metricName: "password_checks_in_flight", unitName: "",
                helpText: "bcrypt password checks and hashes running or waiting for a hashing thread."
            )
        }
        static var notifications: MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "docket", subsystem: "push", metricName: "deliveries", unitName: "total",
                helpText: "Push deliveries attempted, by channel and outcome (sent, failed, gone, retry)."
            )
        }
    }

    /// A request's answer.
    func request(dialect: String, route: String, method: String, status: Int, duration: Duration) {
        let key = RequestKey(dialect: dialect, route: route, method: method, status: status)
        let (counter, histogram) = requestInstruments.withLock { known in
            if let instruments = known[key] { return instruments }
            let instruments = (
                registry.makeCounter(
                    descriptor: Name.requests,
                    labels: [("dialect", dialect), ("route", route), ("method", method), ("status", String(status))]
                ),
                registry.makeDurationHistogram(
                    descriptor: Name.requestDuration, labels: [("dialect", dialect), ("route", route), ("method", method)],
                    buckets: Self.requestBuckets
                )
            )
            known[key] = instruments
            return instruments
        }
        counter.increment()
        histogram.record(duration)
    }

    /// A read's or a write's wait for its connection and the time it held it (`kind`: `read` or `write`).
    func storage(_ kind: String, waited: Duration, held: Duration) {
        guard let instruments = storageInstruments[kind] else { return }
        instruments.wait.record(waited)
        instruments.held.record(held)
    }

    func statement(_ kind: String, took duration: Duration) {
        storageInstruments[kind]?.statement.record(duration)
    }

    func storageUnavailable(_ kind: String) {
        registry.makeCounter(descriptor: Name.storageFailures, labels: [("kind", kind)]).increment()
    }

    func loginFailed() { registry.makeCounter(descriptor: Name.loginFailures).increment() }

    func loginThrottled() { registry.makeCounter(descriptor: Name.loginThrottled).increment() }

    func delivery(channel: String, outcome: String) {
        registry.makeCounter(descriptor: Name.notifications, labels: [("channel", channel), ("outcome", outcome)]).increment()
    }

    /// One change a live group judged, rendered and handed to `members` sockets (none when it concerned nobody).
    func fanout(took duration: Duration, members: Int) {
        fanoutInstruments.time.record(duration)
        fanoutInstruments.deliveries.increment(by: Int64(members))
    }

    /// A Table API list page answered: `kept`, `shared` or `read` (see ``ListPages``).
    func listPage(_ outcome: String) {
        listPageCounters[outcome]?.increment()
    }

    func set(_ name: MetricNameDescriptor, labels: [(String, String)] = [], _ value: Int) {
        let gauge = labels.isEmpty ? registry.makeGauge(descriptor: name) : registry.makeGauge(descriptor: name, labels: labels)
        gauge.set(Int64(value))
    }

    /// Adds a reading taken at every scrape.
    func sample(_ reading: @escaping @Sendable (ServerMetrics) async -> Void) {
        samplers.withLock { $0.append(reading) }
    }

    /// The text format (version 0.0.4), after taking the readings.
    func exposition() async -> [UInt8] {
        for reading in samplers.withLock({ $0 }) { await reading(self) }
        return registry.emitToBuffer()
    }

    /// The counters and histograms that exist before anything happened, so that a scrape of a new server
    /// already lists them (with zero) and alerts on their rate work from the start.
    func declareStartingMetrics() {
        for descriptor in [Name.loginFailures, Name.loginThrottled] { _ = registry.makeCounter(descriptor: descriptor) }
    }
}
