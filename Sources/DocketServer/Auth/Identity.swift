import DocketModel
import Foundation

/// The one way in: credentials as a request presents them (a user name and password, a bearer token, a session
/// token) → the ``Caller`` they stand for, or a typed ``Refusal`` that each dialect words in its own shape. Login
/// throttling (and holding back a throttled answer), locked and deactivated accounts, logouts and revocations are
/// decided here, once, for every dialect: the ServiceNow APIs, DataSync, the GraphQL sockets, the web UI, and the
/// checks live streams repeat while they run.
struct Identity: Sendable {
    /// Why credentials did not establish a caller.
    enum Refusal: Error, Sendable, Equatable {
        /// No credentials were presented.
        case missing
        /// A user name and password that do not log in (wrong, unknown, locked, deactivated).
        case rejected
        /// A bearer token that is not one (unknown, expired, revoked, or its user may no longer log in).
        case invalidToken
        /// A session that ended (logout, expiry, a new password, a lock).
        case sessionEnded
        /// Too many failed logins from this client: try again after the wait.
        case throttled(retryAfter: Duration)
        /// Password checking is at capacity: try again shortly.
        case busy
        /// The database could not be read: not the caller's fault, and no answer about the credentials.
        case unavailable

        /// `Retry-After` seconds for a refusal that asks to try again later; nil for the others.
        var retryAfter: String? { loginFailure.retryAfter }

        /// The same refusal as a login failure (for the dialects that answer in those terms).
        var loginFailure: LoginFailure {
            switch self {
            case .throttled(let wait): .throttled(retryAfter: wait)
            case .busy: .busy
            case .unavailable: .unavailable
            default: .rejected
            }
        }
    }

    /// What a bearer token may be besides docketd's OAuth access token.
    struct BearerOptions: Sendable {
        /// Give the caller a session as well (a cookie for clients that keep them), reusing `presentedSession`
        /// when it is already this user's; `client` tells the user's clients apart.
        var session: (presented: String?, client: String)? = nil
        /// Accept a Compass login token too.
        var compassTokens = false
    }

    let authenticator: Authenticator
    let oauth: OAuthService
    /// Compass login tokens, when the server speaks Compass.
    var compass: CompassTokens? = nil
    /// The OpenID provider, whose access tokens (RS256 JWTs) are bearer tokens everywhere.
    var openID: OpenIDProvider? = nil
    /// Trusted outside OpenID providers (`--oidc-trust`), whose tokens are bearer tokens everywhere too.
    var federation: Federation? = nil
    /// ETO's context tokens (SSO and site tokens), when the server speaks ETO.
    var contexts: ContextSessions? = nil
    /// Credentials of apps rather than people: push variants and applications (UPS), the metrics token.
    var apps: AppCredentials? = nil
    /// REST API keys (`x-sn-apikey`).
    var apiKeys: APIKeys? = nil
    /// Client certificates that sign in (only when docketd asks for them: `--tls-client-ca`).
    var certificates: ClientCertificates? = nil

    /// The cookie API sessions travel in: `JSESSIONID`, the name ServiceNow's clients keep.
    static let sessionCookieName = "JSESSIONID"

    /// Logs in with a user name and password: the caller and their session for `client` (the user's other
    /// clients keep theirs). A throttled attempt's answer is held back here.
    func login(userName: String, password: String, address: String, client: String) async throws(Refusal)
        -> (caller: Caller, session: String)
    {
        try await passwordChecked { () async throws(LoginFailure) in
            let (caller, session) = try await authenticator.login(userName: userName, password: password, address: address, client: client)
            return (caller, session)
        }
    }

    /// Checks a user name and password without starting a session: for logins that issue a credential of their
    /// own (a Compass token, an ETO sign-in token). A throttled attempt's answer is held back here.
    /// The proof is what the credential's write checks again (``UserDirectory/holds(_:_:)``).
    func verify(userName: String, password: String, address: String) async throws(Refusal)
        -> (caller: Caller, proof: UserDirectory.CredentialProof)
    {
        try await passwordChecked { () async throws(LoginFailure) in
            try await authenticator.proving(userName: userName, password: password, address: address)
        }
    }

    /// Signs in to the web UI: a new session of its own. A throttled attempt's answer is held back here.
    func signIn(userName: String, password: String, address: String) async throws(Refusal) -> String {
        try await passwordChecked { () async throws(LoginFailure) in
            try await authenticator.signIn(userName: userName, password: password, address: address)
        }
    }

