import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// docketd's own pool of PostgreSQL connections: at most `maximum` of them, opened when a lease finds none idle, kept
/// while they work, and replaced when one is found closed. A lease and a return cost one lock and no timer: the pool
/// arms none (postgres-nio's `PostgresClient` armed a keep-alive and an idle timer at each return and called them off
/// at the next lease, which woke a thread of its own about twice per write).
///
/// Each connection counts against `maximum` from the moment someone sets out to open it until it is found closed: a
/// slot is always held by an idle connection, a leased one, or an opener. A lease that finds none free waits in line;
/// a connection returned goes to the first in line, and a slot freed (a broken connection, an opener given up) goes
/// to the first in line to open a connection of its own. A failed open is tried again every `retryAfter` by the same
/// opener, which keeps its slot, so that an outage costs the server one attempt per opener at a time. Waits end at
/// once when their task is cancelled (``PostgresStorage``'s lease gives up after its deadline); an opener's attempt
/// under way then goes on alone, and its connection, if it comes, joins the pool.
final class PostgresConnections: Sendable {
    typealias Open = @Sendable (_ id: Int) async throws -> PostgresConnection
    /// Whether a connection idle for a while still answers (a connection a firewall dropped without a word is not
    /// seen closed until it is used, and its statements would wait for ever).
    typealias Check = @Sendable (PostgresConnection) async -> Bool

    let maximum: Int
    let retryAfter: Duration
    /// A connection idle longer than this is checked before it is leased.
    let checkIdleAfter: Duration
    /// How long one attempt to open a connection may take in all (the driver's connect timeout covers only TCP's
    /// connection, not the server's start-up and authentication).
    static let openLimit = Duration.seconds(10)
    private let open: Open
    private let check: Check
    private let state = Mutex(State())

    private struct State {
        /// Connections not leased, the most recently returned last (taken first: the others may be closed later),
        /// with when each was returned.
        var idle: [(connection: PostgresConnection, since: ContinuousClock.Instant)] = []
        /// Slots held: idle, leased and opening connections.
        var count = 0
        /// Leases waiting for a connection or a slot, first come first served.
        var waiters: [(id: Int, continuation: CheckedContinuation<Ticket, any Error>)] = []
        var nextID = 0
        var closed = false
    }

    /// What a lease is given: a connection (handed over by the lease before it, or idle since `idleSince`), or a
    /// slot to open one in.
    private enum Ticket: Sendable {
        case connection(PostgresConnection, idleSince: ContinuousClock.Instant?)
        case open
    }

    init(
        maximum: Int, retryAfter: Duration = .milliseconds(250), checkIdleAfter: Duration = .seconds(30),
        open: @escaping Open, check: @escaping Check
    ) {
        self.maximum = max(1, maximum)
        self.retryAfter = retryAfter
        self.checkIdleAfter = checkIdleAfter
        self.open = open
        self.check = check
    }

    deinit {
        // Whoever owns the pool closes it (``close()``); this only keeps connections from outliving it.
        for idle in state.withLock({ $0.idle }) { Self.closeDetached(idle.connection) }
    }

    /// Closes a connection without waiting, keeping it alive until it has closed (postgres-nio asserts that a
    /// connection is closed before it goes away).
    private static func closeDetached(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        closing.whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// How many connections are open or being opened, and how many of them are idle (for tests).
    var counts: (slots: Int, idle: Int, waiting: Int) { state.withLock { ($0.count, $0.idle.count, $0.waiters.count) } }

    /// Runs `body` on a connection of the pool, returned to it afterwards (closed instead if the pool closed meanwhile;
    /// dropped if it broke).
    func withConnection<T: Sendable>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await lease()
        defer { release(connection) }
        return try await body(connection)
    }

