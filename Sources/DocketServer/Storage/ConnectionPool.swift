import Synchronization

/// A fixed set of connections, each lent to one user at a time, first come first served.
///
/// SQLite keeps a read transaction open while any statement of its connection is running, so two reads that
/// shared a connection could see the snapshot of whichever began first: a read right after a commit might miss
/// that commit (a create answered 404 although it was written). Lending each connection exclusively means every
/// read starts its own snapshot, after every commit that finished before it.
final class ConnectionPool<Connection: Sendable>: Sendable {
    private struct State {
        var idle: [Connection]
        var waiters: [CheckedContinuation<Connection, Never>] = []
        var waiterHead = 0
    }

    private let state: Mutex<State>
    let all: [Connection]

    init(_ connections: [Connection]) {
        precondition(!connections.isEmpty, "a pool needs at least one connection")
        all = connections
        state = Mutex(State(idle: connections))
    }

    /// Runs `body` with a connection no one else uses meanwhile.
    func withConnection<T: Sendable>(_ body: (Connection) async throws -> T) async throws -> T {
        let connection = await acquire()
        defer { release(connection) }
        return try await body(connection)
    }

    private func acquire() async -> Connection {
        if let connection = state.withLock({ $0.idle.popLast() }) { return connection }
        return await withCheckedContinuation { continuation in
            // A connection may have come back between the check above and now.
            let ready = state.withLock { state -> Connection? in
                if let connection = state.idle.popLast() { return connection }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    private func release(_ connection: Connection) {
        let waiter = state.withLock { state -> CheckedContinuation<Connection, Never>? in
            guard state.waiterHead < state.waiters.count else {
                state.idle.append(connection)
                return nil
            }
            let next = state.waiters[state.waiterHead]
            state.waiterHead += 1
            if state.waiterHead > 64, state.waiterHead * 2 > state.waiters.count {
                state.waiters.removeFirst(state.waiterHead)
                state.waiterHead = 0
            }
            return next
        }
        waiter?.resume(returning: connection)
    }
}
