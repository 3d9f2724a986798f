import HummingbirdBcrypt
import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// bcrypt hashing and verification on a thread pool of their own.
///
/// A bcrypt check costs tens to hundreds of milliseconds by design. Run on the pool that SQLite and request
/// handling share, a flood of wrong passwords would stall every other user; here it can only fill its own
/// threads. Verifications waiting for a thread are bounded: past ``queueLimit`` a verification is refused at
/// once with ``Busy`` (answered 503 with `Retry-After`) instead of queueing without end. Hashing new passwords
/// (an admin setting one) is not refused, only queued.
struct PasswordHasher: Sendable {
    /// The pool is full: the caller should answer "try again later".
    struct Busy: Error {}

    /// The bcrypt cost (work factor); 12 in production, lower in tests.
    let cost: UInt8
    /// Verifications allowed to wait or run at once.
    let queueLimit: Int
    private let pool: NIOThreadPool
    private let inFlight: Counter
    /// Checks and hashes running or waiting for a thread now.
    var queued: Int { inFlight.value.load(ordering: .relaxed) }
    /// A hash of a random password at the configured cost: unknown user names are checked against it, so
    /// that they cost as much as a wrong password and response times do not tell which names exist.
    private let decoy: Decoy

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    private final class Decoy: Sendable {
        let hash = Mutex<String?>(nil)
    }

    /// Starts the pool; ``shutdown()`` stops it.
    /// - Parameters:
    ///   - threads: Threads that run bcrypt; by default half the processors (at least one), so hashing can
    ///     never take every core from request handling.
    init(cost: UInt8, threads: Int? = nil, queueLimit: Int = 64) {
        self.cost = cost
        self.queueLimit = max(1, queueLimit)
        let count = threads ?? max(1, System.coreCount / 2)
        pool = NIOThreadPool(numberOfThreads: max(1, count))
        pool.start()
        inFlight = Counter()
        decoy = Decoy()
    }

    /// Stops the threads once the work given to them is done.
    func shutdown() async {
        try? await pool.shutdownGracefully()
    }

    /// A hash made on a pool of its own, started and stopped for it (for a tool that hashes once).
    static func hashOnce(_ password: String, cost: UInt8) async -> String {
        let hasher = PasswordHasher(cost: cost, threads: 1, queueLimit: 1)
        let hash = await hasher.hash(password)
        await hasher.shutdown()
        return hash
    }

    func hash(_ password: String) async -> String {
        let cost = self.cost
        return (try? await pool.runIfActive {
            Self.yieldToRequests()
            return Bcrypt.hash(password, cost: cost)
        }) ?? Bcrypt.hash(password, cost: cost)
    }

    /// Lowers the scheduling priority of the calling bcrypt thread (nice 10, on Linux per thread), so that when
    /// the processors are busy, request handling and the database come first and logins wait. Idempotent and
    /// cheap next to a bcrypt check.
    private static func yieldToRequests() {
        #if os(Linux)
            // Glibc's gettid() is not visible to Swift; /proc/thread-self names the thread: "<pid>/task/<tid>".
            var buffer = [CChar](repeating: 0, count: 64)
            let length = readlink("/proc/thread-self", &buffer, buffer.count - 1)
            guard length > 0, let tid = id_t(String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                .split(separator: "/").last ?? "")
            else { return }
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), tid, 10)
        #endif
    }

    /// Whether `password` matches `hash`; throws ``Busy`` when too many verifications are waiting.
    func verify(_ password: String, hash: String) async throws(Busy) -> Bool {
        guard hash.hasPrefix("$2") else { return false }
        return try await run { Bcrypt.verify(password, hash: hash) }
    }

    /// Spends the time of a verification without a real hash (for unknown or disabled accounts); always false.
    func verifyDecoy(_ password: String) async throws(Busy) {
        let cost = self.cost
        let decoy = self.decoy
        _ = try await run {
            let hash = decoy.hash.withLock { stored in
                if let stored { return stored }
                let made = Bcrypt.hash(SysIDDecoy.random(), cost: cost)
                stored = made
                return made
            }
            return Bcrypt.verify(password, hash: hash)
        }
    }

    private func run(_ work: @escaping @Sendable () -> Bool) async throws(Busy) -> Bool {
        let limit = queueLimit
        let admitted = inFlight.value.add(1, ordering: .acquiringAndReleasing).newValue <= limit
        defer { inFlight.value.subtract(1, ordering: .acquiringAndReleasing) }
        guard admitted else { throw Busy() }
        do {
            return try await pool.runIfActive {
                Self.yieldToRequests()
                return work()
            }
        } catch {
            // The pool only fails when shut down: the server is stopping.
            throw Busy()
        }
    }
}

/// A random password for the decoy hash.
private enum SysIDDecoy {
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return String((0..<24).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement(using: &generator)! })
    }
}
