import DocketModel
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import NIOWebSocket
import Synchronization

/// One GraphQL socket: its protocol state, its operations and its credential.
final class GraphQLSocketConnection: Sendable {
    let server: GraphQLSocketServer
    let dialect: any GraphQLSocketDialect
    let kind: GraphQLSocketProtocol
    let outbound: WebSocketOutboundWriter
    let channel: any Channel
    let request: Request
    let clientAddress: String
    let logger: Logger

    private struct State {
        var initReceived = false
        var login: (caller: Caller, credential: PresentedCredential)?
        var operations: [String: OperationHandle] = [:]
        var initTimeout: Task<Void, Never>?
        var closed = false
    }

    private let state = Mutex(State())
    /// The frame encoder's place in the channel's pipeline, found on the first shared result (on the event loop).
    private let framed: NIOLoopBoundBox<ChannelHandlerContext?>

    init(
        server: GraphQLSocketServer, dialect: any GraphQLSocketDialect, kind: GraphQLSocketProtocol,
        outbound: WebSocketOutboundWriter, channel: any Channel, request: Request, clientAddress: String, logger: Logger
    ) {
        self.server = server
        self.dialect = dialect
        self.kind = kind
        self.outbound = outbound
        self.channel = channel
        self.framed = .makeEmptyBox(valueType: ChannelHandlerContext.self, eventLoop: channel.eventLoop)
        self.request = request
        self.clientAddress = clientAddress
        self.logger = logger
    }

    func run(inbound: WebSocketInboundStream) async {
        // Ended by connection_init (an idle socket then holds no timer but its keep-alive).
        let initTimeout = Task { await self.watch() }
        state.withLock { $0.initTimeout = initTimeout }
        do {
            for try await message in inbound.messages(maxSize: GraphQLSocketServer.maxMessageSize) {
                guard case .text(let text) = message else {
                    await close(GraphQLSocketProtocol.Close.badRequest, "Messages must be JSON text")
                    break
                }
                guard await receive(text) else { break }
            }
        } catch {
            // A message too large, or a broken connection.
            await close(GraphQLSocketProtocol.Close.badRequest, "Message too large or malformed")
        }
        let operations = state.withLock { state in
            state.closed = true
            defer { (state.operations, state.initTimeout) = ([:], nil) }
            return Array(state.operations.values)
        }
        server.clock.remove(self)
        initTimeout.cancel()
        for operation in operations { operation.cancel() }
    }

    /// A running operation: its task, and whether it was stopped (possibly before its task was attached).
    final class OperationHandle: Sendable {
        private let state = Mutex<(task: Task<Void, Never>?, cancelled: Bool)>((nil, false))

        func attach(_ task: Task<Void, Never>) {
            if state.withLock({ state in
                state.task = task
                return state.cancelled
            }) {
                task.cancel()
            }
        }

        func cancel() {
            state.withLock { state in
                state.cancelled = true
                return state.task
            }?.cancel()
        }

        var isCancelled: Bool { state.withLock { $0.cancelled } }
    }

    // MARK: Inbound

    /// Handles one client message; false when the connection is to end.
    private func receive(_ text: String) async -> Bool {
        guard let message = try? JSONValue.parse(Array(text.utf8)), let members = message.objectValue,
            let type = members["type"]?.stringValue
        else {
            await close(GraphQLSocketProtocol.Close.badRequest, "Invalid message: a JSON object with a type is expected")
            return false
        }
        switch (kind, type) {
        case (_, "connection_init"):
            return await initialize(payload: members["payload"])
        case (.transportWS, "ping"):
            var reply: [(String, JSONValue)] = [("type", .string("pong"))]
            if let payload = members["payload"], payload != .null { reply.append(("payload", payload)) }
            await send(JSONValue(members: reply).serialized())
            return true
        case (.transportWS, "pong"):
            return true
        case (.transportWS, "subscribe"), (.legacy, "start"):
            return await start(id: members["id"], payload: members["payload"])
        case (.transportWS, "complete"), (.legacy, "stop"):
            if let id = members["id"]?.stringValue { stop(id, tellClient: kind == .legacy) }
            return true
        case (.legacy, "connection_terminate"):
            await close(.normalClosure, nil)
            return false
        default:
            await close(GraphQLSocketProtocol.Close.badRequest, "Invalid message type '\(type.prefix(40))'")
            return false
        }
    }