    /// A connection to use and then hand back with ``release(_:)``.
    func lease() async throws -> PostgresConnection {
        let ticket: Ticket
        if let taken = try state.withLock({ state throws -> Ticket? in
            guard !state.closed else { throw StorageUnavailable.closed }
            return take(&state)
        }) {
            ticket = taken
        } else {
            ticket = try await waitInLine()
        }
        switch ticket {
        case .connection(let connection, let idleSince):
            guard let idleSince, ContinuousClock.now - idleSince > checkIdleAfter else { return connection }
            // Idle a while: checked first, and replaced (in the same slot) when it does not answer.
            if await check(connection) { return connection }
            Self.closeDetached(connection)
            // Cancelled during the check (which then fails): the slot is given up, not kept by nobody.
            if Task.isCancelled {
                freeSlot()
                throw CancellationError()
            }
            return try await openInSlot()
        case .open: return try await openInSlot()
        }
    }

    /// A connection at once, if one is idle, open and recently used (one idle longer is left to ``lease()``, which
    /// checks it first); nil otherwise, and the caller leases as usual. Hand it back with ``release(_:)``.
    func leaseIfIdle() -> PostgresConnection? {
        state.withLock { state in
            guard !state.closed, let last = state.idle.last, !last.connection.isClosed,
                ContinuousClock.now - last.since <= checkIdleAfter
            else { return nil }
            state.idle.removeLast()
            return last.connection
        }
    }

    /// An idle connection that is still open, else a slot if one is free; nil when the lease must wait.
    private func take(_ state: inout State) -> Ticket? {
        while let idle = state.idle.popLast() {
            if !idle.connection.isClosed { return .connection(idle.connection, idleSince: idle.since) }
            state.count -= 1
        }
        guard state.count < maximum else { return nil }
        state.count += 1
        return .open
    }

