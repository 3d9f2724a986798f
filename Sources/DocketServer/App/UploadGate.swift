import Synchronization

/// Uploads in progress on this instance, bounded: at most `total` at once (more are refused as ``Refusal/busy``,
/// which each dialect answers 503 with `Retry-After`) and at most `perUser` of one user (``Refusal/userBusy``,
/// answered 429 with `Retry-After`). An upload holds its place from before its body is read until it is stored,
/// so a burst of uploads can hold at most `total` bodies in memory, and one user cannot take every place.
final class UploadGate: Sendable {
    enum Refusal: Error, Equatable {
        /// Every place of the instance is taken.
        case busy
        /// The user already has `perUser` uploads in progress.
        case userBusy

        /// Seconds a client is asked to wait before trying again.
        static let retryAfter = "2"
    }

    private struct State {
        var total = 0
        var perUser: [String: Int] = [:]
    }

    let total: Int
    let perUser: Int
    private let state = Mutex(State())

    init(total: Int, perUser: Int) {
        self.total = max(1, total)
        self.perUser = max(1, perUser)
    }

    /// Runs `body` holding one place for `user`; refuses at once, without running it, when there is none.
    func admit<T>(user: String, _ body: () async throws -> T) async throws -> T {
        try state.withLock { state throws(Refusal) in
            guard state.perUser[user, default: 0] < perUser else { throw .userBusy }
            guard state.total < total else { throw .busy }
            state.total += 1
            state.perUser[user, default: 0] += 1
        }
        defer {
            state.withLock { state in
                state.total -= 1
                let left = state.perUser[user, default: 1] - 1
                state.perUser[user] = left > 0 ? left : nil
            }
        }
        return try await body()
    }

    /// Uploads in progress (for tests).
    var inProgress: Int { state.withLock { $0.total } }
}