    private func initialize(payload: JSONValue?) async -> Bool {
        let (first, timer) = state.withLock { state in
            defer { (state.initReceived, state.initTimeout) = (true, nil) }
            return (!state.initReceived, state.initTimeout)
        }
        timer?.cancel()
        guard first else {
            await close(GraphQLSocketProtocol.Close.tooManyInits, "Too many initialisation requests")
            return false
        }
        if let payload, payload != .null, payload.objectValue == nil {
            await refuseLogin("The connection_init payload must be an object")
            return false
        }
        switch await dialect.authenticate(payload: payload, request: request, clientAddress: clientAddress) {
        case .rejected(let reason):
            await refuseLogin(reason)
            return false
        case .unavailable(let reason):
            await closeUnavailable(reason)
            return false
        case .accepted(let caller, let credential):
            let open = state.withLock { state in
                state.login = (caller, credential)
                return !state.closed
            }
            if open { server.clock.add(self, server: server) }
            await send(Array(#"{"type":"connection_ack"}"#.utf8))
            if kind == .legacy { await send(Array(#"{"type":"ka"}"#.utf8)) }
            return true
        }
    }

    /// Logins or the database cannot be used right now: closed with 1011, after which graphql-ws clients reconnect
    /// (and resubscribe, `since` what they last saw), where 4401/4403 would end them for good.
    private func closeUnavailable(_ reason: String) async {
        if kind == .legacy {
            await send(JSONValue(members: [
                ("type", .string("connection_error")), ("payload", .object(["message": .string(reason)])),
            ]).serialized())
        }
        await close(GraphQLSocketProtocol.Close.tryAgainLater, "Unavailable: try again later")
    }

    private func refuseLogin(_ reason: String) async {
        if kind == .legacy {
            await send(JSONValue(members: [
                ("type", .string("connection_error")), ("payload", .object(["message": .string(reason)])),
            ]).serialized())
        }
        await close(GraphQLSocketProtocol.Close.forbidden, "Forbidden")
    }

    private func start(id: JSONValue?, payload: JSONValue?) async -> Bool {
        guard let id = id?.stringValue, !id.isEmpty, id.utf8.count <= 256 else {
            await close(GraphQLSocketProtocol.Close.badRequest, "Invalid message: an operation needs a string id")
            return false
        }
        guard let login = state.withLock({ $0.login }) else {
            await close(GraphQLSocketProtocol.Close.unauthorized, "Unauthorized")
            return false
        }
        guard let payload = payload?.objectValue else {
            await close(GraphQLSocketProtocol.Close.badRequest, "Invalid message: an operation needs a payload object")
            return false
        }
        let operation = SocketOperationRequest(
            query: payload["query"]?.stringValue, variables: payload["variables"],
            operationName: payload["operationName"]?.stringValue
        )
        enum Admission { case admitted, duplicate, tooMany, closed }
        let handle = OperationHandle()
        let admission = state.withLock { state -> Admission in
            if state.closed { return .closed }
            if let existing = state.operations[id] {
                // The legacy protocol replaces an operation started again under the same id.
                guard kind == .legacy else { return .duplicate }
                existing.cancel()
                state.operations[id] = nil
            }
            guard state.operations.count < server.operationsPerConnection else { return .tooMany }
            state.operations[id] = handle
            return .admitted
        }
        switch admission {
        case .admitted:
            handle.attach(Task { [self] in await self.perform(operation, id: id, handle: handle, caller: login.caller) })
            return true
        case .closed:
            return false
        case .duplicate:
            await close(GraphQLSocketProtocol.Close.duplicateSubscriber, "Subscriber for \(id) already exists")
            return false
        case .tooMany:
            await sendErrors(id: id, [.object(["message": .string(
                "Too many operations on this connection: at most \(server.operationsPerConnection) may run at once; complete one first"
            )])])
            return true
        }
    }

    /// Ends an operation the client stopped (the legacy protocol confirms with `complete`).
    private func stop(_ id: String, tellClient: Bool) {
        guard let handle = state.withLock({ $0.operations.removeValue(forKey: id) }) else { return }
        handle.cancel()
        if tellClient {
            let message = Self.message("complete", id: id, payload: nil)
            Task { await self.send(message) }
        }
    }

    /// Forgets a finished operation; false when it was stopped or replaced meanwhile (nothing more is sent).
    private func finish(_ id: String, _ handle: OperationHandle) -> Bool {
        state.withLock { state in
            guard let current = state.operations[id], current === handle, !handle.isCancelled else { return false }
            state.operations[id] = nil
            return true
        }
    }

    // MARK: Operations

    private func perform(_ request: SocketOperationRequest, id: String, handle: OperationHandle, caller: Caller) async {
        // A task keeps the largest stack it ever had for as long as it lasts, and this one lasts as long as the
        // subscription. Parsing, validating and starting the operation takes a deep stack (its first frame alone is
        // some 5 KiB), so it runs in a child task, whose stack is freed when it ends; see also followAlone.
        let dialect = self.dialect
        let operation = await withTaskGroup(of: SocketOperation.self) { group in
            group.addTask { await dialect.operation(request, caller: caller) }
            return await group.next()!
        }
        switch operation {
        case .single(let result):
            guard !Task.isCancelled else { return }
            await send(Self.message(kind == .legacy ? "data" : "next", id: id, payload: result))
            if finish(id, handle) { await send(Self.message("complete", id: id, payload: nil)) }
        case .refused(let errors):
            guard finish(id, handle) else { return }
            await sendErrors(id: id, errors)
        case .stream(let subscription):
            await follow(subscription, id: id, handle: handle)
        }
    }

    /// The errors of an operation that did not run: `error` (which ends it) in the current protocol; `data` with
    /// the errors, then `complete`, in the legacy one (as its reference server answers validation errors).
    private func sendErrors(id: String, _ errors: [JSONValue]) async {
        switch kind {
        case .transportWS:
            await send(Self.message("error", id: id, payload: JSONValue.array(errors).serialized()))
        case .legacy:
            let result = JSONValue(members: [("data", .null), ("errors", .array(errors))])
            await send(Self.message("data", id: id, payload: result.serialized()))
            await send(Self.message("complete", id: id, payload: nil))
        }
    }

    /// Sends what the subscription's follower shows until the client stops it, the credential ends (the socket is
    /// closed), the log cannot serve it (an error asking to read again) or the server shuts down.
    private func follow(_ subscription: LiveSubscription, id: String, handle: OperationHandle) async {
        guard let (userID, credential) = state.withLock({ state in state.login.map { ($0.caller.userID, $0.credential) } }) else {
            return
        }
        guard server.streams.reserve(for: userID) else {
            guard finish(id, handle) else { return }
            await sendErrors(id: id, [.object([
                "message": .string(server.streams.refusal),
                "extensions": .object(["code": .string("TOO_MANY_SUBSCRIPTIONS")]),
            ])])
            return
        }
        defer { server.streams.release(for: userID) }
        var after = subscription.after
        // Left a group because the caller changed: look at the credential again before the first change.
        var checkFirst = false
        let watch = server.credentials.watch()
        if let key = subscription.groupKey(in: server.store) {
            let rider = LiveGroups.Rider(
                caller: subscription.live.caller, credential: credential, after: after, checkedAt: watch.checkedAt,
                eventLoop: channel.eventLoop
            ) { [self] result in self.deliver(result, id: id) }
            switch await server.groups.ride(key: key, subscription: subscription, rider: rider) {
            case .alone(let position):
                (after, checkFirst) = (position, true)
            case .revoked:
                await revoke()
                return
            case .ended:
                if !Task.isCancelled { await close(.goingAway, "Server shutting down") }
                return
            case .cancelled:
                return
            }
        }
        await followAlone(subscription, id: id, handle: handle, after: after, checkFirst: checkFirst, credential: credential, watch: watch)
    }

    /// Follows the log on its own, from `after`: a subscription that resumes from a sequence, or one that left its
    /// group. Kept out of ``follow(_:id:handle:)`` (and not inlined there) because its async frame is large (some
    /// 6 KiB), and a task keeps the largest stack it ever had for as long as it lasts: a subscription that rides a
    /// group, as most idle ones do, never needs it.
    @inline(never)
    private func followAlone(
        _ subscription: LiveSubscription, id: String, handle: OperationHandle, after: Int, checkFirst: Bool,
        credential: PresentedCredential, watch: CredentialCheck.Watch
    ) async {
        var checkFirst = checkFirst
        var watch = watch
        var iterator = server.store.subscribe(subscription.live, after: after).makeAsyncIterator()
        do {
            while let update = try await iterator.nextUpdate() {
                if Task.isCancelled { return }
                let judgedAs = iterator.live.caller
                var isTick = checkFirst
                checkFirst = false
                if case .tick = update { isTick = true }
                guard let caller = try await watch.caller(judgedAs, credential: credential, force: isTick) else {
                    await revoke()
                    return
                }
                iterator.live.caller = caller
                guard case .change(var change) = update else { continue }
                if caller != judgedAs {
                    guard let rejudged = try await server.store.change(change.event, for: iterator.live) else { continue }
                    change = rejudged
                }
                guard let result = try await subscription.render(change, caller) else { continue }
                if Task.isCancelled { return }
                await send(Self.message(kind == .legacy ? "data" : "next", id: id, payload: result))
            }
            // Following ended: the server is shutting down. The client reconnects (elsewhere) and resumes.
            if !Task.isCancelled { await close(.goingAway, "Server shutting down") }
        } catch EventLogError.resyncNeeded(let oldest) {
            guard finish(id, handle) else { return }
            await sendErrors(id: id, [.object([
                "message": .string(
                    "The event log cannot replay from the requested sequence (it no longer reaches back, or too many changes came since): read the current state again and subscribe from \(oldest)"
                ),
                "extensions": .object(["code": .string("RESYNC_NEEDED"), "oldestAvailable": .integer(oldest)]),
            ])])
        } catch is CancellationError {
            return
        } catch let error where error is LoginFailure || StorageUnavailable.classify(error) != nil {
            // The database is unavailable: the whole socket closes with 1011, and its client reconnects later.
            logger.warning("A subscription stopped: the database is unavailable", metadata: ["error": "\(error)"])
            await closeUnavailable("The database is unavailable; reconnect and subscribe again")
        } catch {
            logger.error("A subscription failed", metadata: ["error": "\(error)"])
            guard finish(id, handle) else { return }
            await sendErrors(id: id, [.object(["message": .string("The subscription failed on the server; subscribe again")])])
        }
    }

    // MARK: Keep-alive and credentials

    /// Closes the connection when `connection_init` does not come in time.
    private func watch() async {
        do {
            try await Task.sleep(for: server.initTimeout)
        } catch {
            return
        }
        if state.withLock({ !$0.initReceived }) {
            await close(GraphQLSocketProtocol.Close.initTimeout, "Connection initialisation timeout")
        }
    }

    /// Told by the ``SocketClock``: checks that the credential still holds (closing the socket when it does not)
    /// and, on a heartbeat, sends the legacy protocol's keep-alive.
    func check(beat: Bool) async {
        guard let login = state.withLock({ $0.closed ? nil : $0.login }) else { return }
        do {
            guard try await server.credentials.caller(for: login.credential, as: login.caller) != nil else {
                await revoke()
                return
            }
        } catch {
            await closeUnavailable("The credential cannot be checked right now; reconnect later")
            return
        }
        guard beat else { return }
        if kind == .legacy {
            await send(Array(#"{"type":"ka"}"#.utf8))
        } else {
            // A WebSocket ping (the client's library answers it): keeps proxies from closing an idle socket, and a
            // write to a peer that vanished fails.
            guard !state.withLock({ $0.closed }) else { return }
            try? await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .ping, data: ByteBuffer(string: "docket"))))
        }
    }

    /// The credential ended: the socket is closed with 4403 (the legacy protocol is told why first).
    private func revoke() async {
        if kind == .legacy {
            await send(JSONValue(members: [
                ("type", .string("connection_error")),
                ("payload", .object(["message": .string("The session or token of this connection has ended")])),
            ]).serialized())
        }
        await close(GraphQLSocketProtocol.Close.forbidden, "Forbidden: the session or token has ended")
    }

    // MARK: Outbound

    static func message(_ type: String, id: String, payload: [UInt8]?) -> [UInt8] {
        var bytes = Array(#"{"type":""#.utf8)
        bytes += type.utf8
        bytes += Array(#"","id":"#.utf8)
        JSONValue.string(id).write(to: &bytes)
        if let payload {
            bytes += Array(#","payload":"#.utf8)
            bytes += payload
        }
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// Writes a result a group of subscriptions shares straight to the channel, on its event loop (see ``LiveGroups``).
    /// The frame is built once for every member with the same operation id, and written below the pipeline's frame
    /// encoder, so that each delivery costs the socket's write and little else: one buffer, no frame header of its
    /// own, none of the handlers above. Server frames are unmasked and the result is never compressed, so the
    /// bytes are what the encoder would have written.
    private func deliver(_ result: LiveGroups.Result, id: String) -> LiveGroups.Delivery {
        if state.withLock({ $0.closed }) { return .closed }
        guard channel.isWritable else { return .congested }
        let type = kind == .legacy ? "data" : "next"
        let frame = result.message(type + "\u{0}" + id) { [channel] payload in
            Self.textFrame(Self.message(type, id: id, payload: payload), allocator: channel.allocator)
        }
        if framed.value == nil { framed.value = try? channel.pipeline.syncOperations.context(handlerType: WebSocketFrameEncoder.self) }
        // Without its frame encoder the channel is no longer a WebSocket: it is being torn down.
        guard let encoder = framed.value else { return .closed }
        encoder.writeAndFlush(NIOAny(frame), promise: nil)
        return .written
    }

    /// A whole unmasked text frame (RFC 6455 §5.2): FIN and the opcode, the length in 7, 16 or 64 bits, the text.
    static func textFrame(_ text: [UInt8], allocator: ByteBufferAllocator) -> ByteBuffer {
        var buffer = allocator.buffer(capacity: text.count + 10)
        buffer.writeInteger(UInt8(0x81))
        if text.count < 126 {
            buffer.writeInteger(UInt8(text.count))
        } else if text.count <= Int(UInt16.max) {
            buffer.writeInteger(UInt8(126))
            buffer.writeInteger(UInt16(text.count))
        } else {
            buffer.writeInteger(UInt8(127))
            buffer.writeInteger(UInt64(text.count))
        }
        buffer.writeBytes(text)
        return buffer
    }

    private func send(_ bytes: [UInt8]) async {
        if state.withLock({ $0.closed }) { return }
        do {
            try await outbound.write(.custom(WebSocketFrame(fin: true, opcode: .text, data: ByteBuffer(bytes: bytes))))
        } catch {
            logger.debug("Could not write to a GraphQL socket", metadata: ["error": "\(error)"])
        }
    }

    private func close(_ code: WebSocketErrorCode, _ reason: String?) async {
        let first = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        guard first else { return }
        try? await outbound.close(code, reason: reason)
    }
}