    private func waitInLine() async throws -> Ticket {
        let id = state.withLock { state in
            defer { state.nextID &+= 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Ticket, any Error>) in
                // Decided under the lock that returns go through, so that nothing returned meanwhile is missed.
                state.withLock { state in
                    if state.closed { return continuation.resume(throwing: StorageUnavailable.closed) }
                    if Task.isCancelled { return continuation.resume(throwing: CancellationError()) }
                    if let ticket = take(&state) { return continuation.resume(returning: ticket) }
                    state.waiters.append((id, continuation))
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Ticket, any Error>? in
                guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return state.waiters.remove(at: index).continuation
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Opens a connection in a slot the caller holds. The attempts run in a task of their own, so that a caller
    /// cancelled meanwhile returns at once: the task then keeps the slot, and adds its connection to the pool (or
    /// frees the slot after a failed attempt).
    private func openInSlot() async throws -> PostgresConnection {
        let handoff = Handoff()
        let id = state.withLock { state in
            defer { state.nextID &+= 1 }
            return state.nextID
        }
        /// The slot goes back; a lease still waiting learns that the pool closed.
        @Sendable func giveUp() {
            handoff.fail(StorageUnavailable.closed)
            freeSlot()
        }
        Task.detached { [self] in
            while true {
                do {
                    let attempt = Task { try await open(id) }
                    guard let connection = try await bounded(Self.openLimit, { try await attempt.value }) else {
                        // Given up on; a connection that comes after all is closed.
                        Task { if let late = try? await attempt.value { Self.closeDetached(late) } }
                        throw StorageUnavailable(reason: "no connection to PostgreSQL within \(Self.openLimit)")
                    }
                    if state.withLock({ $0.closed }) {
                        // Closed meanwhile: the connection is closed (``release(_:)``), the lease fails.
                        release(connection)
                        return handoff.fail(StorageUnavailable.closed)
                    }
                    if !handoff.deliver(connection) { release(connection) }
                    return
                } catch {
                    if handoff.isAbandoned || state.withLock({ $0.closed }) { return giveUp() }
                    try? await Task.sleep(for: retryAfter)
                    if handoff.isAbandoned || state.withLock({ $0.closed }) { return giveUp() }
                }
            }
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in handoff.wait(continuation) }
        } onCancel: {
            handoff.abandon()
        }
    }

    /// Where an opener's connection goes: to the lease that asked, unless it stopped waiting.
    private final class Handoff: Sendable {
        private struct State {
            var waiter: CheckedContinuation<PostgresConnection, any Error>?
            /// Delivered before the lease began to wait: it takes it when it does.
            var delivered: PostgresConnection?
            var abandoned = false
            /// What a lease that begins to wait after ``fail(_:)`` gets.
            var failure: (any Error)?
        }
        private let state = Mutex(State())

        func wait(_ continuation: CheckedContinuation<PostgresConnection, any Error>) {
            let outcome = state.withLock { state -> Result<PostgresConnection, any Error>? in
                if let delivered = state.delivered {
                    state.delivered = nil
                    return .success(delivered)
                }
                if state.abandoned { return .failure(state.failure ?? CancellationError()) }
                state.waiter = continuation
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }

        /// Hands the connection over; false when the lease stopped waiting (its caller was cancelled).
        func deliver(_ connection: PostgresConnection) -> Bool {
            let (accepted, waiter) = state.withLock { state -> (Bool, CheckedContinuation<PostgresConnection, any Error>?) in
                guard !state.abandoned else { return (false, nil) }
                guard let waiter = state.waiter else {
                    state.delivered = connection
                    return (true, nil)
                }
                state.waiter = nil
                return (true, waiter)
            }
            waiter?.resume(returning: connection)
            return accepted
        }

        /// The lease stops waiting. A connection already delivered is still taken by it (and returned by its caller).
        func abandon() { fail(CancellationError()) }

        /// The lease gets `error` (at once, or when it begins to wait), unless a connection was delivered first.
        func fail(_ error: any Error) {
            let waiter = state.withLock { state -> CheckedContinuation<PostgresConnection, any Error>? in
                if !state.abandoned { state.failure = error }
                state.abandoned = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(throwing: error)
        }

        var isAbandoned: Bool { state.withLock { $0.abandoned } }
    }

    /// Hands a connection back: to the first lease in line, else to the idle ones. A closed connection frees its
    /// slot instead, for the first in line to open one; after ``close()`` it is closed.
    func release(_ connection: PostgresConnection) {
        enum Next {
            case none
            case close
            case hand(CheckedContinuation<Ticket, any Error>, Ticket)
        }
        let next = state.withLock { state -> Next in
            if state.closed {
                state.count -= 1
                return .close
            }
            if connection.isClosed {
                guard !state.waiters.isEmpty else {
                    state.count -= 1
                    return .none
                }
                return .hand(state.waiters.removeFirst().continuation, .open)
            }
            guard !state.waiters.isEmpty else {
                state.idle.append((connection, .now))
                return .none
            }
            return .hand(state.waiters.removeFirst().continuation, .connection(connection, idleSince: nil))
        }
        switch next {
        case .none: break
        case .close: Self.closeDetached(connection)
        case .hand(let waiter, let ticket): waiter.resume(returning: ticket)
        }
    }

    /// A slot an opener held is free: the first lease in line opens in it, or it is given back.
    private func freeSlot() {
        let waiter = state.withLock { state -> CheckedContinuation<Ticket, any Error>? in
            guard !state.closed, !state.waiters.isEmpty else {
                state.count -= 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        waiter?.resume(returning: .open)
    }

    /// Closes the idle connections and refuses leases from now on; leased ones are closed when they come back, and
    /// leases waiting in line fail.
    func close() async {
        let (idle, waiters) = state.withLock { state in
            state.closed = true
            state.count -= state.idle.count
            defer {
                state.idle = []
                state.waiters = []
            }
            return (state.idle, state.waiters)
        }
        for waiter in waiters { waiter.continuation.resume(throwing: StorageUnavailable.closed) }
        for connection in idle { try? await connection.connection.close() }
    }
}
