import Synchronization

/// The one clock of every GraphQL socket (as ``LiveTickService`` is for event streams), rather than a timer per
/// socket: every second it looks whether a logout, revocation or change to users or roles happened (two
/// counters), and if so checks every acknowledged socket's credential at once; every heartbeat it checks them all
/// (expiry) and sends a keep-alive (`ka` in the legacy protocol, a WebSocket ping in the current one). It runs
/// while sockets are open.
final class SocketClock: Sendable {
    private struct State {
        var sockets: [ObjectIdentifier: GraphQLSocketConnection] = [:]
        var running = false
    }

    private let state = Mutex(State())

    func add(_ socket: GraphQLSocketConnection, server: GraphQLSocketServer) {
        let start = state.withLock { state in
            state.sockets[ObjectIdentifier(socket)] = socket
            defer { state.running = true }
            return !state.running
        }
        if start { Task { await self.run(server: server) } }
    }

    func remove(_ socket: GraphQLSocketConnection) {
        _ = state.withLock { $0.sockets.removeValue(forKey: ObjectIdentifier(socket)) }
    }

    private func run(server: GraphQLSocketServer) async {
        let heartbeat = max(.milliseconds(10), server.heartbeat)
        let poll = min(heartbeat, .seconds(1))
        let credentials = server.credentials
        var checkedAt = (credentials.authenticator.credentialGeneration, credentials.oauth.revocationGeneration)
        var sinceHeartbeat = Duration.zero
        while true {
            try? await Task.sleep(for: poll)
            sinceHeartbeat += poll
            let beat = sinceHeartbeat >= heartbeat
            if beat { sinceHeartbeat = .zero }
            let now = (credentials.authenticator.credentialGeneration, credentials.oauth.revocationGeneration)
            let changed = now != checkedAt
            checkedAt = now
            let sockets = state.withLock { state -> [GraphQLSocketConnection]? in
                if state.sockets.isEmpty {
                    state.running = false
                    return nil
                }
                return Array(state.sockets.values)
            }
            guard let sockets else { return }
            guard beat || changed else { continue }
            // A bounded number at once, so that one slow lookup holds up no one.
            await withTaskGroup(of: Void.self) { group in
                for (index, socket) in sockets.enumerated() {
                    if index >= 64 { await group.next() }
                    group.addTask { await socket.check(beat: beat) }
                }
            }
        }
    }
}
