import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTPTypes
import ServiceLifecycle
import Synchronization

/// Live changes as Server-Sent Events: `GET /api/docket/events?table=T&query=Q&since=SEQ`.
///
/// Docket's own API (ServiceNow has no such feed). It sits under `/api/`, so it takes every authentication the
/// Table API takes and answers errors before the stream starts in the same envelope. The stream:
/// - `event: ready` first, its `id:` the sequence the stream starts after (a client that reconnects with it as
///   `Last-Event-ID` misses nothing);
/// - one unnamed event per change, `id:` its sequence, `data:` a JSON object (`sequence`, `change` =
///   entered/changed/left/deleted, `operation`, `table`, `sys_id`, `fields`, `user`, `user_display` (the user's
///   full name), `time`, `record`, and `previous` for a change);
/// - `: heartbeat` comments, each after a check that the session or token still holds;
/// - `event: resync` when the log no longer reaches back to where the client asked to resume, or more changes came
///   since than one stream may replay (`--live-replay-max-events`), and
///   `event: revoked` when its credentials ended: both end the stream;
/// - `event: unavailable` when the database cannot be used: the stream ends, and the client reconnects after
///   `retry` with `Last-Event-ID`, missing nothing.
///
/// Resuming: `Last-Event-ID` (what `EventSource` sends on reconnect) wins over `since`; with neither, the
/// stream starts with what commits from now on. With `follow=false` the stream replays what was committed
/// when the request arrived and ends with `event: end` (its `id:` where to continue): a poll, for scripts.
///
/// Streams that start from now on an HTTP/1 connection, without the caller's notifications, ride a ``LiveGroups``
/// group with every other such stream of the same table and query whose caller sees alike: each change is judged and
/// written out once for them all, and written onto each connection by its event loop (``EventStreamBody``). The
/// others (resuming, polls, the web UI's streams with notifications, HTTP/2) follow the log on their own; a rider
/// that cannot keep up, or whose caller changed, goes on alone from where the group left it.
struct EventStreamController {
    typealias Context = DocketRequestContext

    let store: RecordStore
    let credentials: CredentialCheck
    /// Shared with the GraphQL sockets' subscriptions.
    let streams: LiveStreamLimit
    /// Shared with the GraphQL sockets' subscriptions; nil: every stream follows the log on its own.
    var groups: LiveGroups? = nil
    let messages = MessageCache()
    let names = UserNames()

    var endpoints: RouteCollection<Context> {
        let routes = RouteCollection(context: Context.self)
        routes.get("events", use: events)
        return routes
    }

