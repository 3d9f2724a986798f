import Crypto
import DocketModel
import Foundation
import Synchronization

/// Why a login did not produce a caller.
enum LoginFailure: Error, Sendable, Equatable {
    /// Wrong user name or password, or an account that may not log in.
    case rejected
    /// Too many recent failures from this client for this user name (or from this client): try again after
    /// the delay.
    case throttled(retryAfter: Duration)
    /// Password checking is at capacity: try again shortly.
    case busy
    /// The user store could not be read (a database error): not the caller's fault.
    case unavailable

    /// Whole seconds to wait before trying again (`Retry-After`), rounded up; nil for a rejection.
    var retryAfter: String? {
        switch self {
        case .throttled(let wait): String(Self.seconds(wait))
        case .busy: "1"
        case .unavailable: StorageUnavailable.retryAfter
        case .rejected: nil
        }
    }

    /// A wait in whole seconds, rounded up, at least one.
    static func seconds(_ wait: Duration) -> Int64 {
        max(1, wait.components.seconds + (wait.components.attoseconds > 0 ? 1 : 0))
    }

    /// Holds back the answer to a throttled attempt (see ``LoginThrottlePolicy/throttledAnswerDelay``).
    func holdBack(_ authenticator: Authenticator) async {
        guard case .throttled(let wait) = self else { return }
        let delay = min(wait, authenticator.throttledAnswerDelay)
        if delay > .zero { try? await Task.sleep(for: delay) }
    }
}

