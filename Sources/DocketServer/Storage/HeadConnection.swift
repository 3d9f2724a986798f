import Foundation
import Logging
import PostgresNIO
import Synchronization

/// One PostgreSQL connection kept for a single kind of small, frequent read (the event log's head): connected on
/// first use, and again after it breaks, but not more than once a second while the server cannot be reached.
/// Callers fall back to the pool whenever it offers none.
final class HeadConnection: Sendable {
    private struct State {
        var connection: PostgresConnection?
        var connecting = false
        var retryAfter = ContinuousClock.Instant.now
        var closed = false
    }

    private let location: PostgresLocation
    private let state = Mutex(State())

    init(location: PostgresLocation) { self.location = location }

    /// A storage dropped without being closed (a start that failed half way) still closes its connection: the
    /// connection is kept until it has closed, as PostgresNIO requires.
    deinit {
        guard let connection = state.withLock({ $0.connection }), !connection.isClosed else { return }
        connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
    }

    /// The open connection, or nil while there is none. The first caller to find none connects one and waits for
    /// it (unless a try failed within the last second); callers meanwhile get nil.
    func connection(logger: Logger) async -> PostgresConnection? {
        let (ready, connect) = state.withLock { state -> (PostgresConnection?, Bool) in
            if let connection = state.connection, !connection.isClosed { return (connection, false) }
            state.connection = nil
            guard !state.closed, !state.connecting, ContinuousClock.now >= state.retryAfter else { return (nil, false) }
            state.connecting = true
            return (nil, true)
        }
        if connect {
            do {
                let configuration = try location.connectionConfiguration(searchPath: true)
                // Every request's catch-up may wait for this connection: one that does not come within the lease's
                // time is given up (closed when it comes after all), and the pool serves the read meanwhile.
                let late = LateConnection()
                guard let connection = try await bounded(PostgresStorage.leaseTimeout, {
                    let connection = try await PostgresConnection.connect(configuration: configuration, id: 3, logger: logger)
                    if late.arrived(connection) { try? await connection.close() }
                    return connection
                }) else {
                    if let stray = late.giveUp() { try? await stray.close() }
                    throw StorageUnavailable(reason: "no connection for the event log's head within \(PostgresStorage.leaseTimeout)")
                }
                let kept = state.withLock { state -> Bool in
                    state.connecting = false
                    guard !state.closed else { return false }
                    state.connection = connection
                    return true
                }
                if !kept { try? await connection.close() }
                return kept ? connection : nil
            } catch {
                state.withLock { state in
                    state.connecting = false
                    state.retryAfter = .now + .seconds(1)
                }
                logger.debug("Cannot connect for the event log's head", metadata: ["error": "\(PostgresStorage.describe(error))"])
            }
        }
        return ready
    }

    /// A read on `connection` failed: it is closed and replaced on a later call.
    func failed(_ connection: PostgresConnection) async {
        state.withLock { state in
            if state.connection === connection { state.connection = nil }
        }
        try? await connection.close()
    }

    func close() async {
        let connection = state.withLock { state -> PostgresConnection? in
            state.closed = true
            defer { state.connection = nil }
            return state.connection
        }
        try? await connection?.close()
    }
}

/// A connection that may come after its caller gave up waiting (``HeadConnection``): it is then closed, by whichever
/// of the two sides finds the other's mark.
private final class LateConnection: Sendable {
    private enum State {
        case waiting
        case arrived(PostgresConnection)
        case givenUp
    }

    private let state = Mutex(State.waiting)

    /// Whether the caller gave up before `connection` came (then the connecting side closes it).
    func arrived(_ connection: PostgresConnection) -> Bool {
        state.withLock { state in
            if case .givenUp = state { return true }
            state = .arrived(connection)
            return false
        }
    }

    /// The caller gives up: a connection that came meanwhile, which the caller closes.
    func giveUp() -> PostgresConnection? {
        state.withLock { state in
            defer { state = .givenUp }
            if case .arrived(let connection) = state { return connection }
            return nil
        }
    }
}
