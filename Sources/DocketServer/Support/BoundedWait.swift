import Synchronization

/// Waits for `task` to finish, for at most `limit`, without cancelling it: true when it finished in time.
///
/// For shutdown, where a step that should be quick (giving up a lease, closing a pool) must not hold the process
/// forever when the database under it stopped answering. The task itself goes on after a timeout; what it holds is
/// released when the process ends.
func finished<T: Sendable>(_ task: Task<T, Never>, within limit: Duration) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
        let pending = Pending(continuation)
        let resume: @Sendable (Bool) -> Void = { outcome in
            pending.continuation.withLock { $0.take() }?.resume(returning: outcome)
        }
        let timer = Task {
            try? await Task.sleep(for: limit)
            resume(false)
        }
        Task {
            _ = await task.value
            timer.cancel()
            resume(true)
        }
    }
}

/// The continuation of ``finished(_:within:)``, resumed once by whichever comes first.
private final class Pending: Sendable {
    let continuation: Mutex<CheckedContinuation<Bool, Never>?>
    init(_ continuation: CheckedContinuation<Bool, Never>) { self.continuation = Mutex(continuation) }
}