/// Verifies credentials and keeps sessions.
///
/// A bcrypt verification costs tens of milliseconds by design, so a successful Basic login is remembered for
/// a short time as an HMAC of the password under a per-process key (the password itself is never kept).
/// Sessions are random tokens carried in the `JSESSIONID` cookie, sliding for `sessionTimeout`. They live in the
/// database (``SessionStore``), so they survive a restart and work on every docketd sharing it; memory holds
/// them for speed. Where other processes share the database it decides each cookie, since one of them may
/// have ended the session.
actor Authenticator: ChangeObserver {
    private struct CachedCredential {
        var digest: Data
        /// The user and the stored hash the password was checked against.
        var proof: UserDirectory.CredentialProof
        var expires: ContinuousClock.Instant
    }

    private struct Session {
        var userID: String
        var expires: ContinuousClock.Instant
        /// The expiry last written to the database (wall-clock seconds); written again at most once a minute.
        var storedExpires: Int
    }

    private let users: UserDirectory
    private let hasher: PasswordHasher
    private let throttle: LoginThrottle
    nonisolated let throttledAnswerDelay: Duration
    private let credentialTTL: Duration
    private let sessionTimeout: Duration
    private let key = Data(SysID.generate().utf8) + Data(SysID.generate().utf8)
    private let clock = ContinuousClock()
    private var credentials: [String: CachedCredential] = [:]
    private var sessions: [String: Session] = [:]
    /// The session handed to each client of a user (see ``sessionToken(for:client:)``), by user and client.
    private var sessionByClient: [ClientKey: String] = [:]

    private struct ClientKey: Hashable {
        let userID: String
        let client: String
    }
    private var callers: [String: (caller: Caller, expires: ContinuousClock.Instant)] = [:]
    private let changes = Atomic<Int>(0)
    private let logouts = Atomic<Int>(0)
    private var seenChanges = 0
    /// Users whose credentials or standing changed (password, lock, deactivation): their sessions end on the
    /// actor's next use. Filled synchronously by the write path's listener.
    private let endedUsers = Mutex<Set<String>>([])
    /// Password checks under way, by keyed digest, with the count of changes when each began: concurrent requests
    /// with the same credentials wait for one bcrypt check instead of each running their own.
    private var verifying: [Data: (check: Task<Result<UserDirectory.CredentialProof, LoginFailure>, Never>, changes: Int)] = [:]
    private let sessionStore: SessionStore

    init(
        users: UserDirectory, hasher: PasswordHasher, throttle: LoginThrottle = LoginThrottle(),
        credentialTTL: Duration, sessionTimeout: Duration
    ) {
        self.users = users
        self.hasher = hasher
        self.throttle = throttle
        self.throttledAnswerDelay = throttle.policy.throttledAnswerDelay
        self.credentialTTL = credentialTTL
        self.sessionTimeout = sessionTimeout
        self.sessionStore = SessionStore(storage: users.store.storage)
    }

    /// The caller for a user name and password from a client address.
    func authenticate(userName: String, password: String, address: String) async throws(LoginFailure) -> Caller {
        try await proving(userName: userName, password: password, address: address).caller
    }

    /// The caller for a user name and password, with what the check rested on: a write that issues a credential
    /// on its strength checks it again in its transaction (``UserDirectory/holds(_:_:)``).
    func proving(userName: String, password: String, address: String) async throws(LoginFailure)
        -> (caller: Caller, proof: UserDirectory.CredentialProof)
    {
        dropStaleCaches()
        // A keyed hash (a per-process random prefix) is enough to compare credentials without keeping them.
        var hasher = SHA256()
        hasher.update(data: key)
        hasher.update(data: Data((userName + "\u{0}" + password).utf8))
        let digest = Data(hasher.finalize())
        let now = clock.now
        // Credentials proven right a moment ago skip the throttle: someone else's failures never slow them.
        if let cached = credentials[userName], cached.expires > now, cached.digest == digest,
            let caller = try await knownCaller(userID: cached.proof.userID)
        {
            return (caller, cached.proof)
        }
        if let wait = await throttle.check(userName: userName, address: address) { throw .throttled(retryAfter: wait) }
        let verification: (check: Task<Result<UserDirectory.CredentialProof, LoginFailure>, Never>, changes: Int)
        if let pending = verifying[digest] {
            verification = pending
        } else {
            let (users, hasher) = (self.users, self.hasher)
            verification = (
                Task { await Self.verify(userName: userName, password: password, users: users, hasher: hasher) },
                changes.load(ordering: .acquiring)
            )
            verifying[digest] = verification
        }
        let result = await verification.check.value
        verifying[digest] = nil
        switch result {
        case .success(let proof):
            await throttle.succeed(userName: userName, address: address)
            // A password changed while it was checked: this answer stands, but is not remembered past the change.
            if changes.load(ordering: .acquiring) == verification.changes {
                credentials[userName] = CachedCredential(digest: digest, proof: proof, expires: clock.now + credentialTTL)
            }
            guard let caller = try await knownCaller(userID: proof.userID) else { throw .rejected }
            return (caller, proof)
        case .failure(.rejected):
            await throttle.fail(userName: userName, address: address)
            throw .rejected
        case .failure(let failure):
            throw failure
        }
    }

    /// One bcrypt check against the stored hash, or against a decoy when the account is unknown or may not
    /// log in, so that every rejection costs the same.
    private static func verify(
        userName: String, password: String, users: UserDirectory, hasher: PasswordHasher
    ) async -> Result<UserDirectory.CredentialProof, LoginFailure> {
        let account: UserDirectory.Account?
        do {
            account = try await users.account(userName: userName)
        } catch {
            return .failure(.unavailable)
        }
        do {
            guard let account, account.canLogIn else {
                try await hasher.verifyDecoy(password)
                return .failure(.rejected)
            }
            guard try await hasher.verify(password, hash: account.passwordHash) else { return .failure(.rejected) }
            return .success(.init(userID: account.userID, passwordHash: account.passwordHash, userName: userName))
        } catch {
            return .failure(.busy)
        }
    }

    /// Whether a refused login was refused only because the account is locked: it exists, is active, is locked
    /// out, and the password is its password. Only the web UI's sign-in asks, after a refusal (one more bcrypt
    /// check, made only for locked accounts), so that only someone who knows the password learns of the lock.
    func isLockedOut(userName: String, password: String) async -> Bool {
        guard let account = try? await users.account(userName: userName), account.active, account.lockedOut,
            !account.passwordHash.isEmpty
        else { return false }
        return (try? await hasher.verify(password, hash: account.passwordHash)) ?? false
    }

    /// Authenticates Basic credentials and returns the caller with their session token, in one actor hop.
    /// `client` tells the user's clients apart (see ``sessionToken(for:client:)``).
    func login(userName: String, password: String, address: String, client: String = "") async throws(LoginFailure)
        -> (caller: Caller, sessionToken: String)
    {
        let (caller, proof) = try await proving(userName: userName, password: password, address: address)
        return (caller, try await sessionToken(for: caller, client: client, proof: proof))
    }

    /// The caller for a bearer token's user with the session to carry in the cookie (nil when the presented
    /// cookie already is that user's session), in one actor hop.
    /// The session is issued only while the bearer credential (`parent`) still exists.
    func bearerLogin(
        userID: String, presentedSession: String?, client: String = "", parent: UserDirectory.CredentialProof.Parent? = nil
    ) async throws(LoginFailure) -> (caller: Caller, sessionToken: String?) {
        guard let caller = try await knownCaller(userID: userID) else { throw .rejected }
        if let presentedSession, let session = sessions[presentedSession], session.userID == userID,
            session.expires > clock.now
        {
            try await extend(presentedSession)
            return (caller, nil)
        }
        return (caller, try await sessionToken(for: caller, client: client, proof: .init(userID: userID, parent: parent)))
    }

    /// The session token for a caller's client (its address and `User-Agent`): one live session per client, so
    /// clients that never keep cookies do not pile up sessions, and a logout on one machine does not end the
    /// sessions of the user's other machines.
    func sessionToken(
        for caller: Caller, client: String = "", proof: UserDirectory.CredentialProof? = nil
    ) async throws(LoginFailure) -> String {
        let key = ClientKey(userID: caller.userID, client: client)
        // Where the database is shared, another docketd may have ended this session: then the cookie handed out
        // here is refused on its next use (extending never brings a session back), and the client, which just
        // proved its password, logs in again. Not worth a database read on every Basic request.
        if let token = sessionByClient[key], let session = sessions[token], session.expires > clock.now {
            try await extend(token)
            return token
        }
        let token = try await newSession(for: caller, proof: proof)
        sessionByClient[key] = token
        if sessionByClient.count > 20_000 { sessionByClient = sessionByClient.filter { sessions[$0.value] != nil } }
        return token
    }

    /// A web UI session of its own for a caller a trusted provider signed in (no password here).
    func signIn(_ caller: Caller) async throws(LoginFailure) -> String { try await newSession(for: caller) }

    /// Signs in with a session of its own (the web UI: each browser signs out alone), not the user's shared one.
    func signIn(userName: String, password: String, address: String) async throws(LoginFailure) -> String {
        let (caller, proof) = try await proving(userName: userName, password: password, address: address)
        return try await newSession(for: caller, proof: proof)
    }

    /// Starts a new session for a caller and returns its token. The session is stored only if `proof` (by default:
    /// that the user may still sign in) still holds when it is; else the login is refused, as it would be now.
    private func newSession(for caller: Caller, proof: UserDirectory.CredentialProof? = nil) async throws(LoginFailure) -> String {
        let now = clock.now
        let token = SysID.generate().uppercased()
        let storedExpires = SessionStore.now() + timeoutSeconds
        let changesBefore = changes.load(ordering: .acquiring)
        let saved: Bool
        do {
            saved = try await sessionStore.save(
                token, userID: caller.userID, expires: storedExpires, proof: proof ?? .init(userID: caller.userID)
            )
        } catch {
            throw .unavailable
        }
        guard saved else { throw .rejected }
        // A change to users committed after the session was stored may have ended it: the database decides then.
        guard changes.load(ordering: .acquiring) == changesBefore else { return token }
        sessions[token] = Session(userID: caller.userID, expires: clock.now + sessionTimeout, storedExpires: storedExpires)
        if sessions.count > 10_000 { sessions = sessions.filter { $0.value.expires > now } }
        return token
    }

    /// The caller of a live session, extending it; nil for unknown or expired tokens.
    func caller(sessionToken token: String) async throws(LoginFailure) -> Caller? {
        dropStaleCaches()
        if sessionStore.isShared || sessions[token] == nil {
            // The database decides: another docketd (or this one before a restart) may have started or ended it.
            // A logout or a change to users that ends while the database is read may be this session's: what was
            // read then answers this request (it came first) but is not remembered, as it could outlive the change.
            let seenGeneration = credentialGeneration
            let stored: SessionStore.Stored?
            do {
                stored = try await sessionStore.load(token)
            } catch {
                throw .unavailable
            }
            dropStaleCaches()
            guard let stored, stored.expires > SessionStore.now() else {
                sessions[token] = nil
                return nil
            }
            guard credentialGeneration == seenGeneration else { return try await knownCaller(userID: stored.userID) }
            if sessions[token] == nil {
                let remaining = Duration.seconds(stored.expires - SessionStore.now())
                sessions[token] = Session(userID: stored.userID, expires: clock.now + remaining, storedExpires: stored.expires)
            }
        }
        let now = clock.now
        guard let session = sessions[token] else { return nil }
        guard session.expires > now else {
            sessions[token] = nil
            return nil
        }
        try await extend(token)
        return try await knownCaller(userID: session.userID)
    }

    private var timeoutSeconds: Int { Int(sessionTimeout.components.seconds) }

    /// Slides a session's expiry; writes it to the database when it moved by a minute or more.
    private func extend(_ token: String) async throws(LoginFailure) {
        guard let session = sessions[token] else { return }
        sessions[token]?.expires = clock.now + sessionTimeout
        let storedExpires = SessionStore.now() + timeoutSeconds
        guard storedExpires - session.storedExpires >= 60 else { return }
        sessions[token]?.storedExpires = storedExpires
        do {
            try await sessionStore.extend(token, to: storedExpires)
        } catch {
            throw .unavailable
        }
    }

    /// Counts every change that can end a credential (a logout, a changed user or role): long-lived answers
    /// check their credential again only when it moved (or on their heartbeat, for expiry).
    /// A count moves only once its change has taken effect.
    nonisolated var credentialGeneration: Int {
        changes.load(ordering: .acquiring) + logouts.load(ordering: .acquiring)
    }

    /// Ends a session (logout); unknown tokens are ignored. Throws ``LoginFailure/unavailable`` when the end could
    /// not be recorded: the session then still works (here and on every docketd sharing the database), and the
    /// caller must say the logout failed rather than pretend it happened.
    func endSession(_ token: String) async throws(LoginFailure) {
        let ended: Bool
        do {
            ended = try await sessionStore.delete(token)
        } catch {
            throw .unavailable
        }
        // Only a session that was live moves the count (every open socket and stream looks at its credential again
        // when it moves: a flood of logouts with made-up cookies must not make them all look).
        if ended { logouts.add(1, ordering: .releasing) }
        guard sessions.removeValue(forKey: token) != nil else { return }
        sessionByClient = sessionByClient.filter { $0.value != token }
    }

    /// Forgets what a change to users, roles or their grants made stale; a new password, a lock, a deactivation
    /// or a deleted user ends that user's sessions.
    nonisolated func observe(_ event: ChangeEvent) {
        guard Self.userTables.contains(event.table) else { return }
        if event.table == "sys_user",
            event.operation == .delete || event.fields.contains(where: UserDirectory.credentialFields.contains)
        {
            endSessions(ofUser: event.sysID)
        } else {
            invalidate()
        }
    }

    /// Tables whose changes change callers: users, roles, where users are staff (their domains), and system
    /// properties (the default time zone).
    static let userTables: Set<String> = [
        "sys_user", "sys_user_has_role", "sys_user_role", "sys_site_member", "sys_site", "sys_properties",
    ]

    /// Forgets cached credentials and callers (after a change to users or roles). Synchronous, so the very
    /// next request sees the change: the caches are dropped on the actor's next use.
    nonisolated func invalidate() {
        changes.add(1, ordering: .releasing)
    }

    /// Ends every session and cached credential of a user whose password, lock or active flag changed, at once
    /// (synchronous, like ``invalidate()``).
    nonisolated func endSessions(ofUser userID: String) {
        endedUsers.withLock { _ = $0.insert(userID) }
        changes.add(1, ordering: .releasing)
    }

    /// Drops the caches when users or roles changed since they were filled.
    private func dropStaleCaches() {
        let current = changes.load(ordering: .acquiring)
        guard current != seenChanges else { return }
        seenChanges = current
        credentials = [:]
        callers = [:]
        let ended = endedUsers.withLock { users in
            defer { users = [] }
            return users
        }
        guard !ended.isEmpty else { return }
        sessions = sessions.filter { !ended.contains($0.value.userID) }
        sessionByClient = sessionByClient.filter { !ended.contains($0.key.userID) }
    }

    /// The caller for a user sys_id (cached briefly); nil when the user is gone, inactive or locked out.
    func caller(userID: String) async throws(LoginFailure) -> Caller? {
        try await knownCaller(userID: userID)
    }

    private func knownCaller(userID: String) async throws(LoginFailure) -> Caller? {
        dropStaleCaches()
        let now = clock.now
        if let cached = callers[userID], cached.expires > now { return cached.caller }
        let changesBefore = changes.load(ordering: .acquiring)
        let caller: Caller?
        do {
            caller = try await users.caller(userID: userID)
        } catch {
            throw .unavailable
        }
        guard let caller else { return nil }
        // Users or roles changed while it was read: not remembered past the change.
        if changes.load(ordering: .acquiring) == changesBefore { callers[userID] = (caller, now + credentialTTL) }
        return caller
    }
}