    @Sendable func events(_ request: Request, context: Context) async throws -> Response {
        let caller = try context.requireCaller()
        guard let credential = context.credential else {
            throw ServiceNowError.badRequest("Live events cannot be requested inside a batch request")
        }
        var table: SchemaCatalog.Table? = nil
        var query = EncodedQuery()
        var since: Int? = nil
        var follow = true
        var inbox = false
        for (name, value) in request.uri.queryParameters {
            switch name {
            case "table":
                guard !value.isEmpty else { continue }
                table = try store.table(String(value))
            case "query", "sysparm_query":
                do {
                    query = query.and(try EncodedQuery(String(value)))
                } catch {
                    throw ServiceNowError.badRequest("Invalid encoded query", detail: error.message)
                }
            case "since":
                since = try Self.sequence(String(value), name: "since")
            case "notifications":
                switch value.lowercased() {
                case "true": inbox = true
                case "false", "": inbox = false
                default: throw ServiceNowError.badRequest("Invalid notifications", detail: "notifications is true or false")
                }
            case "follow":
                switch value.lowercased() {
                case "true", "": follow = true
                case "false": follow = false
                default: throw ServiceNowError.badRequest("Invalid follow", detail: "follow is true or false")
                }
            default: continue
            }
        }
        if !query.groups.isEmpty || !query.orderBy.isEmpty {
            guard let table else { throw ServiceNowError.badRequest("A query needs a table", detail: "Add table=<name>") }
            // The query is compiled (and refused when it cannot be) before the stream starts.
            _ = try await store.list(
                RecordQuery(table: table.name, query: query, fields: ["sys_id"], limit: 0, count: false), caller: caller
            )
        }
        if let lastEventID = request.headers[.lastEventID], !lastEventID.isEmpty {
            since = try Self.sequence(lastEventID, name: "Last-Event-ID")
        }
        let shareable = since == nil && follow && !inbox
        let latest = try await store.latestSequence()
        let start = since ?? latest
        let until = follow ? nil : latest
        // Cache-Control (no-cache, no-store) comes with every /api/ answer.
        var headers: HTTPFields = [.contentType: "text/event-stream; charset=utf-8"]
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        if request.method == .head { return Response(status: .ok, headers: headers) }
        // With the caller's notifications: how many are unread comes with `ready`, each new one as `notification`.
        let unread = inbox ? try await PushSubscriptions.unreadCount(store, caller: caller) : nil
        try reserveStream(for: caller.userID)
        let live = {
            var live = LiveQuery(table: table, query: query, caller: caller)
            live.followsInbox = inbox
            return live
        }()
        let stream = self
        let channel = context.channel
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { stream.releaseStream(for: caller.userID) }
                try await stream.run(
                    live, after: start, until: until, unread: unread, shareable: shareable, credential: credential, channel: channel,
                    writer: &writer
                )
            }
        )
    }

    /// Writes the stream until the client leaves, its credentials end or it must resync.
    private func run(
        _ live: LiveQuery, after start: Int, until: Int?, unread: Int?, shareable: Bool, credential: PresentedCredential,
        channel: any Channel, writer: inout any ResponseBodyWriter
    ) async throws {
        try await writer.write(Self.buffer(
            "retry: 2000\nevent: ready\nid: \(start)\ndata: {\"sequence\":\(start)" + (unread.map { ",\"unread\":\($0)" } ?? "") + "}\n\n"
        ))
        var after = start
        var checkFirst = false
        if shareable, let groups {
            switch await ride(groups, live, after: start, credential: credential, channel: channel) {
            case .alone(let position)?:
                // It left its group (congested, its caller changed, the group failed): on alone from where it was,
                // its credential looked at again first.
                (after, checkFirst) = (position, true)
            case .revoked?:
                try await writer.write(Self.buffer(Self.revoked))
                try await writer.finish(nil)
                return
            case .ended?, .cancelled?:
                // The server is shutting down (its client reconnects and resumes), or the client left.
                try await writer.finish(nil)
                return
            case nil:
                break
            }
        }
        var iterator = store.subscribe(live, after: after).makeAsyncIterator()
        let (broadcaster, token) = (store.broadcaster, iterator.followToken)
        // A client that left (a page closed or put in the back/forward cache) ends its stream at once, releasing
        // its place under the per-user limit, instead of at the next heartbeat that cannot be written.
        let forget = await channel.whenClientLeaves { broadcaster.stop(token) }
        defer { forget() }
        // At shutdown the stream ends (its client reconnects and resumes), instead of holding the shutdown open.
        do {
            try await withGracefulShutdownHandler {
                try await follow(&iterator, until: until, credential: credential, checkFirst: checkFirst, writer: &writer)
            } onGracefulShutdown: {
                broadcaster.stop(token)
            }
        } catch EventLogError.resyncNeeded(let oldest) {
            try await writer.write(Self.buffer(
                "event: resync\ndata: {\"oldest_available\":\(oldest),\"reason\":\"The event log cannot replay from the requested sequence (it no longer reaches back, or too many changes came since); read the current state again and follow from oldest_available\"}\n\n"
            ))
        } catch let error where error is LoginFailure || StorageUnavailable.classify(error) != nil {
            // The database is unavailable: the stream ends and its client reconnects (EventSource after `retry`),
            // resuming after the last id it saw, so nothing is missed.
            try await writer.write(Self.buffer(
                "event: unavailable\ndata: {\"retry_after\":\(StorageUnavailable.retryAfterSeconds),\"reason\":\"The database is unavailable; reconnect with Last-Event-ID to resume\"}\n\n"
            ))
        }
        try await writer.finish(nil)
    }

    /// Writes changes and heartbeats until the client leaves, the credentials end or following stops.
    private func follow(
        _ iterator: inout LiveChanges.Iterator, until: Int?, credential: PresentedCredential, checkFirst: Bool,
        writer: inout any ResponseBodyWriter
    ) async throws {
        var watch = credentials.watch()
        if checkFirst { watch.checkedAt = (-1, -1) }
        while let update = try await iterator.nextUpdate(until: until) {
            // No change reaches a subscriber whose credentials ended, and roles changed since are applied.
            let judgedAs = iterator.live.caller
            var isTick = false
            if case .tick = update { isTick = true }
            let caller = try await watch.caller(judgedAs, credential: credential, force: isTick)
            guard let caller else {
                try await writer.write(Self.buffer(Self.revoked))
                return
            }
            iterator.live.caller = caller
            switch update {
            case .tick:
                try await writer.write(Self.buffer(": heartbeat\n\n"))
            case .change(let change) where change.event.table == "sys_notification" && iterator.live.followsInbox
                && iterator.live.table?.name != "sys_notification":
                try await writer.write(Self.buffer(Self.notification(change.event)))
            case .change(var change):
                if caller != judgedAs {
                    guard let rejudged = try await store.change(change.event, for: iterator.live) else { continue }
                    change = rejudged
                }
                try await writer.write(messages.message(for: change, userDisplay: try await names.fullName(of: change.event.userName, store: store)))
            }
        }
        if let until, iterator.position >= until {
            let position = iterator.position
            try await writer.write(Self.buffer("event: end\nid: \(position)\ndata: {\"sequence\":\(position)}\n\n"))
        }
    }

    /// Rides the group of the streams that see `live` alike, when the connection is one the group can write to
    /// (HTTP/1, as docketd serves it), until the ride ends; nil when it is not.
    private func ride(
        _ groups: LiveGroups, _ live: LiveQuery, after start: Int, credential: PresentedCredential, channel: any Channel
    ) async -> LiveGroups.Exit? {
        guard let body = await EventStreamBody(channel) else { return nil }
        let (names, store) = (names, store)
        var subscription = LiveSubscription(live: live, after: start) { change, _ in
            Array(Self.message(change, userDisplay: try await names.fullName(of: change.event.userName, store: store)).utf8)
        }
        subscription.shareable = "sse"
        guard let key = subscription.groupKey(in: store) else { return nil }
        var rider = LiveGroups.Rider(
            caller: live.caller, credential: credential, after: start, checkedAt: credentials.watch().checkedAt,
            eventLoop: channel.eventLoop
        ) { result in body.write(result.message("sse") { ByteBuffer(bytes: $0) }) }
        // Its client was told it starts at `start`: it must see every change after it.
        rider.exact = true
        let heartbeat = Self.buffer(": heartbeat\n\n")
        rider.beat = { body.write(heartbeat) }
        let riding = Task { await groups.ride(key: key, subscription: subscription, rider: rider) }
        // A client that left ends its ride at once (as it ends a stream that follows alone).
        let forget = await channel.whenClientLeaves { riding.cancel() }
        defer { forget() }
        return await withTaskCancellationHandler { await riding.value } onCancel: { riding.cancel() }
    }

    static let revoked = "event: revoked\ndata: {\"reason\":\"The session or token of this stream has ended\"}\n\n"

    private func reserveStream(for userID: String) throws {
        guard streams.reserve(for: userID) else {
            var error = ServiceNowError(.tooManyRequests, "Too many live streams", detail: streams.refusal)
            error.headers[.retryAfter] = "5"
            throw error
        }
    }

    private func releaseStream(for userID: String) { streams.release(for: userID) }

    private static func sequence(_ text: String, name: String) throws -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), value >= 0 else {
            throw ServiceNowError.badRequest("Invalid \(name)", detail: "'\(text.prefix(40))' is not an event sequence number")
        }
        return value
    }

    /// A new notification of the caller as an SSE message (`event: notification`).
    static func notification(_ event: ChangeEvent) -> String {
        let values = event.values
        let data = JSONValue(members: [
            ("sys_id", .string(event.sysID)), ("subject", .string(values["subject"] ?? "")), ("message", .string(values["message"] ?? "")),
            ("url", .string("/app/notifications/\(event.sysID)")),
        ])
        return "event: notification\nid: \(event.sequence)\ndata: " + String(decoding: data.serialized(), as: UTF8.self) + "\n\n"
    }

    /// One change as an SSE message.
    static func message(_ change: RecordChange, userDisplay: String) -> String {
        let event = change.event
        func object(_ row: [String: String]) -> JSONValue {
            JSONValue(members: row.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })
        }
        var members: [(String, JSONValue)] = [
            ("sequence", .integer(event.sequence)), ("change", .string(change.kind.rawValue)),
            ("operation", .string(event.operation.rawValue)), ("table", .string(event.table)),
            ("sys_id", .string(event.sysID)), ("fields", .array(event.fields.map(JSONValue.string))),
            ("user", .string(event.userName)), ("user_display", .string(userDisplay)), ("time", .string(event.time)),
            ("record", object(change.record)),
        ]
        if change.kind == .changed { members.append(("previous", object(change.previous))) }
        let data = String(decoding: JSONValue(members: members).serialized(), as: UTF8.self)
        return "id: \(event.sequence)\ndata: \(data)\n\n"
    }

    private static func buffer(_ text: String) -> ByteBuffer { ByteBuffer(string: text) }
}

