import Foundation
import Logging
import NIOCore
import NIOWebSocket
import Synchronization
import Tracing

/// A GraphQL subscription or an event stream as ``LiveGroups`` runs it: which changes to follow, and how each
/// becomes a result.
struct LiveSubscription: Sendable {
    let live: LiveQuery
    let after: Int
    /// The result for one change (a GraphQL `{"data", "errors"}`, an SSE message), or nil when it is not reported. It is
    /// called with the caller as it is now (roles may have changed since the subscription started).
    let render: @Sendable (RecordChange, Caller) async throws -> [UInt8]?
    /// What the results look like (the dialect, the document, its variables; `sse` for event streams), for one that
    /// starts at the head of the log: those alike in this, their table, query and viewer ride one ``LiveGroups`` group.
    /// Nil for one that resumes from a sequence (it follows on its own).
    var shareable: String? = nil

    /// The group key: the results' identity and what is followed, as who sees it judges it (subscribers who see
    /// alike share a group whoever they are: ``RecordStore/judgementKey(for:)``).
    func groupKey(in store: RecordStore) -> String? {
        shareable.map { $0 + "\u{0}" + store.judgementKey(for: live) }
    }
}

/// Subscriptions and event streams that follow the head of the event log alike, served together.
///
/// Subscribers that start "from now" (no `since`) with the same document (or, for Server-Sent Events, the same
/// stream format), table and query, who see alike
/// (``RecordStore/judgementKey(for:)``: not necessarily the same user), would each judge and render every change the
/// same way. They ride one group: one task follows the log,
/// judges and renders each change once, and writes the same result to every member's socket straight onto its
/// channel. A change then costs one wake-up per group rather than one per subscriber (a follower task, the WebSocket
/// writer's actor, the channel's event loop each), which is what keeps the delivery latency of a thousand
/// subscribers low on a small machine.
///
/// A member leaves the group, and its operation follows the log on its own from exactly where the group left it,
/// when its socket cannot take more (a client that reads slowly is then paced by the log, not by memory), when its
/// caller no longer sees alike (roles, scope), or when the group failed; it is revoked when its credential ended. A subscription that
/// resumes from a sequence follows on its own from the start.
///
/// A member whose client was told where it starts (an event stream's `ready`) never joins a group that handed out
/// a later change: it would miss it. It follows alone instead. Members with a heartbeat (event streams) are checked
/// against their credential at each tick of the log's clock and then sent it; a socket has a clock of its own.
final class LiveGroups: Sendable {
    /// Why a member stopped riding its group.
    enum Exit: Sendable, Equatable {
        /// Follow on alone, after this sequence (every event up to it was delivered or did not concern it).
        case alone(after: Int)
        /// The credential ended: the socket is to be closed.
        case revoked
        /// Following ended (the server is shutting down).
        case ended
        /// The operation was stopped.
        case cancelled
    }

    /// What a delivery came to.
    enum Delivery: Sendable {
        case written
        /// The socket's buffer is full: the member goes on alone, paced by the log.
        case congested
        /// The socket closed.
        case closed
    }

    /// One subscriber in a group: where its socket is, and how a result becomes its message.
    struct Rider: Sendable {
        let caller: Caller
        let credential: PresentedCredential
        /// Events up to this sequence are not for it (it joined after them).
        let after: Int
        /// The credential generations (see ``CredentialCheck``) when its caller was established: a change since
        /// has the group check the credential again before the member's first result.
        let checkedAt: (Int, Int)
        /// The event loop of its socket's channel: ``deliver`` runs there.
        let eventLoop: any EventLoop
        /// Writes one result to the socket, without waiting; called on ``eventLoop``.
        let deliver: @Sendable (Result) -> Delivery
        /// Whether it must see every change after ``after`` (it told its client so): it then joins only a group that
        /// handed out nothing later.
        var exact = false
        /// Writes a heartbeat, without waiting; called on ``eventLoop`` at each tick, after the group looked at the
        /// member's credential. Nil for a member with a clock of its own.
        var beat: (@Sendable () -> Delivery)? = nil
    }

