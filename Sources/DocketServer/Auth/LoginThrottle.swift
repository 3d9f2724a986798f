import Foundation
import Synchronization

/// Slows down password guessing: failed logins are counted per user name *from one client address* and per
/// client address; past a free allowance each further failure doubles the wait before the next attempt is
/// even checked, up to a temporary lock of ``Policy/maximumDelay``.
///
/// Counting user names per address (rather than globally) means nobody can lock a user out by failing logins
/// with that user's name from elsewhere: a successful login is never slowed by someone else's failures. A
/// success clears the counts of its user name from that address.
///
/// With ``shared`` (PostgreSQL, where several docketd may serve one site) the counts are also kept in the
/// database: a guesser spread over instances is throttled as one. Each instance still keeps what it learned in
/// memory, so a throttled flood is refused without touching the database.
final class LoginThrottle: Sendable {
    typealias Policy = LoginThrottlePolicy

    private struct Entry {
        var failures: Int
        var lastFailure: ContinuousClock.Instant
        var blockedUntil: ContinuousClock.Instant
    }

    let policy: Policy
    private let clock = ContinuousClock()
    private let entries = Mutex<[String: Entry]>([:])
    /// Beyond this many tracked keys, expired ones are dropped (and, if still full, the oldest).
    private let capacity = 100_000

    /// Counts shared with other instances through the database; nil for this instance's memory only.
    let shared: SharedLoginFailures?

    /// Where refusals and failures are counted; nil counts nothing.
    let metrics: ServerMetrics?

    init(policy: Policy = Policy(), shared: SharedLoginFailures? = nil, metrics: ServerMetrics? = nil) {
        self.policy = policy
        self.shared = shared
        self.metrics = metrics
    }

    /// ``delay(userName:address:)``, then, when counts are shared, the blocks other instances recorded (which this
    /// instance then remembers). A database that cannot be read blocks nobody: the password check reports it.
    func check(userName: String, address: String) async -> Duration? {
        let wait = await blockingWait(userName: userName, address: address)
        if wait != nil { metrics?.loginThrottled() }
        return wait
    }

    private func blockingWait(userName: String, address: String) async -> Duration? {
        if let wait = delay(userName: userName, address: address) { return wait }
        guard let shared else { return nil }
        let keys = [Self.userKey(userName, address), Self.addressKey(address)]
        let now = SharedLoginFailures.now()
        guard let blocks = try? await shared.blocks(keys.map(Self.hash), now: now), !blocks.isEmpty else { return nil }
        var longest: Duration? = nil
        for key in keys {
            guard let until = blocks[Self.hash(key)] else { continue }
            let wait = Duration.milliseconds(until - now)
            remember(key, blockedFor: wait)
            longest = max(longest ?? wait, wait)
        }
        return longest
    }

    /// ``recordFailure(userName:address:)``, and the same count in the database when shared.
    func fail(userName: String, address: String) async {
        metrics?.loginFailed()
        recordFailure(userName: userName, address: address)
        guard let shared else { return }
        let now = SharedLoginFailures.now()
        let forget = now - Int(policy.memory.components.seconds * 1000)
        for (key, free) in [(Self.userKey(userName, address), policy.userFailures),
                            (Self.addressKey(address), policy.addressFailures)] {
            guard let failures = try? await shared.count(Self.hash(key), now: now, forgetBefore: forget), failures > free else {
                continue
            }
            let wait = wait(afterFailures: failures, free: free)
            try? await shared.block(Self.hash(key), until: now + Int(wait.components.seconds * 1000))
            remember(key, blockedFor: wait)
        }
    }

    /// ``recordSuccess(userName:address:)``, also in the database when shared.
    func succeed(userName: String, address: String) async {
        recordSuccess(userName: userName, address: address)
        try? await shared?.clear(Self.hash(Self.userKey(userName, address)))
    }

    /// 1 s, 2 s, 4 s … doubling per failure past the allowance, up to the lock.
    private func wait(afterFailures failures: Int, free: Int) -> Duration {
        let exponent = min(max(failures - free - 1, 0), 30)
        return min(policy.firstDelay * (1 << exponent), policy.maximumDelay)
    }

