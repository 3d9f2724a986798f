import Synchronization

/// Deadlines of the request path (a pooled connection's lease, a lock's wait, a read that must not hang), watched by
/// one task for the whole process instead of a sleeping task each.
///
/// A `Task.sleep` costs a task and, on Linux, a timer of Dispatch's that stays armed until its deadline even when the
/// sleep is cancelled long before: a POST on PostgreSQL armed three of them for deadlines seconds away, and the
/// timer heap and its thread were a tenth of docketd's CPU per write (docs/performance.md). Here setting an alarm
/// and calling it off are a lock and a dictionary entry; one task looks at the alarms every ``resolution`` while any
/// is set, and none runs while none is. An alarm goes off at its deadline or up to one ``resolution`` after it.
final class Alarms: Sendable {
    /// The alarms of the process.
    static let shared = Alarms(resolution: .milliseconds(20))

    /// An alarm that was set: ``Alarms/cancel(_:)`` calls it off.
    struct Alarm: Sendable {
        fileprivate let id: Int
    }

    private struct Entry {
        let deadline: ContinuousClock.Instant
        let action: @Sendable () -> Void
    }

    private struct State {
        var entries: [Int: Entry] = [:]
        var nextID = 0
        /// Whether the watching task runs (it ends when it finds no alarm set).
        var watching = false
    }

    /// How often set alarms are looked at.
    let resolution: Duration
    private let state = Mutex(State())

    init(resolution: Duration) {
        self.resolution = resolution
    }

    /// Runs `action` once `delay` has passed (on the watching task: it must be quick and must not block), unless
    /// the alarm is called off first.
    @discardableResult
    func set(after delay: Duration, _ action: @escaping @Sendable () -> Void) -> Alarm {
        set(at: ContinuousClock.now + delay, action)
    }

    /// Runs `action` at `deadline` (see ``set(after:_:)``).
    @discardableResult
    func set(at deadline: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> Alarm {
        let (id, start) = state.withLock { state -> (Int, Bool) in
            let id = state.nextID
            state.nextID &+= 1
            state.entries[id] = Entry(deadline: deadline, action: action)
            defer { state.watching = true }
            return (id, !state.watching)
        }
        if start {
            // Detached: the watch belongs to no request (it must not inherit one's cancellation or task-locals).
            Task.detached { await self.watch() }
        }
        return Alarm(id: id)
    }

    /// Calls `alarm` off: true when it had not gone off yet (its action will not run).
    @discardableResult
    func cancel(_ alarm: Alarm) -> Bool {
        state.withLock { $0.entries.removeValue(forKey: alarm.id) != nil }
    }

    /// How many alarms are set (for tests).
    var pending: Int { state.withLock { $0.entries.count } }

    /// Whether the watching task runs (for tests).
    var isWatching: Bool { state.withLock { $0.watching } }

    private func watch() async {
        while true {
            // Not cancellable (detached, never cancelled): a sleep that ends early only looks sooner.
            try? await Task.sleep(for: resolution)
            let now = ContinuousClock.now
            let due = state.withLock { state -> [Entry]? in
                if state.entries.isEmpty {
                    state.watching = false
                    return nil
                }
                let due = state.entries.filter { $0.value.deadline <= now }
                for id in due.keys { state.entries[id] = nil }
                return Array(due.values)
            }
            guard let due else { return }
            for entry in due.sorted(by: { $0.deadline < $1.deadline }) { entry.action() }
        }
    }
}
