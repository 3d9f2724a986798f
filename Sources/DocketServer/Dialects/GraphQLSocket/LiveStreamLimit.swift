import Synchronization

/// Live streams (SSE streams and socket subscriptions) per user, bounded.
final class LiveStreamLimit: Sendable {
    let perUser: Int
    private let counts = Mutex<[String: Int]>([:])

    init(perUser: Int) { self.perUser = perUser }

    /// Streams and subscriptions open now, all users together.
    var open: Int { counts.withLock { $0.values.reduce(0, +) } }

    var refusal: String {
        "A user may follow at most \(perUser) live streams and subscriptions at once; end one, or retry shortly: the streams of a connection that closed are released as soon as it closes"
    }

    func reserve(for userID: String) -> Bool {
        counts.withLock { counts in
            guard counts[userID, default: 0] < perUser else { return false }
            counts[userID, default: 0] += 1
            return true
        }
    }

    func release(for userID: String) {
        counts.withLock { counts in
            counts[userID, default: 1] -= 1
            if counts[userID] == 0 { counts[userID] = nil }
        }
    }
}