    /// The OAuth token endpoint's grants (`/oauth_token.do`): the client's secret, and a password grant's user name
    /// and password, checked here like every other password (throttled, a throttled answer held back). Nil when the
    /// grant is refused (ServiceNow answers every refusal alike).
    func grant(form: [String: String], basicClient: (id: String, secret: String)?, address: String) async throws(Refusal)
        -> OAuthService.Grant?
    {
        try await passwordChecked { () async throws(LoginFailure) in
            try await oauth.grant(form: form, basicClient: basicClient) { userName, password async throws(LoginFailure) in
                try await authenticator.proving(userName: userName, password: password, address: address)
            }
        }
    }

    /// Signs in to the web UI with a trusted provider's ID token (its code flow, started with `nonce`): the caller the
    /// token's identity is linked to and a new web session; nil when it is linked to nobody who may sign in.
    func signIn(idToken: String, issuer: TrustedIssuer, nonce: String) async throws(Refusal) -> (caller: Caller, session: String)? {
        guard let federation else { return nil }
        do throws(LoginFailure) {
            guard let userID = try await federation.user(idToken: idToken, issuer: issuer, nonce: nonce),
                let caller = try await authenticator.caller(userID: userID)
            else { return nil }
            return (caller, try await authenticator.signIn(caller))
        } catch {
            throw Self.refusal(error)
        }
    }

    /// The context and caller of an ETO token (an SSO token, or a site token bound to an enterprise and site): its
    /// session must be live and its user still able to sign in.
    func context(_ token: String, kind: ContextSessions.Kind) async throws(Refusal) -> (context: ContextSessions.Context, caller: Caller) {
        guard let contexts else { throw .invalidToken }
        do {
            guard let context = try await contexts.load(token, kind: kind), let caller = try await authenticator.caller(userID: context.userID) else {
                throw Refusal.invalidToken
            }
            return (context, caller)
        } catch let refusal as Refusal {
            throw refusal
        } catch {
            throw .unavailable
        }
    }

    /// A Compass login token's claims and caller (Compass's own API, which binds a token to its repository).
    func compassToken(_ token: String) async throws(Refusal) -> (claims: CompassTokens.Claims, caller: Caller) {
        let found: (claims: CompassTokens.Claims, caller: Caller)?
        do { found = try await compassCaller(token) } catch { throw Self.refusal(error) }
        guard let found else { throw .invalidToken }
        return found
    }

    /// The caller of a bearer token, how it was presented, and a session to issue when `options` asks for one
    /// (nil when the presented one already serves).
    func bearer(_ token: String, options: BearerOptions = BearerOptions()) async throws(Refusal)
        -> (caller: Caller, credential: PresentedCredential, issuedSession: String?)
    {
        do {
            if let (userID, parent) = try await bearerUser(token) {
                if let session = options.session {
                    let (caller, issued) = try await authenticator.bearerLogin(
                        userID: userID, presentedSession: session.presented, client: session.client, parent: parent
                    )
                    return (caller, .bearer(token), issued)
                }
                guard let caller = try await authenticator.caller(userID: userID) else { throw Refusal.invalidToken }
                return (caller, .bearer(token), nil)
            }
            if options.compassTokens, let (_, caller) = try await compassCaller(token) {
                return (caller, .compass(token), nil)
            }
            throw Refusal.invalidToken
        } catch let refusal as Refusal {
            throw refusal
        } catch let failure as LoginFailure {
            // A bearer's user that may no longer log in: the token no longer stands for anyone.
            throw failure == .rejected ? .invalidToken : Self.refusal(failure)
        } catch {
            throw .unavailable
        }
    }

    /// The caller of a REST API key (`x-sn-apikey`): its user, while the key is active and unexpired and the user may
    /// sign in.
    func apiKey(_ key: String) async throws(Refusal) -> Caller {
        let userID: String?
        guard let apiKeys else { throw .rejected }
        do { userID = try await apiKeys.userID(key: key) } catch { throw .unavailable }
        guard let userID else { throw .rejected }
        let caller: Caller?
        do { caller = try await authenticator.caller(userID: userID) } catch { throw Self.refusal(error) }
        guard let caller else { throw .rejected }
        return caller
    }