/// Messages by sequence and kind: followers who were told alike get the same bytes, encoded once.
final class MessageCache: Sendable {
    struct Key: Hashable {
        let sequence: Int
        let kind: RecordChange.Kind
    }

    static let capacity = 1_024
    private let entries = Mutex<[Key: ByteBuffer]>([:])

    func message(for change: RecordChange, userDisplay: String) -> ByteBuffer {
        let key = Key(sequence: change.event.sequence, kind: change.kind)
        if let cached = entries.withLock({ $0[key] }) { return cached }
        let buffer = ByteBuffer(string: EventStreamController.message(change, userDisplay: userDisplay))
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = buffer
        }
        return buffer
    }
}

/// Users' full names by user name, for messages that name who changed something (read once, kept a while: a
/// renamed user's messages may show the old name for up to ``lifetime``).
final class UserNames: Sendable {
    static let capacity = 2_048
    static let lifetime: Duration = .seconds(300)
    private let entries = Mutex<[String: (name: String, read: ContinuousClock.Instant)]>([:])

    func fullName(of userName: String, store: RecordStore) async throws -> String {
        if userName.isEmpty || userName == "system" { return userName }
        let now = ContinuousClock.now
        if let cached = entries.withLock({ $0[userName] }), now - cached.read < Self.lifetime { return cached.name }
        let found = try await store.list(
            RecordQuery(table: "sys_user", query: .where("user_name", .equals, userName), fields: ["name"], limit: 1, count: false),
            caller: .system
        ).records.first?["name"] ?? ""
        let name = found.isEmpty ? userName : found
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeAll(keepingCapacity: true) }
            entries[userName] = (name, now)
        }
        return name
    }
}