    /// One result as the members on one event loop see it: each distinct message it becomes (a protocol's message
    /// type and an operation id; most clients number their first operation "1") is built once and shared.
    final class Result {
        let payload: [UInt8]
        private var messages: [String: ByteBuffer] = [:]

        init(_ payload: [UInt8]) { self.payload = payload }

        func message(_ key: String, build: ([UInt8]) -> ByteBuffer) -> ByteBuffer {
            if let built = messages[key] { return built }
            let built = build(payload)
            if messages.count < 64 { messages[key] = built }
            return built
        }
    }

    /// A member's seat: holds the waiting operation until its ride ends.
    final class Seat: Sendable {
        let rider: Rider
        private let state = Mutex<(continuation: CheckedContinuation<Exit, Never>?, exit: Exit?)>((nil, nil))

        init(_ rider: Rider) { self.rider = rider }

        /// Ends the ride (the first exit wins).
        func leave(_ exit: Exit) {
            let continuation = state.withLock { state -> CheckedContinuation<Exit, Never>? in
                guard state.exit == nil else { return nil }
                state.exit = exit
                defer { state.continuation = nil }
                return state.continuation
            }
            continuation?.resume(returning: exit)
        }

        var hasLeft: Bool { state.withLock { $0.exit != nil } }

        fileprivate func wait(_ continuation: CheckedContinuation<Exit, Never>) {
            let exit = state.withLock { state -> Exit? in
                if state.exit == nil { state.continuation = continuation }
                return state.exit
            }
            if let exit { continuation.resume(returning: exit) }
        }
    }

    private struct Group {
        /// Tells a group from a later one of the same key (a group's task may outlive its removal briefly).
        let id: Int
        var seats: [ObjectIdentifier: Seat] = [:]
        var task: Task<Void, Never>?
        /// Where the group started following, then the sequence of the last change handed to the members: a member
        /// that joins now gets the later ones.
        var handedOut: Int
    }

    let store: RecordStore
    let credentials: CredentialCheck
    let logger: Logger
    /// Where each change's fan-out time is counted, and where its span goes (a trace of its own: `live.fanout`).
    let metrics: ServerMetrics?
    let tracer: (any Tracer)?
    private let groups = Mutex<(next: Int, byKey: [String: Group])>((0, [:]))

    init(
        store: RecordStore, credentials: CredentialCheck, logger: Logger, metrics: ServerMetrics? = nil, tracer: (any Tracer)? = nil
    ) {
        self.store = store
        self.credentials = credentials
        self.logger = logger
        self.metrics = metrics
        self.tracer = tracer
    }

    /// How many groups ride now, and how many members they have (for tests and metrics).
    var count: Int { groups.withLock { $0.byKey.count } }
    var members: Int { groups.withLock { $0.byKey.values.reduce(0) { $0 + $1.seats.count } } }