    /// The caller of a client certificate (its SHA-256 fingerprint), when one is registered, active and unexpired;
    /// nil when it stands for nobody here (the request's other credentials then count).
    func certificate(_ fingerprint: String) async throws(Refusal) -> Caller? {
        guard let certificates else { return nil }
        let userID: String?
        do { userID = try await certificates.userID(fingerprint: fingerprint) } catch { throw .unavailable }
        guard let userID else { return nil }
        do { return try await authenticator.caller(userID: userID) } catch { throw Self.refusal(error) }
    }

    /// The caller of a session token.
    func session(_ token: String) async throws(Refusal) -> Caller {
        let caller: Caller?
        do { caller = try await authenticator.caller(sessionToken: token) } catch { throw Self.refusal(error) }
        guard let caller else { throw .sessionEnded }
        return caller
    }

    /// The caller a credential that was accepted earlier stands for now (a live stream or socket checks again
    /// while it runs); nil when it ended or now stands for someone else. Throws ``Refusal/unavailable`` when that
    /// could not be looked up: the stream then ends so that its client resumes later, never as if it had ended.
    func recheck(_ credential: PresentedCredential, as current: Caller) async throws(Refusal) -> Caller? {
        do throws(LoginFailure) {
            switch credential {
            case .session(let token):
                return try await authenticator.caller(sessionToken: token)
            case .bearer(let token):
                guard let userID = try await bearerUser(token)?.userID, userID == current.userID else { return nil }
                return try await authenticator.caller(userID: userID)
            case .compass(let token):
                guard let (_, caller) = try await compassCaller(token), caller.userID == current.userID else { return nil }
                return caller
            case .certificate(let fingerprint):
                let userID: String?
                do { userID = try await certificates?.userID(fingerprint: fingerprint) } catch { throw LoginFailure.unavailable }
                guard let userID, userID == current.userID else { return nil }
                return try await authenticator.caller(userID: userID)
            case .apiKey(let key):
                let userID: String?
                do { userID = try await apiKeys?.userID(key: key) } catch { throw LoginFailure.unavailable }
                guard let userID, userID == current.userID else { return nil }
                return try await authenticator.caller(userID: userID)
            }
        } catch {
            throw Self.refusal(error)
        }
    }

    /// The user of a bearer token that holds: an OpenID access token (a JWT) or an OAuth access token (opaque).
    /// The user a bearer token stands for, and the stored credential behind it (none for a trusted provider's
    /// token, which docketd does not keep).
    private func bearerUser(_ token: String) async throws(LoginFailure)
        -> (userID: String, parent: UserDirectory.CredentialProof.Parent?)?
    {
        let isJWT = Self.isJWT(token)
        if let federation, isJWT, case .some(let linked) = try await federation.userID(token) {
            // A trusted provider's token (linked to nobody: nil).
            return linked.map { ($0, nil) }
        }
        if let openID, isJWT {
            do {
                return try await openID.access(token).map { ($0.userID, .openIDSession(sid: $0.claims.sid)) }
            } catch {
                throw .unavailable
            }
        }
        return try await oauth.userID(accessToken: token).map { ($0, .oauthToken(hash: OAuthService.hash(token))) }
    }

    /// Whether a token is shaped like a JWS (three base64url parts): docketd's opaque tokens never are.
    static func isJWT(_ token: String) -> Bool {
        var token = token
        return token.withUTF8 { bytes in
            var dots = 0
            for byte in bytes where byte == UInt8(ascii: ".") { dots += 1 }
            return dots == 2
        }
    }

    /// The claims and caller of a Compass login token; nil for a token that does not hold (or no Compass here).
    private func compassCaller(_ token: String) async throws(LoginFailure) -> (claims: CompassTokens.Claims, caller: Caller)? {
        guard let compass else { return nil }
        let verified: (claims: CompassTokens.Claims, userID: String)?
        do { verified = try await compass.verify(token) } catch { throw .unavailable }
        guard let verified, let caller = try await authenticator.caller(userID: verified.userID) else { return nil }
        return (verified.claims, caller)
    }

    /// A password check's outcome as a refusal, a throttled one's answer held back first.
    private func passwordChecked<T>(_ check: () async throws(LoginFailure) -> T) async throws(Refusal) -> T {
        do {
            return try await check()
        } catch {
            await error.holdBack(authenticator)
            throw Self.refusal(error)
        }
    }

    private static func refusal(_ failure: LoginFailure) -> Refusal {
        switch failure {
        case .rejected: .rejected
        case .throttled(let wait): .throttled(retryAfter: wait)
        case .busy: .busy
        case .unavailable: .unavailable
        }
    }
}