    /// Keeps a block learned from the database (or counted there) in memory.
    private func remember(_ key: String, blockedFor wait: Duration) {
        let now = clock.now
        entries.withLock { entries in
            if entries.count >= capacity { prune(&entries, now: now) }
            var entry = entries[key] ?? Entry(failures: 0, lastFailure: now, blockedUntil: now)
            entry.blockedUntil = max(entry.blockedUntil, now + wait)
            entries[key] = entry
        }
    }

    private static func hash(_ key: String) -> String { Digest.sha256Hex(key.utf8) }

    /// How long the caller must wait before this attempt may be checked; nil when it may go ahead now.
    func delay(userName: String, address: String) -> Duration? {
        let now = clock.now
        return entries.withLock { entries in
            let waits = [Self.userKey(userName, address), Self.addressKey(address)].compactMap { key -> Duration? in
                guard let entry = entries[key], entry.blockedUntil > now else { return nil }
                return entry.blockedUntil - now
            }
            return waits.max()
        }
    }

    /// Counts a failed attempt.
    func recordFailure(userName: String, address: String) {
        let now = clock.now
        entries.withLock { entries in
            if entries.count >= capacity { prune(&entries, now: now) }
            for (key, free) in [(Self.userKey(userName, address), policy.userFailures),
                                (Self.addressKey(address), policy.addressFailures)] {
                var entry = entries[key] ?? Entry(failures: 0, lastFailure: now, blockedUntil: now)
                if now - entry.lastFailure > policy.memory { entry.failures = 0 }
                entry.failures = min(entry.failures + 1, 1_000)
                entry.lastFailure = now
                if entry.failures > free { entry.blockedUntil = now + wait(afterFailures: entry.failures, free: free) }
                entries[key] = entry
            }
        }
    }

    /// Clears the user name's count from this address after a successful login.
    func recordSuccess(userName: String, address: String) {
        _ = entries.withLock { $0.removeValue(forKey: Self.userKey(userName, address)) }
    }

    private func prune(_ entries: inout [String: Entry], now: ContinuousClock.Instant) {
        entries = entries.filter { now - $0.value.lastFailure <= policy.memory || $0.value.blockedUntil > now }
        if entries.count >= capacity {
            let oldest = entries.sorted { $0.value.lastFailure < $1.value.lastFailure }.prefix(entries.count / 2)
            for (key, _) in oldest { entries[key] = nil }
        }
    }

    private static func userKey(_ userName: String, _ address: String) -> String {
        "u\u{0}" + userName.lowercased() + "\u{0}" + address
    }

    private static func addressKey(_ address: String) -> String { "a\u{0}" + address }
}

/// How failed logins are throttled (see `docketd serve --help` and docs/configuration.md).
public struct LoginThrottlePolicy: Sendable {
    /// Failures of one user name from one client address before delays start (`--login-free-failures`).
    public var userFailures: Int
    /// Failures from one client address, whatever the user names, before delays start.
    public var addressFailures: Int
    /// The longest delay, which acts as a temporary lock (`--login-max-delay`).
    public var maximumDelay: Duration
    /// The wait after the first failure past the allowance; each further failure doubles it.
    public var firstDelay: Duration = .seconds(1)
    /// Counts are forgotten this long after the last failure.
    public var memory: Duration
    /// How long a refused (throttled) attempt waits before its 429 is sent, at most its `Retry-After`. A client
    /// that floods wrong passwords then gets one answer per connection per this long instead of as many as the
    /// server can write, which would take the processors from everybody else. The wait costs no thread.
    public var throttledAnswerDelay: Duration = .seconds(1)

    public init(
        userFailures: Int = 5, addressFailures: Int = 50, maximumDelay: Duration = .seconds(900),
        memory: Duration = .seconds(1800)
    ) {
        self.userFailures = max(0, userFailures)
        self.addressFailures = max(0, addressFailures)
        self.maximumDelay = maximumDelay
        self.memory = memory
    }
}
