import Foundation
import Synchronization

extension OfflineStore {
    /// Keeps the store in step with the server until the task is cancelled: syncs at once, after every local write,
    /// every `interval` while all is sent (to pull the server's changes), and, while the server cannot be reached,
    /// again after `retry`, doubling up to `maximumRetry`: so the first retry after a short outage's end comes within
    /// `maximumRetry` of it, without waiting for a new local write. An outage longer than a minute is retried less
    /// and less often, up to every `longestRetry` (``networkChanged()`` still syncs at once), and every wait is drawn
    /// at random between half of it and all of it, so that many clients of one server do not all return in step.
    /// After a 401 it waits for ``signedIn()``. `onReport` hears every sync's report (and the error of a sync that
    /// could not run).
    public func keepSynced(
        interval: Duration = .seconds(30), retry: Duration = .milliseconds(100), maximumRetry: Duration = .seconds(1),
        longestRetry: Duration = .seconds(30), onReport: @Sendable (Result<SyncReport, any Error>) -> Void = { _ in }
    ) async {
        var schedule = RetrySchedule(first: retry, maximum: maximumRetry, longest: longestRetry)
        while !Task.isCancelled {
            let wait: Duration
            do {
                let report = try await sync()
                onReport(.success(report))
                if report.unreachable != nil {
                    wait = schedule.next(now: .now)
                } else {
                    schedule.reset()
                    // Signed out: nothing is tried again until the app says the user signed in (or the interval).
                    wait = interval
                }
            } catch is CancellationError {
                return
            } catch {
                onReport(.failure(error))
                wait = schedule.next(now: .now)
            }
            await nudge.wait(upTo: wait)
        }
    }

    /// Tells ``keepSynced(interval:retry:maximumRetry:onReport:)`` to sync now (the user signed in again, the
    /// network came back).
    public func signedIn() { nudge.signal() }

    /// The same, when the platform says the network is reachable again.
    public func networkChanged() { nudge.signal() }
}

/// How long keepSynced waits before trying an unreachable server again: `first`, doubling up to `maximum`; once an
/// outage has lasted ``patience``, doubling on up to `longest`. Each wait is drawn between half of it and all of it.
struct RetrySchedule {
    static let patience: Duration = .seconds(60)
    let first: Duration
    let maximum: Duration
    let longest: Duration
    private var delay: Duration
    private var since: ContinuousClock.Instant? = nil

    init(first: Duration, maximum: Duration, longest: Duration) {
        self.first = max(.milliseconds(1), first)
        self.maximum = max(self.first, maximum)
        self.longest = max(self.maximum, longest)
        delay = self.first
    }

    /// The wait after another failed attempt at `now`.
    mutating func next(now: ContinuousClock.Instant, random: Double = Double.random(in: 0.5...1)) -> Duration {
        let began = since ?? now
        since = began
        let current = delay
        let cap = now - began >= Self.patience ? longest : maximum
        delay = min(delay * 2, cap)
        let (seconds, attoseconds) = current.components
        let milliseconds = Double(seconds) * 1000 + Double(attoseconds / 1_000_000_000_000_000)
        return .milliseconds(Int((milliseconds * min(1, max(0.5, random))).rounded()))
    }

    /// The server answered: the next outage starts over.
    mutating func reset() {
        delay = first
        since = nil
    }
}

/// Wakes one waiter early; a signal with nobody waiting is kept for the next wait.
final class Nudge: Sendable {
    private struct State {
        var signalled = false
        var waiter: (id: Int, continuation: CheckedContinuation<Void, Never>)? = nil
        var nextID = 0
        /// A wait whose time ran out before it began waiting (its task was held up between starting the timer and
        /// waiting): it returns at once instead of waiting for a signal that may never come.
        var endedEarly: Int? = nil
    }

    private let state = Mutex(State())
    /// For tests: blocks the waiting thread this long between starting a wait's timer and waiting, as a busy machine
    /// can, so that the timer may run out first.
    private let holdUp: Duration?

    init(holdUp: Duration? = nil) {
        self.holdUp = holdUp
    }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.signalled = true
                return nil
            }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }

    /// Returns after `duration`, at a signal, or when the task is cancelled, whichever is first.
    func wait(upTo duration: Duration) async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        let timer = Task { [weak self] in
            do { try await Task.sleep(for: duration) } catch { return }
            self?.end(id)
        }
        defer { timer.cancel() }
        if let holdUp { Self.block(for: holdUp) }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.signalled || Task.isCancelled || state.endedEarly == id {
                        state.signalled = false
                        state.endedEarly = nil
                        return true
                    }
                    state.waiter = (id, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            self.end(id)
        }
    }

    /// Holds the calling thread (for ``holdUp``).
    private static func block(for duration: Duration) {
        let (seconds, attoseconds) = duration.components
        Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// Ends the wait `id`, if it is still the one waiting; a wait that has not begun yet returns as soon as it does.
    private func end(_ id: Int) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                if id == state.nextID { state.endedEarly = id }
                return nil
            }
            guard waiter.id == id else { return nil }
            state.waiter = nil
            return waiter.continuation
        }
        waiter?.resume()
    }
}
