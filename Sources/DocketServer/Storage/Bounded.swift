import Synchronization

/// Runs `body` and waits for it at most `limit`: its result, or nil when it has not finished by then (the body is
/// then cancelled). Unlike a task group, the caller never waits for the body to end: an await that ignores
/// cancellation (a database driver's reply that never comes) holds up only the body's own task, which ends when
/// what it waits for fails (for a connection, when it is closed). A cancelled caller gets `CancellationError` at once.
func bounded<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    let race = BoundedRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.begin(continuation, limit: limit, body)
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The state of one ``bounded(_:_:)``: whichever of the body, the deadline (an alarm, ``Alarms``) and the caller's
/// cancellation comes first resumes the caller; the others find it resumed.
private final class BoundedRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T?, any Error>?
        var finished: Result<T?, any Error>?
        var work: Task<Void, Never>?
        var alarm: Alarms.Alarm?
    }

    private let state = Mutex(State())

    func begin(_ continuation: CheckedContinuation<T?, any Error>, limit: Duration, _ body: @escaping @Sendable () async throws -> T) {
        // Cancelled before it began: answered at once.
        if let finished = state.withLock({ state -> Result<T?, any Error>? in
            if state.finished == nil { state.continuation = continuation }
            return state.finished
        }) {
            continuation.resume(with: finished)
            return
        }
        let work = Task {
            do {
                finish(.success(try await body()))
            } catch {
                finish(.failure(error))
            }
        }
        let alarm = Alarms.shared.set(after: limit) { self.finish(.success(nil)) }
        let late = state.withLock { state -> Bool in
            state.work = work
            state.alarm = alarm
            return state.finished != nil
        }
        if late {
            work.cancel()
            Alarms.shared.cancel(alarm)
        }
    }

    func finish(_ result: Result<T?, any Error>) {
        let (continuation, work, alarm) = state.withLock {
            state -> (CheckedContinuation<T?, any Error>?, Task<Void, Never>?, Alarms.Alarm?) in
            guard state.finished == nil else { return (nil, nil, nil) }
            state.finished = result
            defer { state.continuation = nil }
            return (state.continuation, state.work, state.alarm)
        }
        work?.cancel()
        if let alarm { Alarms.shared.cancel(alarm) }
        continuation?.resume(with: result)
    }
}
