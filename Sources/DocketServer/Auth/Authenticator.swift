import Crypto
import DocketModel
import Foundation
import Synchronization

/// Verifies credentials and keeps sessions.
///
/// A bcrypt verification costs tens of milliseconds by design, so a successful Basic login is remembered for
/// a short time as an HMAC of the password under a per-process key (the password itself is never kept).
/// Sessions are random tokens carried in the `JSESSIONID` cookie, sliding for `sessionTimeout`.
actor Authenticator {
    private struct CachedCredential {
        var digest: Data
        var userID: String
        var expires: ContinuousClock.Instant
    }

    private struct Session {
        var userID: String
        var expires: ContinuousClock.Instant
    }

    private let users: UserDirectory
    private let hasher: PasswordHasher
    private let credentialTTL: Duration
    private let sessionTimeout: Duration
    private let key = Data(SysID.generate().utf8) + Data(SysID.generate().utf8)
    private let clock = ContinuousClock()
    private var credentials: [String: CachedCredential] = [:]
    private var sessions: [String: Session] = [:]
    private var sessionByUser: [String: String] = [:]
    private var callers: [String: (caller: Caller, expires: ContinuousClock.Instant)] = [:]
    private let changes = Atomic<Int>(0)
    private var seenChanges = 0
    /// Verifications under way, by credential digest: concurrent requests with the same credentials wait for
    /// one bcrypt check instead of each running their own.
    private var verifying: [Data: Task<String?, Never>] = [:]

    init(users: UserDirectory, hasher: PasswordHasher, credentialTTL: Duration, sessionTimeout: Duration) {
        self.users = users
        self.hasher = hasher
        self.credentialTTL = credentialTTL
        self.sessionTimeout = sessionTimeout
    }

    /// The caller for a user name and password, or nil when they are wrong (or the user is inactive or
    /// locked out).
    func authenticate(userName: String, password: String) async -> Caller? {
        dropStaleCaches()
        // A keyed hash (a per-process random prefix) is enough to compare credentials without keeping them.
        var hasher = SHA256()
        hasher.update(data: key)
        hasher.update(data: Data((userName + "\u{0}" + password).utf8))
        let digest = Data(hasher.finalize())
        let now = clock.now
        if let cached = credentials[userName], cached.expires > now, cached.digest == digest {
            return await caller(userID: cached.userID)
        }
        let verification: Task<String?, Never>
        if let pending = verifying[digest] {
            verification = pending
        } else {
            let (users, hasher) = (self.users, self.hasher)
            verification = Task {
                guard let account = try? await users.account(userName: userName), account.canLogIn,
                    await hasher.verify(password, hash: account.passwordHash)
                else { return nil }
                return account.userID
            }
            verifying[digest] = verification
        }
        let userID = await verification.value
        verifying[digest] = nil
        guard let userID else { return nil }
        credentials[userName] = CachedCredential(digest: digest, userID: userID, expires: clock.now + credentialTTL)
        return await caller(userID: userID)
    }

    /// Authenticates Basic credentials and returns the caller with their session token, in one actor hop.
    func login(userName: String, password: String) async -> (caller: Caller, sessionToken: String)? {
        guard let caller = await authenticate(userName: userName, password: password) else { return nil }
        return (caller, sessionToken(for: caller))
    }

    /// The caller for a bearer token's user with the session to carry in the cookie (nil when the presented
    /// cookie already is that user's session), in one actor hop.
    func bearerLogin(userID: String, presentedSession: String?) async -> (caller: Caller, sessionToken: String?)? {
        guard let caller = await caller(userID: userID) else { return nil }
        if let presentedSession, let session = sessions[presentedSession], session.userID == userID,
            session.expires > clock.now
        {
            sessions[presentedSession]?.expires = clock.now + sessionTimeout
            return (caller, nil)
        }
        return (caller, sessionToken(for: caller))
    }

    /// The session token for a caller: one live session per user, so clients that never keep cookies do
    /// not pile up sessions.
    func sessionToken(for caller: Caller) -> String {
        let now = clock.now
        if let token = sessionByUser[caller.userID], let session = sessions[token], session.expires > now {
            sessions[token]?.expires = now + sessionTimeout
            return token
        }
        let token = SysID.generate().uppercased()
        sessions[token] = Session(userID: caller.userID, expires: now + sessionTimeout)
        sessionByUser[caller.userID] = token
        if sessions.count > 10_000 { sessions = sessions.filter { $0.value.expires > now } }
        return token
    }

    /// The caller of a live session, extending it; nil for unknown or expired tokens.
    func caller(sessionToken token: String) async -> Caller? {
        let now = clock.now
        guard let session = sessions[token] else { return nil }
        guard session.expires > now else {
            sessions[token] = nil
            return nil
        }
        sessions[token]?.expires = now + sessionTimeout
        return await caller(userID: session.userID)
    }

    /// Forgets cached credentials and callers (after a change to users or roles). Synchronous, so the very
    /// next request sees the change: the caches are dropped on the actor's next use.
    nonisolated func invalidate() {
        changes.add(1, ordering: .relaxed)
    }

    /// Drops the caches when users or roles changed since they were filled.
    private func dropStaleCaches() {
        let current = changes.load(ordering: .relaxed)
        guard current != seenChanges else { return }
        seenChanges = current
        credentials = [:]
        callers = [:]
    }

    /// The caller for a user sys_id (cached briefly); nil when the user is gone or inactive.
    func caller(userID: String) async -> Caller? {
        dropStaleCaches()
        let now = clock.now
        if let cached = callers[userID], cached.expires > now { return cached.caller }
        guard let caller = try? await users.caller(userID: userID) else { return nil }
        callers[userID] = (caller, now + credentialTTL)
        return caller
    }
}
