import DocketModel
import Foundation

/// A change to a record, as a live subscriber sees it (docketd's `/api/docket/events`).
public struct RecordChange: Sendable, Equatable {
    /// How the change moved the record relative to what is followed (a table, a query, the caller's access).
    public enum Kind: String, Sendable {
        /// Created matching, or changed so that it now matches (a task assigned to me).
        case entered
        /// Matched before and after.
        case changed
        /// Matched before, no longer does (a task reassigned away from me, or closed when following active ones).
        case left
        /// Deleted while matching.
        case deleted
    }

    /// The event log's sequence number: resume after it to miss nothing.
    public var sequence: Int
    public var kind: Kind
    /// `insert`, `update` or `delete`.
    public var operation: String
    /// The record's class (`incident`, also when following `task`).
    public var table: String
    public var sysID: String
    /// The fields the change wrote.
    public var fields: [String]
    /// Who made the change (user name).
    public var user: String
    /// When it committed (`yyyy-MM-dd HH:mm:ss`, UTC).
    public var time: String
    /// The record after the change (entered, changed) or before it (left, deleted): stored values, not display
    /// values.
    public var record: [String: String]
    /// For `changed`, what the changed fields held before.
    public var previous: [String: String]

    /// A field of ``record``, or "".
    public subscript(field: String) -> String { record[field] ?? "" }

    init(json: JSONValue) throws {
        func text(_ key: String) -> String { json[key]?.stringValue ?? "" }
        func row(_ key: String) -> [String: String] {
            (json[key]?.objectValue ?? [:]).reduce(into: [:]) { $0[$1.key] = $1.value.stringValue ?? "" }
        }
        guard let sequence = json["sequence"]?.intValue, let kind = Kind(rawValue: text("change")) else {
            throw DocketError(kind: .decoding, message: "a live change without a sequence or a known kind")
        }
        self.sequence = sequence
        self.kind = kind
        operation = text("operation")
        table = text("table")
        sysID = text("sys_id")
        fields = json["fields"]?.arrayValue?.compactMap(\.stringValue) ?? []
        user = text("user")
        time = text("time")
        record = row("record")
        previous = row("previous")
    }
}

/// Live changes to records, as an `AsyncSequence` that does not end by itself: it follows docketd's event
/// stream (Server-Sent Events at `/api/docket/events`), reconnects with back-off and jitter when the connection
/// drops or the instance restarts, and resumes after the last sequence it delivered, so that nothing is missed
/// and nothing is delivered twice. A stream whose session ended logs in again with the session's credentials.
///
/// It throws a ``DocketError``: ``DocketError/Kind/resyncNeeded`` when the instance's event log no longer reaches
/// back to where it would resume (read the current state again, then follow from now),
/// ``DocketError/Kind/loginExpired`` when a saved login ended, and ``DocketError/Kind/http`` for a request the
/// instance refuses (an unknown table, a bad query).
///
/// ```swift
/// for try await change in client.liveUpdates(table: "incident", query: "active=true") {
///     print(change.kind, change["number"], "by", change.user)
/// }
/// ```
public struct LiveUpdates: AsyncSequence, Sendable {
    public typealias Element = RecordChange

    /// How reconnection waits.
    public struct ReconnectPolicy: Sendable {
        /// The first wait after a failure.
        public var initialDelay: Duration
        /// The longest wait.
        public var maximumDelay: Duration

        /// Creates a policy; each further failure doubles the wait, and each wait is shortened by up to half at
        /// random, so that many clients do not come back at once.
        public init(initialDelay: Duration = .milliseconds(500), maximumDelay: Duration = .seconds(30)) {
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
        }
    }

    let session: DocketSession
    let table: String?
    let query: String?
    let since: Int?
    let policy: ReconnectPolicy

    /// Follows changes through `session`: to records of `table` (and tables extending it) matching `query` (an
    /// encoded query), or to every record the user may read without a table. From after `since`, or from now.
    public init(
        session: DocketSession, table: String? = nil, query: String? = nil, since: Int? = nil,
        reconnect policy: ReconnectPolicy = ReconnectPolicy()
    ) {
        self.session = session
        self.table = table
        self.query = query
        self.since = since
        self.policy = policy
    }