extension HTTPField.Name {
    static let lastEventID = HTTPField.Name("Last-Event-ID")!
}

/// Writes an event stream's messages straight onto its HTTP/1 connection, on the connection's event loop, for a
/// ``LiveGroups`` group: each is handed to the pipeline just above the HTTP codec as a body part, so the codec frames
/// it (a chunk) as it frames what the stream's own writer writes. The stream's `ready`
/// was written before the ride began, and what the stream writes after it leaves the group goes behind the group's
/// deliveries on the same event loop, so nothing is written out of order.
struct EventStreamBody: Sendable {
    private let channel: any Channel
    private let context: NIOLoopBound<ChannelHandlerContext>

    /// Nil when the connection is not HTTP/1 as docketd serves it (an HTTP/2 stream, a test's channel): the stream
    /// then follows the log on its own.
    init?(_ channel: any Channel) async {
        let found: NIOLoopBound<ChannelHandlerContext>
        do {
            found = try await channel.eventLoop.submit {
                NIOLoopBound(try channel.pipeline.syncOperations.context(handlerType: LingeringCloseHandler.self), eventLoop: channel.eventLoop)
            }.get()
        } catch {
            return nil
        }
        self.channel = channel
        self.context = found
    }

    /// Writes one message; called on the channel's event loop.
    func write(_ message: ByteBuffer) -> LiveGroups.Delivery {
        guard channel.isActive else { return .closed }
        guard channel.isWritable else { return .congested }
        context.value.writeAndFlush(NIOAny(HTTPResponsePart.body(message)), promise: nil)
        return .written
    }
}
