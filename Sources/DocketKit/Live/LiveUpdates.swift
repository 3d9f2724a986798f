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

/// Live changes to records, as an `AsyncSequence` that does not end by itself: it follows docketd's event log
/// over Server-Sent Events (`/api/docket/events`, the default) or a GraphQL WebSocket (Docket's subscriptions on
/// `/api/now/graphql`), reconnects with back-off and jitter when the connection drops or the instance restarts,
/// and resumes after the last sequence it delivered, so that nothing is missed and nothing is delivered twice. A
/// stream whose session or token ended logs in again with the session's credentials.
///
/// It throws a ``DocketError``: ``DocketError/Kind/resyncNeeded`` when the instance's event log no longer reaches
/// back to where it would resume (read the current state again, then follow from now),
/// ``DocketError/Kind/loginExpired`` when a saved login ended, and ``DocketError/Kind/http`` or
/// ``DocketError/Kind/invalidRequest`` for a subscription the instance refuses (an unknown table, a bad query).
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

    /// How changes reach the client.
    public struct Transport: Sendable {
        enum Kind: Sendable {
            case serverSentEvents
            case webSocket(any WebSocketConnector)
        }

        let kind: Kind

        /// Server-Sent Events from `/api/docket/events`: plain HTTP, through any proxy; any table or none.
        public static let serverSentEvents = Transport(kind: .serverSentEvents)
        /// A GraphQL WebSocket (`graphql-transport-ws`) to `/api/now/graphql`, with the platform's connector
        /// (``WebSocketConnectors/platform``). Follows one table, whose fields it learns from the schema.
        public static var webSocket: Transport { Transport(kind: .webSocket(WebSocketConnectors.platform)) }
        /// A GraphQL WebSocket opened by `connector`.
        public static func webSocket(using connector: any WebSocketConnector) -> Transport {
            Transport(kind: .webSocket(connector))
        }
    }

    let session: DocketSession
    let table: String?
    let query: String?
    let since: Int?
    let policy: ReconnectPolicy
    let transport: Transport

    /// Follows changes through `session`: to records of `table` (and tables extending it) matching `query` (an
    /// encoded query), or (over Server-Sent Events) to every record the user may read without a table. From after
    /// `since`, or from now.
    public init(
        session: DocketSession, table: String? = nil, query: String? = nil, since: Int? = nil,
        reconnect policy: ReconnectPolicy = ReconnectPolicy(), transport: Transport = .serverSentEvents
    ) {
        self.session = session
        self.table = table
        self.query = query
        self.since = since
        self.policy = policy
        self.transport = transport
    }

    public func makeAsyncIterator() -> Iterator { Iterator(updates: self, position: since) }

    public struct Iterator: AsyncIteratorProtocol {
        let updates: LiveUpdates
        /// The sequence after which the stream continues: the last change delivered, or where the stream
        /// started when nothing was delivered yet.
        public private(set) var position: Int?
        private var source: (any LiveSource)?
        private var queue: [RecordChange] = []
        private var failures = 0
        /// The followed table's fields (WebSocket: learnt once from the schema).
        private var fields: [String]?

        init(updates: LiveUpdates, position: Int?) {
            self.updates = updates
            self.position = position
        }

        public mutating func next() async throws -> RecordChange? {
            while true {
                try Task.checkCancellation()
                if !queue.isEmpty { return queue.removeFirst() }
                if source == nil {
                    if failures > 0 { try await Task.sleep(for: delay()) }
                    do {
                        source = try await connect()
                    } catch let error as DocketError where Self.isTransient(error) {
                        failures += 1
                        continue
                    }
                }
                do {
                    guard let event = try await source?.next() else {
                        // The server ended the stream (a restart, a proxy): come back.
                        await source?.close()
                        source = nil
                        failures += 1
                        continue
                    }
                    switch event {
                    case .ready(let start):
                        failures = 0
                        if position == nil { position = start }
                    case .change(let change):
                        if let position, change.sequence <= position { continue }
                        queue.append(change)
                        position = change.sequence
                    case .resync(let oldest):
                        await source?.close()
                        throw DocketError(
                            kind: .resyncNeeded,
                            message: "the instance's event log no longer reaches back to sequence \(position ?? 0): read the current state again",
                            detail: oldest.map { "oldest available: \($0)" }
                        )
                    case .revoked:
                        // The session or token behind the stream ended: log in again (or fail with loginExpired)
                        // and resume.
                        await source?.close()
                        await updates.session.dropLogin()
                        source = nil
                        failures += 1
                    }
                } catch let error as DocketError {
                    throw error
                } catch is CancellationError {
                    await source?.close()
                    throw CancellationError()
                } catch {
                    await source?.close()
                    source = nil
                    failures += 1
                }
            }
        }

        private mutating func connect() async throws -> any LiveSource {
            switch updates.transport.kind {
            case .serverSentEvents:
                return try await EventStreamSource.open(updates, after: position)
            case .webSocket(let connector):
                guard let table = updates.table else {
                    throw DocketError(kind: .invalidRequest, message: "live updates over a WebSocket follow one table: give a table")
                }
                if fields == nil { fields = try await GraphQLSocketSource.fields(of: table, session: updates.session) }
                var start = position
                if start == nil { start = try await EventStreamSource.latestSequence(updates) }
                return try await GraphQLSocketSource.open(
                    updates, table: table, fields: fields ?? [], after: start ?? 0, connector: connector
                )
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

/// What a live source tells ``LiveUpdates``.
enum LiveSourceEvent: Sendable {
    /// Following started after this sequence.
    case ready(Int)
    case change(RecordChange)
    /// The log no longer reaches back; the oldest sequence still available, when known.
    case resync(Int?)
    /// The credential ended.
    case revoked
}

/// One connection of a live transport.
protocol LiveSource: AnyObject {
    /// The next event; nil when the server ended the stream.
    func next() async throws -> LiveSourceEvent?
    func close() async
}

/// Server-Sent Events from `/api/docket/events`.
final class EventStreamSource: LiveSource {
    private var chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator
    private var parser = ServerSentEventParser()
    private var pending: [ServerSentEvent] = []

    private init(chunks: AsyncThrowingStream<Data, any Error>.AsyncIterator) { self.chunks = chunks }

    static func open(_ updates: LiveUpdates, after position: Int?) async throws -> EventStreamSource {
        var query: [(String, String)] = []
        if let table = updates.table { query.append(("table", table)) }
        if let text = updates.query, !text.isEmpty { query.append(("query", text)) }
        var headers = ["Accept": "text/event-stream"]
        if let position { headers["Last-Event-ID"] = String(position) }
        let response = try await updates.session.stream("/api/docket/events", query: query, headers: headers)
        return EventStreamSource(chunks: response.chunks.makeAsyncIterator())
    }

    /// The newest sequence of the instance's event log (where following from now starts).
    static func latestSequence(_ updates: LiveUpdates) async throws -> Int {
        let response = try await updates.session.send("GET", "/api/docket/events", query: [("follow", "false")])
        var parser = ServerSentEventParser()
        guard let ready = parser.feed(response.body).first(where: { $0.event == "ready" }), let id = ready.id.flatMap({ Int($0) })
        else {
            throw DocketError(kind: .decoding, message: "the instance did not say where its event log stands")
        }
        return id
    }

    func next() async throws -> LiveSourceEvent? {
        while true {
            while !pending.isEmpty {
                let event = pending.removeFirst()
                switch event.event {
                case nil, "message":
                    return .change(try RecordChange(json: try JSONValue.parse(Array(event.data.utf8))))
                case "ready":
                    guard let start = event.id.flatMap({ Int($0) }) else { continue }
                    return .ready(start)
                case "resync":
                    return .resync((try? JSONValue.parse(Array(event.data.utf8)))?["oldest_available"]?.intValue)
                case "revoked":
                    return .revoked
                default:
                    continue
                }
            }
            guard let chunk = try await chunks.next() else { return nil }
            pending = parser.feed(chunk)
        }
    }

    func close() async {}
}

/// What changed in the instance's event log after a sequence (``DocketClient/changes(since:table:)``).
public enum ChangesSince: Sendable, Equatable {
    /// The changes the caller may see, in order, and the sequence they reach (the next `since`).
    case changes([RecordChange], through: Int)
    /// The log no longer reaches back that far (or too much changed): read again what is kept, then go on from
    /// `oldest` (the log's oldest sequence, when the server said it).
    case resync(oldest: Int?)
}

extension DocketClient {
    /// Every change after `since` that the caller may see (of `table`, when given), read at once without following
    /// (`/api/docket/events?follow=false`): how an offline copy catches up. `since: nil` asks only where the log
    /// stands (no changes).
    public func changes(since: Int?, table: String? = nil) async throws -> ChangesSince {
        var query: [(String, String)] = [("follow", "false")]
        if let since { query.append(("since", String(since))) }
        if let table { query.append(("table", table)) }
        let response = try await session.send("GET", "/api/docket/events", query: query, headers: ["Accept": "text/event-stream"])
        var parser = ServerSentEventParser()
        var changes: [RecordChange] = []
        var through = since
        for event in parser.feed(response.body) {
            switch event.event {
            case "ready":
                if through == nil { through = event.id.flatMap { Int($0) } }
            case nil, "message":
                let change = try RecordChange(json: try JSONValue.parse(Array(event.data.utf8)))
                changes.append(change)
                through = change.sequence
            case "end":
                if let id = event.id.flatMap({ Int($0) }) { through = max(through ?? id, id) }
            case "resync":
                return .resync(oldest: (try? JSONValue.parse(Array(event.data.utf8)))?["oldest_available"]?.intValue)
            case "unavailable":
                throw DocketError(kind: .http, status: 503, message: "the instance's database is unavailable", retryAfter: 2)
            default:
                continue
            }
        }
        guard let through else {
            throw DocketError(kind: .decoding, message: "the instance did not say where its event log stands")
        }
        return .changes(changes, through: through)
    }

    /// Live changes to records (see ``LiveUpdates``).
    public func liveUpdates(
        table: String? = nil, query: String? = nil, since: Int? = nil, transport: LiveUpdates.Transport = .serverSentEvents
    ) -> LiveUpdates {
        LiveUpdates(session: session, table: table, query: query, since: since, transport: transport)
    }
}