    public func makeAsyncIterator() -> Iterator { Iterator(updates: self, position: since) }

    public struct Iterator: AsyncIteratorProtocol {
        let updates: LiveUpdates
        /// The sequence after which the stream continues: the last change delivered, or where the stream
        /// started when nothing was delivered yet.
        public private(set) var position: Int?
        private var chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator?
        private var parser = ServerSentEventParser()
        private var queue: [RecordChange] = []
        private var failures = 0

        init(updates: LiveUpdates, position: Int?) {
            self.updates = updates
            self.position = position
        }

        public mutating func next() async throws -> RecordChange? {
            while true {
                try Task.checkCancellation()
                if !queue.isEmpty { return queue.removeFirst() }
                if chunks == nil {
                    if failures > 0 { try await Task.sleep(for: delay()) }
                    do {
                        try await connect()
                    } catch let error as DocketError where Self.isTransient(error) {
                        failures += 1
                        continue
                    }
                }
                do {
                    guard let chunk = try await chunks?.next() else {
                        // The server ended the stream (a restart, a proxy): come back.
                        chunks = nil
                        failures += 1
                        continue
                    }
                    for event in parser.feed(chunk) { try await handle(event) }
                } catch let error as DocketError {
                    throw error
                } catch is CancellationError {
                    throw CancellationError()
                } catch {
                    chunks = nil
                    failures += 1
                }
            }
        }

        private mutating func connect() async throws {
            var query: [(String, String)] = []
            if let table = updates.table { query.append(("table", table)) }
            if let text = updates.query, !text.isEmpty { query.append(("query", text)) }
            var headers = ["Accept": "text/event-stream"]
            if let position { headers["Last-Event-ID"] = String(position) }
            let response = try await updates.session.stream("/api/docket/events", query: query, headers: headers)
            chunks = response.chunks.makeAsyncIterator()
            parser = ServerSentEventParser()
        }

        private mutating func handle(_ event: ServerSentEvent) async throws {
            switch event.event {
            case nil, "message":
                let change = try RecordChange(json: try JSONValue.parse(Array(event.data.utf8)))
                if let position, change.sequence <= position { return }
                queue.append(change)
                position = change.sequence
            case "ready":
                failures = 0
                if position == nil, let start = event.id.flatMap({ Int($0) }) { position = start }
            case "resync":
                let detail = (try? JSONValue.parse(Array(event.data.utf8)))?["oldest_available"]?.intValue
                throw DocketError(
                    kind: .resyncNeeded,
                    message: "the instance's event log no longer reaches back to sequence \(position ?? 0): read the current state again",
                    detail: detail.map { "oldest available: \($0)" }
                )
            case "revoked":
                // The session behind the stream ended: log in again (or fail with loginExpired) and resume.
                await updates.session.dropLogin()
                chunks = nil
            default:
                return
            }
        }

        private func delay() -> Duration {
            let initial = Double(updates.policy.initialDelay.components.seconds)
                + Double(updates.policy.initialDelay.components.attoseconds) / 1e18
            let maximum = Double(updates.policy.maximumDelay.components.seconds)
            let base = Swift.min(maximum, initial * Double(1 << Swift.min(failures - 1, 16)))
            return .milliseconds(Int(base * Double.random(in: 0.5...1.0) * 1000))
        }

        /// Failures worth waiting out: no connection, the instance restarting or busy.
        private static func isTransient(_ error: DocketError) -> Bool {
            if error.kind == .transport { return true }
            guard error.kind == .http, let status = error.status else { return false }
            return status == 429 || status >= 500
        }
    }
}

extension DocketClient {
    /// Live changes to records (see ``LiveUpdates``).
    public func liveUpdates(table: String? = nil, query: String? = nil, since: Int? = nil) -> LiveUpdates {
        LiveUpdates(session: session, table: table, query: query, since: since)
    }
}