    /// Rides the group of `key` (starting it when there is none) until the ride ends; see ``Exit``.
    func ride(key: String, subscription: LiveSubscription, rider: Rider) async -> Exit {
        let seat = Seat(rider)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                seat.wait(continuation)
                guard !seat.hasLeft else { return }
                let (started, joined) = groups.withLock { groups -> (Int?, Bool) in
                    if let group = groups.byKey[key] {
                        if rider.exact, group.handedOut > rider.after { return (nil, false) }
                        groups.byKey[key]?.seats[ObjectIdentifier(seat)] = seat
                        return (nil, true)
                    }
                    groups.next += 1
                    groups.byKey[key] = Group(id: groups.next, seats: [ObjectIdentifier(seat): seat], handedOut: rider.after)
                    return (groups.next, true)
                }
                guard joined else {
                    // The group is past where this member starts.
                    seat.leave(.alone(after: rider.after))
                    return
                }
                if let id = started {
                    let task = Task { await self.run(key: key, id: id, subscription: subscription, after: seat.rider.after) }
                    groups.withLock { groups in
                        if groups.byKey[key]?.id == id { groups.byKey[key]?.task = task } else { task.cancel() }
                    }
                }
            }
        } onCancel: {
            seat.leave(.cancelled)
            remove(seat, from: key)
        }
    }

    /// Takes a seat out of its group; the group ends with its last member.
    private func remove(_ seat: Seat, from key: String) {
        groups.withLock { groups -> Task<Void, Never>? in
            guard groups.byKey[key]?.seats.removeValue(forKey: ObjectIdentifier(seat)) != nil,
                groups.byKey[key]?.seats.isEmpty == true
            else { return nil }
            return groups.byKey.removeValue(forKey: key)?.task
        }?.cancel()
    }

    /// The members of group `id` (none once it was removed); with `handing`, those the change of that sequence is
    /// handed to (a member that joins later gets only later changes).
    private func seats(of key: String, id: Int, handing sequence: Int? = nil) -> [Seat] {
        groups.withLock { groups in
            guard let group = groups.byKey[key], group.id == id else { return [] }
            if let sequence { groups.byKey[key]?.handedOut = sequence }
            return Array(group.seats.values)
        }
    }

    /// The group's one follower: judges and renders each change once and hands the result to every member.
    private func run(key: String, id: Int, subscription: LiveSubscription, after start: Int) async {
        var iterator = store.subscribe(subscription.live, after: start).makeAsyncIterator()
        let caller = subscription.live.caller
        /// When each member's credential was last looked at.
        var checkedAt: [ObjectIdentifier: (Int, Int)] = [:]
        // A member leaves on its socket's event loop, after the deliveries already handed to that loop: what the
        // group gave it before is written, nothing after is (those deliveries see it gone), and it goes on alone
        // from `after` with no gap and no repeat. One that joined later than where the group is resumes after its
        // own start.
        func release(_ seat: Seat, _ exit: Exit) {
            seat.rider.eventLoop.execute {
                if case .alone(let after) = exit {
                    seat.leave(.alone(after: max(after, seat.rider.after)))
                } else {
                    seat.leave(exit)
                }
                self.remove(seat, from: key)
            }
        }
        var position = iterator.position
        do {
            while let update = try await iterator.nextUpdate() {
                let riders = seats(of: key, id: id)
                if riders.isEmpty { return }
                try Task.checkCancellation()
                // A logout, revocation or change to users and roles since a member's last look: it is checked again.
                let now = generations
                for seat in riders where (checkedAt[ObjectIdentifier(seat)] ?? seat.rider.checkedAt) != now {
                    checkedAt[ObjectIdentifier(seat)] = now
                    let standing: Caller?
                    do {
                        standing = try await credentials.caller(for: seat.rider.credential, as: seat.rider.caller)
                    } catch {
                        // Not known now (the database is unavailable): the member goes on alone and meets it itself.
                        release(seat, .alone(after: position))
                        continue
                    }
                    switch standing {
                    case nil: release(seat, .revoked)
                    case let current? where !seesAlike(current, caller, subscription.live):
                        // Its roles (or scope, or anything else that decides what it sees) changed.
                        release(seat, .alone(after: position))
                    default: break
                    }
                }
                if checkedAt.count > 2 * riders.count + 64 {
                    let present = Set(riders.map(ObjectIdentifier.init))
                    checkedAt = checkedAt.filter { present.contains($0.key) }
                }
                guard case .change(let change) = update else {
                    position = iterator.position
                    await beat(riders.filter { $0.rider.beat != nil && !$0.hasLeft }, key: key, release: release, position: position)
                    continue
                }
                try await fanOut(change, key: key, id: id, subscription: subscription, caller: caller, previous: position)
                position = iterator.position
            }
            // Following ended: the server is shutting down.
            for seat in seats(of: key, id: id) { release(seat, .ended) }
        } catch is CancellationError {
            for seat in seats(of: key, id: id) { release(seat, .alone(after: position)) }
        } catch {
            // Each member goes on alone from where the group was, and meets (and reports) the failure itself.
            logger.debug("A live group stopped", metadata: ["error": "\(error)"])
            for seat in seats(of: key, id: id) { release(seat, .alone(after: position)) }
        }
    }

    /// Judges and renders one change once and hands it to the members: timed for the metrics and, when traced, a
    /// span of its own (the change's fan-out is no request's part) whose storage reads are its children.
    private func fanOut(
        _ change: RecordChange, key: String, id: Int, subscription: LiveSubscription, caller: Caller, previous: Int
    ) async throws {
        let start = ContinuousClock.now
        let members = try await Traces.$tracer.withValue(tracer) {
            try await Traces.span("live.fanout", kind: .producer, context: .topLevel) { span in
                span?.attributes["docket.event.sequence"] = Int64(change.event.sequence)
                span?.attributes["docket.table"] = change.event.table
                guard let result = try await subscription.render(change, caller) else { return 0 }
                let seats = seats(of: key, id: id, handing: change.event.sequence)
                deliver(result, of: change.event.sequence, to: seats, key: key, previous: previous)
                span?.attributes["docket.live.members"] = Int64(seats.count)
                return seats.count
            }
        }
        metrics?.fanout(took: ContinuousClock.now - start, members: members)
    }

    /// Hands a result to every member, one task per event loop (not one hop per member). Each event loop runs its
    /// members' deliveries in the order the group handed them over, so a member's results stay in log order; one
    /// that left meanwhile (it now follows alone, from `previous`) is skipped.
    private func deliver(_ result: [UInt8], of sequence: Int, to seats: [Seat], key: String, previous: Int) {
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, seats: [Seat])] = [:]
        for seat in seats where seat.rider.after < sequence {
            byLoop[ObjectIdentifier(seat.rider.eventLoop), default: (seat.rider.eventLoop, [])].seats.append(seat)
        }
        for (loop, members) in byLoop.values {
            loop.execute {
                let shared = Result(result)
                for seat in members where !seat.hasLeft {
                    let exit: Exit
                    switch seat.rider.deliver(shared) {
                    case .written: continue
                    case .congested: exit = .alone(after: max(previous, seat.rider.after))
                    case .closed: exit = .cancelled
                    }
                    seat.leave(exit)
                    self.remove(seat, from: key)
                }
            }
        }
    }

    /// At a tick: each member with a heartbeat has its credential looked at (a bounded number at once: a token
    /// may have expired, which no counter tells) and, while it holds, is sent the heartbeat on its event loop.
    private func beat(_ seats: [Seat], key: String, release: (Seat, Exit) -> Void, position: Int) async {
        guard !seats.isEmpty else { return }
        let standing = await withTaskGroup(of: (Int, Caller??).self) { group in
            var standing = [Caller??](repeating: nil, count: seats.count)
            for (index, seat) in seats.enumerated() {
                if index >= 64, let (done, caller) = await group.next() { standing[done] = caller }
                let (credentials, rider) = (credentials, seat.rider)
                group.addTask {
                    do {
                        return (index, .some(try await credentials.caller(for: rider.credential, as: rider.caller)))
                    } catch {
                        return (index, nil)
                    }
                }
            }
            for await (done, caller) in group { standing[done] = caller }
            return standing
        }
        var byLoop: [ObjectIdentifier: (loop: any EventLoop, seats: [Seat])] = [:]
        for (seat, caller) in zip(seats, standing) {
            switch caller {
            case nil:
                // Not known now (the database is unavailable): the member goes on alone and meets it itself.
                release(seat, .alone(after: position))
            case .some(nil):
                release(seat, .revoked)
            case .some(.some):
                byLoop[ObjectIdentifier(seat.rider.eventLoop), default: (seat.rider.eventLoop, [])].seats.append(seat)
            }
        }
        for (loop, members) in byLoop.values {
            loop.execute {
                for seat in members where !seat.hasLeft {
                    guard let beat = seat.rider.beat else { continue }
                    switch beat() {
                    case .written, .congested: continue
                    case .closed:
                        seat.leave(.cancelled)
                        self.remove(seat, from: key)
                    }
                }
            }
        }
    }

    /// Whether `member` judges and sees the group's subscription as the group's caller does.
    private func seesAlike(_ member: Caller, _ caller: Caller, _ live: LiveQuery) -> Bool {
        var theirs = live
        theirs.caller = member
        return store.judgementKey(for: theirs) == store.judgementKey(for: live)
    }

    private var generations: (Int, Int) {
        (credentials.authenticator.credentialGeneration, credentials.oauth.revocationGeneration)
    }
}
