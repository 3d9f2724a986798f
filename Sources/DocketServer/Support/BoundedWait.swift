import Synchronization

/// Waits for `task` to finish, for at most `limit`, without cancelling it: true when it finished in time.
///
/// For shutdown, where a step that should be quick (giving up a lease, closing a pool) must not hold the process
/// forever when the database under it stopped answering. The task itself goes on after a timeout; what it holds is
/// released when the process ends.
func finished<T: Sendable>(_ task: Task<T, Never>, within limit: Duration) async -> Bool {
    await value(of: task, within: limit) != nil
}

/// `task`'s value, when it comes within `limit`; nil otherwise, and also at once when `cancellable` and the waiting
/// task is cancelled. `task` itself is not cancelled: that is the caller's choice.
func value<T: Sendable>(of task: Task<T, Never>, within limit: Duration, cancellable: Bool = false) async -> T? {
    let pending = Pending<T>()
    let wait = {
        await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            pending.begin(continuation)
            let timer = Task {
                do { try await Task.sleep(for: limit) } catch { return }
                pending.resume(nil)
            }
            Task {
                let outcome = await task.value
                timer.cancel()
                pending.resume(outcome)
            }
        }
    }
    guard cancellable else { return await wait() }
    return await withTaskCancellationHandler { await wait() } onCancel: { pending.resume(nil) }
}

/// The continuation of ``value(of:within:cancellable:)``, resumed once by whichever comes first (also when that came
/// before the wait began).
private final class Pending<T: Sendable>: Sendable {
    private let state = Mutex<(continuation: CheckedContinuation<T?, Never>?, early: T??)>((nil, nil))

    func begin(_ continuation: CheckedContinuation<T?, Never>) {
        let early = state.withLock { state -> T?? in
            if let early = state.early { return .some(early) }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(returning: early) }
    }

    func resume(_ outcome: T?) {
        let continuation = state.withLock { state -> CheckedContinuation<T?, Never>? in
            guard state.early == nil else { return nil }
            state.early = .some(outcome)
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: outcome)
    }
}
